// The TensorFlow/Keras program: tf.distribute.MirroredStrategy over every GPU, or over the
// project's N devices as N logical CPU devices when there is none; the model built and compiled in
// strategy.scope(); Mirrorlab's shuffle fed at the global batch (accumulation included), which the
// strategy splits across the replicas; Keras' optimizers (Mirrorlab uses their formulas); the
// learning rate scaled with num_replicas_in_sync and the Trainer's linear warm-up.
#include <regex>

#include "learn/CodeGen.h"
#include "learn/CodeGenParts.h"
#include "project/LrScaling.h"

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

std::string kerasLayer(const LayerPlan& l, size_t index) {
  if (l.type == "Dense")
    return "tf.keras.layers.Dense(" + pyInt(l.units) + ", activation=" + pyStr(l.activation) + ", use_bias=" + pyBool(l.useBias) +
           ", kernel_initializer=" + pyStr(l.kernelInit) + ", bias_initializer=" + pyStr(l.biasInit) + nameArg(l.name) + ")";
  if (l.type == "Activation" && l.activation == "softmax" && l.outputShape.size() > 1) {
    // Mirrorlab's softmax spans the whole sample; Keras' Activation("softmax") only the last axis.
    std::string axes;
    for (size_t i = 1; i <= l.outputShape.size(); ++i) axes += (axes.empty() ? "" : ", ") + std::to_string(i);
    return "tf.keras.layers.Softmax(axis=[" + axes + "]" + nameArg(l.name) + ")";
  }
  if (l.type == "Activation") return "tf.keras.layers.Activation(" + pyStr(l.activation) + nameArg(l.name) + ")";
  const auto pair = [&](const char* key) { return pyShape(Shape{l.args[key][0].get<int64_t>(), l.args[key][1].get<int64_t>()}); };
  if (l.type == "Conv2D")
    return "tf.keras.layers.Conv2D(" + pyInt(l.args["filters"].get<int64_t>()) + ", " + pair("kernel_size") +
           ", strides=" + pair("strides") + ", padding=" + pyStr(l.args["padding"].get<std::string>()) +
           ", activation=" + pyStr(l.activation) + ", use_bias=" + pyBool(l.useBias) +
           ", kernel_initializer=" + pyStr(l.kernelInit) + ", bias_initializer=" + pyStr(l.biasInit) + nameArg(l.name) + ")";
  if (l.type == "MaxPooling2D" || l.type == "AveragePooling2D")
    return "tf.keras.layers." + l.type + "(" + pair("pool_size") + ", strides=" + pair("strides") +
           ", padding=" + pyStr(l.args["padding"].get<std::string>()) + nameArg(l.name) + ")";
  if (l.type == "GlobalAveragePooling2D")
    return "tf.keras.layers.GlobalAveragePooling2D(" + std::string(nameArg(l.name).empty() ? "" : nameArg(l.name).substr(2)) +
           ")";
  if (l.type == "BatchNormalization")  // synchronized: Keras 3's argument (TF 2.12+: SyncBatchNormalization underneath)
    return "tf.keras.layers.BatchNormalization(momentum=" + pyNum(l.args["momentum"].get<double>()) +
           ", epsilon=" + pyNum(l.args["epsilon"].get<double>()) + ", center=" + pyBool(l.args.value("center", true)) +
           ", scale=" + pyBool(l.args.value("scale", true)) + ", synchronized=" + pyBool(l.args.value("synchronized", false)) +
           nameArg(l.name) + ")";
  if (l.type == "Reshape") {
    Shape t;
    for (const auto& d : l.args["target_shape"]) t.push_back(d.get<int64_t>());
    return "tf.keras.layers.Reshape(" + pyShape(t) + nameArg(l.name) + ")";
  }
  if (l.type == "Dropout")  // its own seed per layer: two layers with one seed would drop the same units
    return "tf.keras.layers.Dropout(" + pyNum(l.rate) + ", seed=SEED + " + std::to_string(index) + nameArg(l.name) + ")";
  return "tf.keras.layers.Flatten(" + std::string(nameArg(l.name).empty() ? "" : nameArg(l.name).substr(2)) + ")";
}

