"""Keras 3 opens the .keras archives Mirrorlab exports and predicts what Mirrorlab predicts.

usage: keras_load.py ARCHIVE IMAGES PREDICTIONS.csv [ARCHIVE IMAGES PREDICTIONS.csv ...]
  ARCHIVE:     written by `mirrorlab-cli export --format keras`
  IMAGES:      an IDX images file (.gz or raw), pixels / 255 as Mirrorlab reads them
  PREDICTIONS: `mirrorlab-cli predict` on the same images (one header row)
For each: keras.saving.load_model (the real loader, nothing rebuilt by hand; a warning while
loading fails), model.predict on the images with batches of 1 and 256, the largest difference
printed; exits 1 when one is above 1e-5 or the model is not the Sequential model it should be. Runs with the reference environment's python (scripts/pyref.sh).
"""
import gzip
import os
import sys
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import keras  # noqa: E402

TOLERANCE = 1e-5


def read_images(path):
    raw = gzip.open(path).read() if path.endswith(".gz") else open(path, "rb").read()
    assert int.from_bytes(raw[0:4], "big") == 0x803, f"{path}: not an IDX images file"
    n, rows, cols = (int.from_bytes(raw[i:i + 4], "big") for i in (4, 8, 12))
    return np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(n, rows, cols).astype(np.float32) / np.float32(255)


def check(archive, images, predictions):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = keras.saving.load_model(archive)
    if caught:  # e.g. "Skipping variable loading for optimizer": the archive must load cleanly
        print(f"{archive}: Keras warned while loading: {[str(w.message) for w in caught]}")
        return False
    assert isinstance(model, keras.Sequential), f"{archive}: a {type(model).__name__}, not a Sequential model"
    x = read_images(images)
    x = x.reshape((x.shape[0],) + tuple(model.input_shape[1:]))
    ml = np.loadtxt(predictions, delimiter=",", skiprows=1, dtype=np.float64, ndmin=2)
    for batch in (1, 256):  # one sample alone, and full batches
        n = 8 if batch == 1 else len(x)
        got = model.predict(x[:n], batch_size=batch, verbose=0).reshape(n, -1).astype(np.float64)
        diff = float(np.max(np.abs(got - ml[:n])))
        ok = diff <= TOLERANCE
        print(f"{os.path.basename(archive)}: {len(model.layers)} layers {[l.__class__.__name__ for l in model.layers]}, "
              f"batch {batch}, {n} samples, max_abs_diff={diff:.3g} {'ok' if ok else 'ABOVE ' + str(TOLERANCE)}")
        if not ok:
            return False
    if model.compiled and model.optimizer is not None:
        print(f"  compiled: loss {model.loss}, optimizer {model.optimizer.__class__.__name__} "
              f"lr {float(model.optimizer.learning_rate.numpy()):.6g}")
    return True


def main(args):
    if len(args) == 0 or len(args) % 3:
        sys.exit(__doc__)
    print(f"keras {keras.__version__}")
    ok = all([check(*args[i:i + 3]) for i in range(0, len(args), 3)])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main(sys.argv[1:])
