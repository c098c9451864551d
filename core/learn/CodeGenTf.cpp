// The TensorFlow/Keras program: tf.distribute.MirroredStrategy, the model built and compiled in
// strategy.scope(), a tf.data pipeline batched at the global batch (which the strategy splits
// across replicas), the learning rate scaled with num_replicas_in_sync and an optional linear
// warm-up schedule that matches the Trainer's.

#include "learn/CodeGen.h"
#include "learn/CodeGenParts.h"

namespace ml {

using namespace codegen;

namespace {

// Keras refuses some characters in layer names; keep a project's name only when it is plain.
std::string nameArg(const std::string& name) {
  // [A-Za-z_][A-Za-z0-9_.-]*, scanned by hand: std::regex recurses per character on long names.
  auto alpha = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  bool plain = !name.empty() && alpha(name[0]);
  for (char c : name) plain = plain && (alpha(c) || (c >= '0' && c <= '9') || c == '.' || c == '-');
  return plain ? ", name=" + pyStr(name) : "";
}

std::string kerasLayer(const LayerPlan& l) {
  if (l.type == "Dense")
    return "tf.keras.layers.Dense(" + pyInt(l.units) + ", activation=" + pyStr(l.activation) + ", use_bias=" + pyBool(l.useBias) +
           ", kernel_initializer=" + pyStr(l.kernelInit) + ", bias_initializer=" + pyStr(l.biasInit) + nameArg(l.name) + ")";
  if (l.type == "Activation") return "tf.keras.layers.Activation(" + pyStr(l.activation) + nameArg(l.name) + ")";
  if (l.type == "Dropout") return "tf.keras.layers.Dropout(" + pyNum(l.rate) + ", seed=SEED" + nameArg(l.name) + ")";
  return "tf.keras.layers.Flatten(" + std::string(nameArg(l.name).empty() ? "" : nameArg(l.name).substr(2)) + ")";
}

std::string kerasOptimizer(const OptimizerSpec& o) {
  if (o.name == "sgd")
    return "tf.keras.optimizers.SGD(learning_rate=learning_rate, momentum=" + pyNum(o.momentum) + ", nesterov=" + pyBool(o.nesterov) + ")";
  if (o.name == "rmsprop")
    return "tf.keras.optimizers.RMSprop(learning_rate=learning_rate, rho=" + pyNum(o.rho) + ", momentum=" + pyNum(o.momentum) +
           ", epsilon=" + pyNum(o.epsilon) + ")";
  return "tf.keras.optimizers.Adam(learning_rate=learning_rate, beta_1=" + pyNum(o.beta1) + ", beta_2=" + pyNum(o.beta2) +
         ", epsilon=" + pyNum(o.epsilon) + ")";
}

std::string kerasLoss(const TrainingSpec& t) {
  if (t.loss == "sparse_categorical_crossentropy")
    return "tf.keras.losses.SparseCategoricalCrossentropy(from_logits=" + pyBool(t.fromLogits) + ")";
  if (t.loss == "categorical_crossentropy") return "tf.keras.losses.CategoricalCrossentropy(from_logits=" + pyBool(t.fromLogits) + ")";
  return "tf.keras.losses.MeanSquaredError()";
}

std::string kerasMetrics(const TrainingSpec& t) {
  std::string out = "[";
  for (const auto& m : t.metrics) {
    const std::string k = (m == "acc" || m == "accuracy") ? "accuracy" : (m == "mean_absolute_error" || m == "mae") ? "mae" : m;
    out += (out.size() > 1 ? ", " : "") + pyStr(k);
  }
  return out + "]";
}

constexpr const char* kWarmup = R"PY(

class LinearWarmup(tf.keras.optimizers.schedules.LearningRateSchedule):
    """From the base rate to the scaled rate over the first warmup_steps updates, then constant."""

    def __init__(self, base_lr, target_lr, warmup_steps):
        self.base_lr, self.target_lr, self.warmup_steps = float(base_lr), float(target_lr), float(warmup_steps)

    def __call__(self, step):
        done = tf.minimum(tf.cast(step, tf.float32) / self.warmup_steps, 1.0)
        return self.base_lr + (self.target_lr - self.base_lr) * done

    def get_config(self):
        return {"base_lr": self.base_lr, "target_lr": self.target_lr, "warmup_steps": self.warmup_steps}
)PY";

constexpr const char* kStopAfter = R"PY(

class StopAfterSteps(tf.keras.callbacks.Callback):
    """--steps N: stop after N optimizer updates (a quick check that everything runs)."""

    def __init__(self, steps):
        super().__init__()
        self.steps, self.done = steps, 0

    def on_train_batch_end(self, batch, logs=None):
        self.done += 1
        if self.done >= self.steps:
            self.model.stop_training = True
)PY";

}  // namespace