std::string kerasOptimizer(const OptimizerSpec& o) {
  if (o.name == "sgd")
    return "tf.keras.optimizers.SGD(learning_rate=learning_rate, momentum=" + pyNum(o.momentum) +
           ", nesterov=" + pyBool(o.nesterov) + ")";
  if (o.name == "rmsprop")
    return "tf.keras.optimizers.RMSprop(learning_rate=learning_rate, rho=" + pyNum(o.rho) + ", momentum=" + pyNum(o.momentum) +
           ", epsilon=" + pyNum(o.epsilon) + ")";
  return "tf.keras.optimizers.Adam(learning_rate=learning_rate, beta_1=" + pyNum(o.beta1) + ", beta_2=" + pyNum(o.beta2) +
         ", epsilon=" + pyNum(o.epsilon) + ")";
}

std::string kerasLoss(const TrainingSpec& t) {
  if (t.loss == "sparse_categorical_crossentropy")
    return "tf.keras.losses.SparseCategoricalCrossentropy(from_logits=" + pyBool(t.fromLogits) + ")";
  if (t.loss == "categorical_crossentropy")
    return "tf.keras.losses.CategoricalCrossentropy(from_logits=" + pyBool(t.fromLogits) + ")";
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

// The project trains as WORKERS processes: TensorFlow's form of it.
constexpr const char* kMultiWorkerStrategy = R"PY(def make_strategy():
    """MultiWorkerMirroredStrategy: WORKERS processes (one per machine), as Mirrorlab's
        mpirun -np WORKERS --host host1,host2 mirrorlab-cli train PROJECT
    Start this program once per worker, each with TF_CONFIG naming every worker and its own index:
        TF_CONFIG='{"cluster": {"worker": ["host1:12345", "host2:12345"]},
                    "task": {"type": "worker", "index": 0}}' python3 this_program.py   # on host1
        (index 1 on host2). Each worker reads the same data; the strategy splits every global batch
    over all workers' replicas and all-reduces the gradients across them (ring collectives)."""
    if "TF_CONFIG" not in os.environ:
        sys.exit(f"this project trains as {WORKERS} workers: start this program on each with TF_CONFIG set "
                 "(see make_strategy's docstring)")
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.RING)
    # On CPUs each worker is one replica (TensorFlow does not split a worker's CPU into several).
    return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)


)PY";

constexpr const char* kHelpers = R"PY(

class LinearWarmup(tf.keras.optimizers.schedules.LearningRateSchedule):
    """From the base rate to the scaled rate over the first warmup_steps updates, then constant."""

    def __init__(self, base_lr, target_lr, warmup_steps):
        self.base_lr, self.target_lr, self.warmup_steps = float(base_lr), float(target_lr), float(warmup_steps)

    def __call__(self, step):
        done = tf.minimum(tf.cast(step, tf.float32) / self.warmup_steps, 1.0)
        return self.base_lr + (self.target_lr - self.base_lr) * done

    def get_config(self):
        return {"base_lr": self.base_lr, "target_lr": self.target_lr, "warmup_steps": self.warmup_steps}


class WarmupThenDecay(tf.keras.optimizers.schedules.LearningRateSchedule):
    """The warm-up's rate during its updates, then the decay's, as Mirrorlab multiplies them."""

    def __init__(self, warmup, decay, warmup_steps):
        self.warmup, self.decay, self.warmup_steps = warmup, decay, float(warmup_steps)

    def __call__(self, step):
        return self.warmup(step) * self.decay(step) / self.decay(0)

    def get_config(self):
        return {"warmup_steps": self.warmup_steps}


