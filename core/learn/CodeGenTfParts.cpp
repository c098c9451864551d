// Python text of the TensorFlow program that does not depend on the model: Mirrorlab's schedule as
// a Keras LearningRateSchedule, the loss of each step over its global batch, the strategy over
// logical CPU devices, each replica fed its Mirrorlab shard, the .npz weights files and main().
#include "learn/CodeGenTfParts.h"

namespace ml::codegen {
namespace {

constexpr const char* kSchedule = R"PY(

class MirrorlabSchedule(tf.keras.optimizers.schedules.LearningRateSchedule):
    """Mirrorlab's rate by updates done: a linear warm-up from base_lr to target_lr over warmup_steps,
    then target_lr; multiplied by decay_factor from each of decay_steps on. Computed in float64 and
    rounded to float32 once, as Mirrorlab's trainer does."""

    def __init__(self, base_lr, target_lr, warmup_steps, decay_steps, decay_factor):
        self.base_lr, self.target_lr, self.warmup_steps = float(base_lr), float(target_lr), float(warmup_steps)
        self.decay_steps, self.decay_factor = [int(s) for s in decay_steps], float(decay_factor)

    def __call__(self, step):
        step = tf.cast(step, tf.float64)
        lr = tf.constant(self.target_lr, tf.float64)
        if self.warmup_steps > 0:
            ramp = self.base_lr + (self.target_lr - self.base_lr) * step / self.warmup_steps
            lr = tf.where(step < self.warmup_steps, ramp, lr)
        for after in self.decay_steps:
            lr = tf.where(step >= after, lr * self.decay_factor, lr)
        return tf.cast(lr, tf.float32)

    def get_config(self):  # every argument of __init__: from_config() rebuilds the same schedule
        return {"base_lr": self.base_lr, "target_lr": self.target_lr, "warmup_steps": self.warmup_steps,
                "decay_steps": list(self.decay_steps), "decay_factor": self.decay_factor}


def require_keras():
    import keras
    if not keras.__version__.startswith("3."):
        sys.exit(f"this program needs Keras 3 (TensorFlow 2.16 or newer); this TensorFlow has Keras {keras.__version__}")
    if keras.__version__ == "3.7.0":
        sys.exit("Keras 3.7.0 cannot build a model with Dropout inside MirroredStrategy.scope() (fixed in 3.8.0): "
                 "pip install 'keras!=3.7.0'")
)PY";

constexpr const char* kReplicaDropout = R"PY(

class ReplicaDropout(tf.keras.layers.Dropout):
    """Keras' Dropout, with a mask of its own on every replica. Keras draws a stateless mask from the
    layer's seed, which is the same on every replica: each replica would drop the same positions of
    its shard. Folding the replica's index into the seed makes the replicas' masks independent."""

    def call(self, inputs, training=False):
        if not training or self.rate == 0:
            return inputs
        seed = tf.cast(self.seed_generator.next(), tf.int64)
        context = tf.distribute.get_replica_context()
        replica = context.replica_id_in_sync_group if context is not None else 0
        seed = tf.random.experimental.stateless_fold_in(seed, tf.cast(replica, tf.int64))
        return tf.nn.experimental.stateless_dropout(inputs, rate=self.rate, seed=seed)
)PY";

constexpr const char* kStrategy = R"PY(

def make_strategy():
    """MirroredStrategy over every visible GPU; without one, over DEVICES logical CPU devices."""
    if tf.config.list_physical_devices("GPU"):
        return tf.distribute.MirroredStrategy()
    # Without this, MirroredStrategy() sees one CPU device and trains a single replica. It must run
    # before the TensorFlow runtime starts (the first op or logical-device query starts it).
    cpu = tf.config.list_physical_devices("CPU")[0]
    if tf.config.get_logical_device_configuration(cpu) is None:
        try:
            tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(DEVICES)])
        except RuntimeError:  # TensorFlow has started (this program imported by another): use its devices
            pass
    devices = [d.name for d in tf.config.list_logical_devices("CPU")][:DEVICES]
    if len(devices) < DEVICES:
        sys.exit(f"TensorFlow started with {len(devices)} CPU device(s) before this program could make {DEVICES}: "
                 "run it on its own")
    return tf.distribute.MirroredStrategy(devices=devices)
)PY";

