#!/usr/bin/env python3
"""TensorFlow reference for the end-to-end benchmark: the same models, initialisation (Keras'
defaults: Glorot-uniform kernels, zero biases), optimizer (Adam 1e-3, epsilon 1e-7), loss, accuracy
metric, batch and data as Mirrorlab, trained by Keras' own `fit` on TensorFlow's CPU kernels (oneDNN
on). Run it with the reference environment's Python (build/pyref/bin/python; scripts/pyref.sh).
Prints one JSON line with the seconds of every epoch.

  tf_bench.py --hidden 128 --batch 128 --epochs 3 --intra 2 --inter 1
  tf_bench.py --cnn --batch 64 --epochs 3 --precision mixed_bfloat16
  tf_bench.py ... --devices 2       # MirroredStrategy over 2 logical CPU devices (one physical CPU)
  tf_bench.py ... --jit             # XLA (Keras' "auto" leaves it off on a CPU-only machine)
  tf_bench.py ... --tune            # tries the thread settings below, prints the fastest as JSON

Thread settings must be fixed before TensorFlow starts, so --tune runs each candidate in its own
process (a few hundred steps, interleaved in two passes) and keeps the fastest median step.
"""
import argparse, gzip, json, os, statistics, struct, subprocess, sys, time

DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    import numpy as np
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, n = struct.unpack(">II", data[:8])
    if magic == 0x803:
        rows, cols = struct.unpack(">II", data[8:16])
        return np.frombuffer(data, np.uint8, offset=16).reshape(n, rows, cols).astype(np.float32) / 255.0
    return np.frombuffer(data, np.uint8, offset=8).astype(np.int32)


def build(keras, args):
    """The model of bench/e2e/wide-mlp.json, projects/fashion-mlp.json or projects/fashion-cnn.json."""
    L = keras.layers
    if args.cnn:
        layers = [L.Input((28, 28, 1)), L.Conv2D(32, 3, activation="relu"), L.MaxPooling2D(2), L.Conv2D(64, 3, activation="relu"),
                  L.MaxPooling2D(2), L.Flatten(), L.Dense(128, activation="relu")]
    else:
        layers = [L.Input((28, 28)), L.Flatten()] + [L.Dense(h, activation="relu") for h in args.hidden]
    # The softmax in float32, as Keras' mixed-precision guide asks (and Mirrorlab computes it).
    layers.append(L.Dense(10, activation="softmax", dtype="float32"))
    return keras.Sequential(layers)


def configure(tf, args):
    """Before any TensorFlow op: thread pools and, for --devices N, N logical CPU devices."""
    tf.config.threading.set_intra_op_parallelism_threads(args.intra)
    tf.config.threading.set_inter_op_parallelism_threads(args.inter)
    if args.devices > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * args.devices)
        return tf.distribute.MirroredStrategy(["/cpu:%d" % i for i in range(args.devices)])
    return tf.distribute.get_strategy()


class EpochTimer:
    """Wall seconds of each epoch (Keras callbacks run on the Python thread between epochs)."""

    def __init__(self, keras):
        outer = self

        class Cb(keras.callbacks.Callback):
            def on_epoch_begin(self, epoch, logs=None):
                outer.t0 = time.perf_counter()

            def on_epoch_end(self, epoch, logs=None):
                outer.seconds.append(time.perf_counter() - outer.t0)

        self.seconds, self.callback = [], Cb()


def run(args):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf
    import keras
    strategy = configure(tf, args)
    keras.utils.set_random_seed(42)
    if args.precision != "float32":
        keras.mixed_precision.set_global_policy(args.precision)
    x = read_idx(os.path.join(DATA, "train-images-idx3-ubyte.gz"))
    y = read_idx(os.path.join(DATA, "train-labels-idx1-ubyte.gz"))
    if args.cnn:
        x = x.reshape(-1, 28, 28, 1)
    if args.steps:  # tuning: the first steps*batch samples
        x, y = x[:args.steps * args.batch], y[:args.steps * args.batch]
    with strategy.scope():
        model = build(keras, args)
        model.compile(optimizer=keras.optimizers.Adam(1e-3, epsilon=1e-7), loss="sparse_categorical_crossentropy",
                      metrics=["accuracy"], jit_compile=args.jit)
    timer = EpochTimer(keras)
    model.fit(x, y, batch_size=args.batch, epochs=args.epochs, shuffle=True, verbose=0, callbacks=[timer.callback])
    out = {"framework": "tensorflow", "tensorflow": tf.__version__, "keras": keras.__version__,
           "onednn": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default (on)"), "model": "cnn" if args.cnn else "mlp",
           "hidden": args.hidden, "batch": args.batch, "precision": args.precision, "devices": args.devices, "intra": args.intra,
           "inter": args.inter, "jit": args.jit, "steps_per_epoch": -(-len(x) // args.batch), "epoch_seconds": timer.seconds}
    print(json.dumps(out))


def candidates(args):
    """Thread settings worth trying on this machine's cores (0: TensorFlow's own choice)."""
    cores = os.cpu_count() or 2
    pairs = [(cores, 1), (cores, 2), (0, 0)] if args.devices == 1 else [(1, args.devices), (cores, args.devices), (cores, 1)]
    out = [dict(intra=a, inter=b, jit=False) for a, b in pairs]
    if args.devices == 1 and not args.cnn:
        out.append(dict(intra=cores, inter=1, jit=True))  # XLA; its CPU convolutions are Eigen's, not oneDNN's
    return out


def tune(args):
    """Each candidate in its own process, twice, interleaved; the fastest median last-epoch step wins."""
    base = [a for a in sys.argv[1:] if a not in ("--tune", "--jit")]
    times = {}
    for _ in range(2):
        for c in candidates(args):
            key = json.dumps(c, sort_keys=True)
            cmd = [sys.executable, __file__] + base + ["--intra", str(c["intra"]), "--inter", str(c["inter"]), "--epochs", "2",
                                                       "--steps", str(args.tune_steps)] + (["--jit"] if c["jit"] else [])
            r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1])
            times.setdefault(key, []).append(r["epoch_seconds"][-1] / r["steps_per_epoch"])
    best = min(times, key=lambda k: statistics.median(times[k]))
    print(json.dumps({"best": json.loads(best), "ms_per_step": {k: [round(1e3 * t, 3) for t in v] for k, v in times.items()}}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, nargs="+", default=[128])
    ap.add_argument("--cnn", action="store_true", help="projects/fashion-cnn.json's model instead of an MLP")
    ap.add_argument("--batch", type=int, default=128, help="the global batch")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--precision", default="float32", choices=["float32", "mixed_bfloat16"])
    ap.add_argument("--devices", type=int, default=1, help="above 1: MirroredStrategy over this many logical CPU devices")
    ap.add_argument("--intra", type=int, default=0, help="intra-op threads (0: TensorFlow's choice)")
    ap.add_argument("--inter", type=int, default=0, help="inter-op threads (0: TensorFlow's choice)")
    ap.add_argument("--jit", action="store_true", help="XLA-compile the train step")
    ap.add_argument("--steps", type=int, default=0, help="only this many steps per epoch (tuning)")
    ap.add_argument("--tune", action="store_true", help="try the thread settings, print the fastest")
    ap.add_argument("--tune-steps", type=int, default=150)
    args = ap.parse_args()
    tune(args) if args.tune else run(args)


if __name__ == "__main__":
    main()