class StopAfterSteps(tf.keras.callbacks.Callback):
    """--steps N: stop after N optimizer updates, counted across the epochs' fit() calls."""

    def __init__(self, steps):
        super().__init__()
        self.steps, self.done = steps, 0

    def on_train_batch_end(self, batch, logs=None):
        self.done += 1
        if self.steps and self.done >= self.steps:
            self.model.stop_training = True


def require_keras():
    import keras
    if keras.__version__ == "3.7.0":
        sys.exit("Keras 3.7.0 cannot build a model with Dropout inside MirroredStrategy.scope() (fixed in 3.8.0): "
                 "pip install 'keras!=3.7.0'")


def make_strategy():
    """MirroredStrategy over every visible GPU; without one, over DEVICES logical CPU devices."""
    if tf.config.list_physical_devices("GPU"):
        return tf.distribute.MirroredStrategy()
    # Without this, MirroredStrategy() sees one CPU device and trains a single replica. It must run
    # before the TensorFlow runtime is initialised (by the first op or the first logical-device query).
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(DEVICES)])
    return tf.distribute.MirroredStrategy(devices=[d.name for d in tf.config.list_logical_devices("CPU")])


def load_weights(model, path):
    """Weights saved by Mirrorlab (mirrorlab-cli train --save-initial-weights / --save-weights FILE.npz)."""
    with np.load(path) as z:
        for name, keys in WEIGHT_ARRAYS.items():
            layer = model.get_layer(name)
            missing = [k for k in keys if k not in z.files]
            if missing:
                sys.exit(f"{path}: no array {missing[0]!r} (it holds {', '.join(z.files)}): save it from this project")
            layer.set_weights([z[k] for k in keys])  # Keras' layouts ((in, out), (kh, kw, in, filters)), as Mirrorlab stores them
)PY";

// The lines that name what this program does not do exactly as Mirrorlab (none when it does).
std::vector<std::string> tfDifferences(const Project& p, const ModelPlan& m) {
  std::vector<std::string> out;
  for (const auto& l : m.layers)
    if (l.type == "Dropout" && l.rate > 0) {
      out.push_back("Differs from Mirrorlab: dropout masks are Keras' draws (a seed per layer), not Mirrorlab's masks keyed");
      out.push_back("by step and sample, so with dropout the two runs agree in distribution only.");
      break;
    }
  if (p.training.precision != "float32") {
    out.push_back("Mixed precision: Keras' " + p.training.precision + " policy (set_global_policy)" +
                  (p.training.precision == "mixed_float16" ? ", with a LossScaleOptimizer" : "") + ". Differs from");
    out.push_back("Mirrorlab: it rounds where TensorFlow's kernels do (Mirrorlab rounds each layer's input, kernel, output");
    out.push_back("and gradients), so the runs agree to the low format's precision only.");
  }
  const int replicas = projectReplicas(p);
  if (replicas > 1 && !p.training.perDeviceBatch && p.training.batchSize % replicas != 0) {
    out.push_back("Differs from Mirrorlab: Keras scales each replica's mean loss by 1 / num_replicas_in_sync, so when the");
    out.push_back("global batch (" + std::to_string(p.training.batchSize) + ") does not split evenly over " +
                  std::to_string(replicas) + " replicas the samples of a smaller shard weigh a little more than");
    out.push_back("in Mirrorlab's mean over the global batch. (The same holds for an epoch's last batch when it is uneven.)");
  }
  return out;
}

}  // namespace