// The project trains as WORKERS processes: TensorFlow's form of it.
constexpr const char* kMultiWorkerStrategy = R"PY(

def make_strategy():
    """MultiWorkerMirroredStrategy: WORKERS processes (one per machine), as Mirrorlab's
        mpirun -np WORKERS --host host1,host2 mirrorlab-cli train PROJECT
    Start this program once per worker, each with TF_CONFIG naming every worker and its own index:
        TF_CONFIG='{"cluster": {"worker": ["host1:12345", "host2:12345"]},
                    "task": {"type": "worker", "index": 0}}' python3 this_program.py   # on host1
        (index 1 on host2). Each worker reads the same data and feeds its replicas their shards; the
    strategy all-reduces the gradients across the workers (ring collectives)."""
    if "TF_CONFIG" not in os.environ:
        sys.exit(f"this project trains as {WORKERS} workers: start this program on each with TF_CONFIG set "
                 "(see make_strategy's docstring)")
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.RING)
    # On CPUs each worker is one replica (TensorFlow does not split a worker's CPU into several), so
    # the replicas are fewer than the project's; the global batch stays the project's (GLOBAL_BATCH).
    return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
)PY";

constexpr const char* kShardsAndWeights = R"PY(

def shard_of(indices, part, parts):
    """Part `part` of `parts` nearly equal pieces (sizes differ by at most one), as Mirrorlab cuts them."""
    n = len(indices)
    return indices[n * part // parts:n * (part + 1) // parts]


def replica_batches(strategy, x, y, batches):
    """The global batches as per-replica batches, each replica fed its Mirrorlab shards: with one input
    pipeline, distribute_datasets_from_function hands its elements to replicas 0, 1, ... in turn. An
    element is (the replica's samples, its shard's size in each micro-batch, the global batch's size)."""
    def shards(context):
        replicas = context.num_replicas_in_sync
        mine = replicas // context.num_input_pipelines  # the replicas this pipeline (worker) feeds
        for batch in batches:
            for r in range(context.input_pipeline_id * mine, (context.input_pipeline_id + 1) * mine):
                parts = [shard_of(shard_of(batch, m, ACCUMULATE), r, replicas) for m in range(ACCUMULATE)]
                rows = np.concatenate(parts)
                yield x[rows], y[rows], np.array([len(p) for p in parts], np.int32), np.float32(len(batch))

    def dataset(context):
        spec = (tf.TensorSpec((None,) + x.shape[1:], tf.as_dtype(x.dtype)), tf.TensorSpec((None,) + y.shape[1:], tf.as_dtype(y.dtype)),
                tf.TensorSpec((ACCUMULATE,), tf.int32), tf.TensorSpec((), tf.float32))
        return tf.data.Dataset.from_generator(lambda: shards(context), output_signature=spec)

    return strategy.distribute_datasets_from_function(dataset)


def mirrored_steps(strategy, model, optimizer, metric):
    """The mirrored step written out, as model.fit runs it under a strategy but with Mirrorlab's shards,
    micro-batches and mean: each replica's loss is the sum over its shard divided by the GLOBAL batch
    (tf.nn.compute_average_loss), so when the all-reduce sums the replicas' gradients the result is the
    gradient of the mean over the global batch however the shards are cut. (model.fit divides each
    replica's mean by the number of replicas instead, which differs when the shards are uneven.)"""
    per_sample_loss = make_loss(reduction=None)

    def replica_step(x, y, sizes, batch):
        grads, share, start = None, 0.0, 0
        for m in range(ACCUMULATE):  # this replica's shard of each micro-batch: forward, backward, add up
            end = start + sizes[m]
            xm, ym = x[start:end], y[start:end]
            start = end
            with tf.GradientTape() as tape:
                out = model(xm, training=True)
                part = tf.reduce_sum(tf.cast(per_sample_loss(ym, out), tf.float32)) / batch
                scaled = optimizer.scale_loss(part)  # the loss scale of mixed_float16, else the loss itself
            g = tape.gradient(scaled, model.trainable_variables)
            grads = g if grads is None else [a + b for a, b in zip(grads, g)]
            share += part
            metric.update_state(ym, out)
        # Sums every replica's gradients (the all-reduce) and applies the same update on every replica.
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return share

    def replica_eval(x, y, sizes, batch):
        out = model(x, training=False)
        metric.update_state(y, out)
        return tf.reduce_sum(tf.cast(per_sample_loss(y, out), tf.float32))

    @tf.function
    def train_step(iterator):  # one update; returns the mean loss over its global batch
        return strategy.reduce("SUM", strategy.run(replica_step, args=next(iterator)), axis=None)

    @tf.function
    def eval_step(iterator):
        return strategy.reduce("SUM", strategy.run(replica_eval, args=next(iterator)), axis=None)

    def evaluate(x, y, batch_size):
        """(mean loss, metric) over x: every sample once, in order."""
        metric.reset_state()
        batches = [np.arange(i, min(i + batch_size, len(x))) for i in range(0, len(x), batch_size)]
        iterator = iter(replica_batches(strategy, x, y, batches))
        total = sum(float(eval_step(iterator)) for _ in batches)
        return total / len(x), float(metric.result())

    return train_step, evaluate


def load_weights(model, path):
    """Weights saved by Mirrorlab (mirrorlab-cli train --save-initial-weights / --save-weights FILE.npz)."""
    with np.load(path) as z:
        for name, keys in WEIGHT_ARRAYS.items():
            layer = model.get_layer(name)
            missing = [k for k in keys if k not in z.files]
            if missing:
                sys.exit(f"{path}: no array {missing[0]!r} (it holds {', '.join(z.files)}): save it from this project")
            layer.set_weights([z[k] for k in keys])  # Keras' layouts ((in, out), (kh, kw, in, filters)), as Mirrorlab stores them


def save_weights(model, path):
    """The weights in Mirrorlab's names (mirrorlab-cli evaluate PROJECT --weights FILE.npz reads them)."""
    arrays = {}
    for name, keys in WEIGHT_ARRAYS.items():
        arrays.update(zip(keys, model.get_layer(name).get_weights()))
    np.savez(path, **arrays)
)PY";

