"""Keras 3 loads each .keras archive of the layer walk (tests/core/export/LayerWalkTest.cpp) and
predicts what Mirrorlab predicts.

usage: keras_walk.py ARCHIVE INPUT.f32 EXPECTED.f32 [ARCHIVE INPUT.f32 EXPECTED.f32 ...]
  INPUT.f32: float32 samples, their shape in INPUT.f32.shape; EXPECTED.f32: Mirrorlab's outputs.
keras.saving.load_model is the real loader (a warning while loading fails); one line per archive
with its layer classes and the largest difference; exits 1 when one is above 1e-5. Runs with the
reference environment's python (scripts/pyref.sh).
"""
import os
import sys
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import keras  # noqa: E402

TOLERANCE = 1e-5


def check(archive, inputs, expected):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = keras.saving.load_model(archive)
    if caught:
        print(f"{archive}: Keras warned while loading: {[str(w.message) for w in caught]}")
        return False
    shape = [int(v) for v in open(inputs + ".shape").read().split()]
    x = np.fromfile(inputs, dtype="<f4").reshape([-1] + shape)
    want = np.fromfile(expected, dtype="<f4").astype(np.float64).reshape(x.shape[0], -1)
    got = model.predict(x, verbose=0).reshape(x.shape[0], -1).astype(np.float64)
    diff = float(np.max(np.abs(got - want)))
    ok = diff <= TOLERANCE
    print(f"{os.path.basename(os.path.dirname(archive))}: {[l.__class__.__name__ for l in model.layers]} "
          f"max_abs_diff={diff:.3g} {'ok' if ok else 'ABOVE ' + str(TOLERANCE)}")
    return ok


def main(args):
    if len(args) == 0 or len(args) % 3:
        sys.exit(__doc__)
    ok = all([check(*args[i:i + 3]) for i in range(0, len(args), 3)])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main(sys.argv[1:])