std::string generateTensorFlowProgram(const Project& p) {
  const ModelPlan model = planModel(p);
  const TrainingSpec& t = p.training;
  const std::string file = suggestedFileName(p, Framework::TensorFlow);
  const std::string batchWords =
      t.perDeviceBatch ? std::to_string(t.batchSize) + " per replica per micro-batch" : std::to_string(t.batchSize) + " in all";
  std::vector<std::string> mapping = {
      "Mirrored training: tf.distribute.MirroredStrategy makes one replica (a full copy of the model) per device:",
      "every visible GPU or, without one, the project's device count as logical CPU devices. Each global batch",
      "(" + batchWords + ") is split into strategy.num_replicas_in_sync per-replica batches; each replica computes",
      "gradients on its part, an all-reduce sums them across the replicas, and every replica applies the same",
      "update, so the copies stay identical. Requires TensorFlow 2 and Keras other than 3.7.0 (keras!=3.7.0)."};
  if (p.distribute.workers > 1) {
    mapping.push_back("Several workers: the project trains as " + std::to_string(p.distribute.workers) +
                      " processes (distribute.workers); here tf.distribute.MultiWorkerMirroredStrategy,");
    mapping.push_back("one process per worker configured by TF_CONFIG, replaces MirroredStrategy (see make_strategy).");
  }
  for (const auto& d : tfDifferences(p, model)) mapping.push_back(d);
  std::string out = headerComment(p, "TensorFlow/Keras", mapping);
  out += "\"\"\"Run: python3 " + file +
         " [--epochs N] [--steps N] [--data FOLDER] [--weights FILE.npz] [--predict-only]\n\n"
         "Needs TensorFlow 2 with Keras other than 3.7.0, and numpy. MirroredStrategy uses every visible GPU (one\n"
         "replica each); on a machine without one it splits the CPU into the project's number of logical devices.\n"
         "Start from Mirrorlab's weights with --weights init.npz, saved by:\n"
         "    mirrorlab-cli train PROJECT --steps 1 --save-initial-weights init.npz --no-record\n"
         "Project: " +
         pyDocText(p.description) + "\n\"\"\"\n";
  out += "import argparse\nimport gzip\nimport math\nimport os\nimport sys\n\nimport numpy as np\nimport tensorflow as tf\n\n";
  out += "EPOCHS = " + pyInt(t.epochs) + "\nSEED = " + std::to_string(t.seed) + "\n";
  out += "PRECISION = " + pyStr(t.precision) + "  # Keras' dtype policy: float32 | mixed_bfloat16 | mixed_float16\n";
  out += std::string("TF32 = ") + (p.distribute.tf32 ? "True" : "False") +
         "  # GPUs: float32 products on TF32 tensor cores (distribute.tf32; TensorFlow's own default is on)\n";
  if (p.distribute.allreduceDtype != "float32")
    out += "# The project sends its gradients between replicas as " + p.distribute.allreduceDtype +
           " (distribute.allreduce_dtype). MirroredStrategy has no\n"
           "# such option: this program all-reduces float32, so its weights follow Mirrorlab's float32 all-reduce.\n";
  out += "DEVICES = " + std::to_string(projectReplicas(p)) + "  # the project's devices: " + pyDocText(p.distribute.devices) +
         " (logical CPU devices when there is no GPU)\n";
  if (p.distribute.workers > 1)
    out += "WORKERS = " + std::to_string(p.distribute.workers) +
           "  # the project's workers (processes): tf.distribute.MultiWorkerMirroredStrategy, see make_strategy\n";
  if (t.perDeviceBatch)
    out += "PER_REPLICA_BATCH = " + pyInt(t.batchSize) +
           "  # the project's batch per device and micro-batch: global = this x num_replicas_in_sync x ACCUMULATE\n";
  else
    out += "GLOBAL_BATCH = " + pyInt(t.batchSize) + "  # the project's global batch: samples per optimizer update\n";
  out += "ACCUMULATE = " + std::to_string(t.accumulate) + "  # Mirrorlab's micro-batches per update\n";
  if (t.accumulate > 1)
    out +=
        "# This program feeds each global batch at once instead: the update is the same (the gradient of the mean\n"
        "# loss over the global batch), only the memory a replica needs is larger.\n";
  out += "BASE_LEARNING_RATE = " + pyNum(t.optimizer.learningRate) + "  # set for a global batch of REFERENCE_BATCH\n";
  out += "REFERENCE_BATCH = " + pyInt(lrReferenceBatch(t)) + "  # the global batch BASE_LEARNING_RATE was set for\n";
  out += "LR_SCALING = " + pyStr(t.lrScaling) + "  # none | linear | sqrt: the rate follows global_batch / REFERENCE_BATCH\n";
  out += "WARMUP_EPOCHS = " + pyNum(t.warmupEpochs) + "\n";
  {
    std::string epochs;
    for (const int64_t e : t.lrDecayEpochs) epochs += (epochs.empty() ? "" : ", ") + std::to_string(e);
    out += "LR_DECAY_EPOCHS = [" + epochs + "]  # after this many finished epochs the rate is multiplied by LR_DECAY_FACTOR\n";
    out += "LR_DECAY_FACTOR = " + pyNum(t.lrDecayFactor) + "\n";
  }
  // Each layer with weights and its arrays in a weights .npz, in Keras' get_weights() order.
  std::string arrays;
  for (const auto& l : model.layers) {
    std::vector<std::string> keys;
    if (l.type == "Dense" || l.type == "Conv2D") {
      keys.push_back("kernel");
      if (l.useBias) keys.push_back("bias");
    } else if (l.type == "BatchNormalization") {
      if (l.args.value("scale", true)) keys.push_back("gamma");
      if (l.args.value("center", true)) keys.push_back("beta");
      keys.insert(keys.end(), {"moving_mean", "moving_variance"});
    }
    if (keys.empty()) continue;
    std::string list;
    for (const auto& k : keys) list += (list.empty() ? "" : ", ") + pyStr(l.name + "/" + k);
    arrays += (arrays.empty() ? "" : ", ") + pyStr(l.name) + ": [" + list + "]";
  }
  out += "WEIGHT_ARRAYS = {" + arrays + "}  # each layer's arrays in a weights .npz, in Keras' order\n";
  out += dataLoaderPython(p);
  out += "\n\n# ---- model: " + std::to_string(model.params) + " parameters ----\n";
  out += "def build_model():\n    return tf.keras.Sequential([\n        tf.keras.Input(shape=" + pyShape(model.input) + "),\n";
  for (size_t i = 0; i < model.layers.size(); ++i) out += "        " + kerasLayer(model.layers[i], i) + ",\n";
  out += "    ])\n\n\ndef make_optimizer(learning_rate):\n";
  if (t.precision == "mixed_float16" && t.lossScaling) {
    // Keras' dynamic loss scaling with the project's scale and interval (compile() would wrap the
    // optimizer itself, but with its defaults).
    out += "    optimizer = " + kerasOptimizer(t.optimizer) + "\n";
    out += "    return tf.keras.mixed_precision.LossScaleOptimizer(optimizer, initial_scale=" + pyNum(t.lossScale) +
           ", dynamic_growth_steps=" + std::to_string(t.lossScaleGrowthSteps) + ")\n";
  } else {
    out += "    return " + kerasOptimizer(t.optimizer) + "\n";
  }
  std::string helpers = kHelpers;
  if (p.distribute.workers > 1) {
    // Several workers: MultiWorkerMirroredStrategy, the cluster described by TF_CONFIG.
    const size_t from = helpers.find("def make_strategy():"), to = helpers.find("def load_weights(");
    helpers.replace(from, to - from, kMultiWorkerStrategy);
  }
  out += helpers;
  out += R"PY(

def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--steps", type=int, default=0, help="stop after this many updates (0: every epoch)")
    parser.add_argument("--data", default=None, help="folder holding the data files")
    parser.add_argument("--weights", default=None, help="start from these weights (.npz saved by Mirrorlab)")
    parser.add_argument("--predict-only", action="store_true", help="only print the loss and metric of the weights")
    args = parser.parse_args()

    require_keras()
    strategy = make_strategy()  # first: the logical CPU devices must exist before TensorFlow starts
    tf.keras.utils.set_random_seed(SEED)
    tf.keras.mixed_precision.set_global_policy(PRECISION)  # float32 master weights under a mixed policy
    tf.config.experimental.enable_tensor_float_32_execution(TF32)
    replicas = strategy.num_replicas_in_sync
)PY";
  if (t.perDeviceBatch)
    out += "    global_batch = PER_REPLICA_BATCH * replicas * ACCUMULATE  # samples per optimizer update\n";
  else
    out += "    global_batch = GLOBAL_BATCH\n";
  out += "    lr_factor = " + lrScalingPython() + "\n";
  out += R"PY(    learning_rate = BASE_LEARNING_RATE * lr_factor
    print(f"{replicas} replica(s): global batch {global_batch} (per replica {global_batch // replicas}"
          f"{'-' + str(-(-global_batch // replicas)) if global_batch % replicas else ''}), "
          f"learning rate {BASE_LEARNING_RATE} x {lr_factor:g} = {learning_rate:g} ({LR_SCALING} scaling)")

    x_train, y_train, x_val, y_val, num_classes = load_data(args.data)
    x_train, x_val = as_input(x_train), as_input(x_val)
)PY";
  if (t.loss == "categorical_crossentropy")
    out +=
        "    y_train = tf.keras.utils.to_categorical(y_train, num_classes)  # categorical_crossentropy wants one-hot targets\n"
        "    y_val = tf.keras.utils.to_categorical(y_val, num_classes) if y_val is not None else None\n";
  out +=
      R"PY(    steps_per_epoch = math.ceil(len(x_train) / global_batch)
    schedule = learning_rate
    if WARMUP_EPOCHS > 0:
        schedule = LinearWarmup(BASE_LEARNING_RATE, learning_rate, WARMUP_EPOCHS * steps_per_epoch)
    if LR_DECAY_EPOCHS:  # Keras' PiecewiseConstantDecay on updates done, after warm-up if any
        rates = [learning_rate * LR_DECAY_FACTOR ** (i + 1) for i in range(len(LR_DECAY_EPOCHS))]
        decay = tf.keras.optimizers.schedules.PiecewiseConstantDecay(
            [e * steps_per_epoch - 1 for e in LR_DECAY_EPOCHS], [learning_rate] + rates)  # Keras: past a boundary
        schedule = decay if WARMUP_EPOCHS <= 0 else WarmupThenDecay(schedule, decay, WARMUP_EPOCHS * steps_per_epoch)
    with strategy.scope():  # variables created here are mirrored: one copy per replica
        model = build_model()
        model.compile(optimizer=make_optimizer(schedule),
                      loss=)PY" +
      kerasLoss(t) + ",\n                      metrics=" + kerasMetrics(t) +
      (t.precision == "mixed_float16" && !t.lossScaling ? ",\n                      auto_scale_loss=False)  # loss_scale: none\n"
                                                        : ")\n");
  out += R"PY(    if args.weights:
        load_weights(model, args.weights)
    model.summary()
    if args.predict_only:
        for name, x, y in (("train", x_train, y_train), ("val", x_val, y_val)):
            if x is not None:
                result = model.evaluate(x, y, batch_size=global_batch, return_dict=True, verbose=0)
                print(f"{name}: " + " ".join(f"{k} {v:.9g}" for k, v in result.items()) + f" ({len(x)} samples)")
        return
    val_ds = tf.data.Dataset.from_tensor_slices((x_val, y_val)).batch(global_batch) if x_val is not None else None
    stop = StopAfterSteps(args.steps)
    for epoch in range(1, args.epochs + 1):
        # Mirrorlab's order for this epoch, batched at the GLOBAL batch: the strategy splits every batch.
        order = epoch_order(len(x_train), SEED, epoch)
        train_ds = tf.data.Dataset.from_tensor_slices((x_train[order], y_train[order])).batch(global_batch)
        model.fit(train_ds, initial_epoch=epoch - 1, epochs=epoch, validation_data=val_ds, callbacks=[stop], verbose=2)
        if model.stop_training:
            break


if __name__ == "__main__":
    main()
)PY";
  return out;
}

}  // namespace ml