constexpr const char* kMainStart = R"PY(

def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--steps", type=int, default=0, help="stop after this many updates (0: every epoch)")
    parser.add_argument("--data", default=None, help="folder holding the data files")
    parser.add_argument("--weights", default=None, help="start from these weights (.npz saved by Mirrorlab)")
    parser.add_argument("--save-weights", default=None, help="write the trained weights here (.npz, Mirrorlab's names)")
    parser.add_argument("--print-steps", action="store_true", help="print the loss of every step over its global batch")
    parser.add_argument("--predict-only", action="store_true", help="only print the loss and metric of the weights")
    args = parser.parse_args(argv)

    require_keras()
    strategy = make_strategy()  # first: the logical CPU devices must exist before TensorFlow starts
    tf.keras.utils.set_random_seed(SEED)
    tf.keras.mixed_precision.set_global_policy(PRECISION)  # float32 master weights under a mixed policy
    tf.config.experimental.enable_tensor_float_32_execution(TF32)
    replicas = strategy.num_replicas_in_sync
    global_batch = GLOBAL_BATCH
    lr_factor = {"none": 1.0, "linear": global_batch / REFERENCE_BATCH, "sqrt": math.sqrt(global_batch / REFERENCE_BATCH)}[LR_SCALING]
    learning_rate = BASE_LEARNING_RATE * lr_factor
    micro = -(-global_batch // ACCUMULATE)
    shards = sorted({len(shard_of(range(micro), r, replicas)) for r in range(replicas)})
    print(f"{replicas} replica(s): global batch {global_batch} = {ACCUMULATE} micro-batch(es) of {replicas} shard(s) of "
          f"{'-'.join(map(str, shards))}, learning rate {BASE_LEARNING_RATE} x {lr_factor:g} = {learning_rate:g} "
          f"({LR_SCALING} scaling)", flush=True)

    x_train, y_train, x_val, y_val, num_classes = load_data(args.data)
    x_train, x_val = as_input(x_train), as_input(x_val)
)PY";