std::string generateTensorFlowProgram(const Project& p) {
  const ModelPlan model = planModel(p);
  const TrainingSpec& t = p.training;
  const std::string file = suggestedFileName(p, Framework::TensorFlow);
  const std::string batchWords = t.perDeviceBatch ? std::to_string(t.batchSize) + " per replica" : std::to_string(t.batchSize) + " in all";
  std::string out = headerComment(
      p, "TensorFlow/Keras",
      {"Mirrored training: tf.distribute.MirroredStrategy makes one replica (a full copy of the model) per device;",
       "each global batch (" + batchWords + ") is split into strategy.num_replicas_in_sync shards, one per replica;",
       "every step each replica computes gradients on its shard, an all-reduce sums them across replicas (the mean",
       "over the global batch), and every replica applies the same update, so the copies stay identical."});
  out += "\"\"\"Run: python3 " + file + " [--epochs N] [--steps N] [--data FOLDER]\n\n"
         "Needs TensorFlow 2 and numpy. MirroredStrategy uses every visible GPU (one replica each); on a\n"
         "machine without one it trains on the CPU as a single replica. Project: " +
         pyDocText(p.description) + "\n\"\"\"\n";
  out += "import argparse\nimport gzip\nimport math\nimport os\n\nimport numpy as np\nimport tensorflow as tf\n\n";
  out += "EPOCHS = " + pyInt(t.epochs) + "\nSEED = " + std::to_string(t.seed) + "\n";
  if (t.perDeviceBatch)
    out += "PER_REPLICA_BATCH = " + pyInt(t.batchSize) + "  # the project's batch per device: global = this x num_replicas_in_sync\n";
  else
    out += "GLOBAL_BATCH = " + pyInt(t.batchSize) + "  # the project's global batch: each replica gets GLOBAL_BATCH / num_replicas_in_sync\n";
  out += "BASE_LEARNING_RATE = " + pyNum(t.optimizer.learningRate) + "  # for one replica\n";
  out += "LR_SCALING = " + pyStr(t.lrScaling) + "  # none | linear | sqrt: the rate grows with num_replicas_in_sync\n";
  out += "WARMUP_EPOCHS = " + pyNum(t.warmupEpochs) + "\n";
  if (t.accumulate > 1)
    out += "# The project accumulates " + std::to_string(t.accumulate) +
           " micro-batches per update; the update (one global batch) is the same without it, so this program does not.\n";
  out += dataLoaderPython(p);
  out += "\n\n# ---- model: " + std::to_string(model.params) + " parameters ----\n";
  out += "def build_model():\n    return tf.keras.Sequential([\n        tf.keras.Input(shape=" + pyShape(model.input) + "),\n";
  for (const auto& l : model.layers) out += "        " + kerasLayer(l) + ",\n";
  out += "    ])\n\n\ndef make_optimizer(learning_rate):\n    return " + kerasOptimizer(t.optimizer) + "\n";
  if (t.warmupEpochs > 0) out += kWarmup;
  out += kStopAfter;
  out += R"PY(

def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--steps", type=int, default=0, help="stop after this many updates (0: every epoch)")
    parser.add_argument("--data", default=None, help="folder holding the data files")
    args = parser.parse_args()

    tf.keras.utils.set_random_seed(SEED)
    strategy = tf.distribute.MirroredStrategy()  # one replica per visible GPU, else the CPU
    replicas = strategy.num_replicas_in_sync
)PY";
  if (t.perDeviceBatch)
    out += "    global_batch = PER_REPLICA_BATCH * replicas\n";
  else
    out += "    global_batch = GLOBAL_BATCH\n";
  out += R"PY(    lr_factor = {"none": 1.0, "linear": float(replicas), "sqrt": math.sqrt(replicas)}[LR_SCALING]
    learning_rate = BASE_LEARNING_RATE * lr_factor
    print(f"{replicas} replica(s): global batch {global_batch} ({math.ceil(global_batch / replicas)} per replica), "
          f"learning rate {BASE_LEARNING_RATE} x {lr_factor:g} = {learning_rate:g} ({LR_SCALING} scaling)")

    x_train, y_train, x_val, y_val, num_classes = load_data(args.data)
)PY";
  if (t.loss == "categorical_crossentropy")
    out += "    y_train = tf.keras.utils.to_categorical(y_train, num_classes)  # categorical_crossentropy wants one-hot targets\n"
           "    y_val = tf.keras.utils.to_categorical(y_val, num_classes) if y_val is not None else None\n";
  out += R"PY(    steps_per_epoch = math.ceil(len(x_train) / global_batch)
    # Batched at the GLOBAL batch: the strategy splits every batch across the replicas.
    train_ds = (tf.data.Dataset.from_tensor_slices((x_train, y_train))
                .shuffle(len(x_train), seed=SEED, reshuffle_each_iteration=True)
                .batch(global_batch)
                .prefetch(tf.data.AUTOTUNE))
    val_ds = tf.data.Dataset.from_tensor_slices((x_val, y_val)).batch(global_batch) if x_val is not None else None

)PY";
  if (t.warmupEpochs > 0)
    out += "    schedule = LinearWarmup(BASE_LEARNING_RATE, learning_rate, WARMUP_EPOCHS * steps_per_epoch)\n";
  else
    out += "    schedule = learning_rate\n";
  out += R"PY(    with strategy.scope():  # variables created here are mirrored: one copy per replica
        model = build_model()
        model.compile(optimizer=make_optimizer(schedule),
                      loss=)PY" +
         kerasLoss(t) + ",\n                      metrics=" + kerasMetrics(t) + ")\n";
  out += R"PY(    model.summary()
    callbacks = [StopAfterSteps(args.steps)] if args.steps > 0 else []
    model.fit(train_ds, epochs=args.epochs, validation_data=val_ds, callbacks=callbacks, verbose=2)


if __name__ == "__main__":
    main()
)PY";
  return out;
}

}  // namespace ml