constexpr const char* kMainEnd = R"PY(    steps_per_epoch = math.ceil(len(x_train) / global_batch)
    schedule = learning_rate
    if WARMUP_EPOCHS > 0 or LR_DECAY_EPOCHS:
        schedule = MirrorlabSchedule(BASE_LEARNING_RATE, learning_rate, WARMUP_EPOCHS * steps_per_epoch,
                                     [e * steps_per_epoch for e in LR_DECAY_EPOCHS], LR_DECAY_FACTOR)
    with strategy.scope():  # variables created here are mirrored: one copy per replica
        model = build_model()
        optimizer = make_optimizer(schedule)
        optimizer.build(model.trainable_variables)
        metric = make_metric()
    if args.weights:
        load_weights(model, args.weights)
    model.summary()
    train_step, evaluate = mirrored_steps(strategy, model, optimizer, metric)
    if args.predict_only:
        for name, x, y in (("train", x_train, y_train), ("val", x_val, y_val)):
            if x is not None:
                loss, value = evaluate(x, y, global_batch)
                print(f"{name}: loss {loss:.9g} {METRIC} {value:.9g} ({len(x)} samples)", flush=True)
        return
    step = 0
    for epoch in range(1, args.epochs + 1):
        order = epoch_order(len(x_train), SEED, epoch)  # Mirrorlab's order for this epoch
        batches = [order[i:i + global_batch] for i in range(0, len(order), global_batch)]
        batches = batches[:args.steps - step] if args.steps else batches
        if not batches:
            break
        iterator = iter(replica_batches(strategy, x_train, y_train, batches))
        metric.reset_state()
        total = 0.0
        for batch in batches:
            loss = float(train_step(iterator))
            step += 1
            total += loss * len(batch)
            if args.print_steps:
                print(f"step {step} loss {loss:.9g}", flush=True)
        line = (f"epoch {epoch}/{args.epochs}: loss {total / sum(map(len, batches)):.6f} {METRIC} {float(metric.result()):.4f} "
                f"({step} steps)")
        if x_val is not None:
            val_loss, val_metric = evaluate(x_val, y_val, global_batch)
            line += f" val_loss {val_loss:.6f} val_{METRIC} {val_metric:.4f}"
        print(line, flush=True)
    if args.save_weights:
        save_weights(model, args.save_weights)


if __name__ == "__main__":
    main()
)PY";

}  // namespace

std::string tfHelpersPython(bool multiWorker, bool dropout) {
  std::string out = kSchedule;
  if (dropout) out += kReplicaDropout;
  out += multiWorker ? kMultiWorkerStrategy : kStrategy;
  return out + kShardsAndWeights;
}

std::string tfMainPython(bool oneHotTargets, bool binaryTargets) {
  std::string out = kMainStart;
  if (oneHotTargets)
    out +=
        "    y_train = tf.keras.utils.to_categorical(y_train, num_classes)  # categorical_crossentropy wants one-hot targets\n"
        "    y_val = tf.keras.utils.to_categorical(y_val, num_classes) if y_val is not None else None\n";
  if (binaryTargets)
    out +=
        "    # binary_crossentropy: one 0/1 target per sample, as float32 (N, 1) like the model's one output\n"
        "    y_train = y_train.astype(np.float32).reshape(-1, 1)\n"
        "    y_val = y_val.astype(np.float32).reshape(-1, 1) if y_val is not None else None\n";
  return out + kMainEnd;
}

}  // namespace ml::codegen
