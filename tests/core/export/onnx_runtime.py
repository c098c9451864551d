"""ONNX Runtime runs the ONNX models Mirrorlab exports and predicts what Mirrorlab predicts.

usage: onnx_runtime.py MODEL.onnx IMAGES PREDICTIONS.csv [MODEL.onnx IMAGES PREDICTIONS.csv ...]
Each model runs on ONNX Runtime's CPU provider with a batch of 1 (the first 8 images one by one)
and of 256 (every image, the last batch shorter); the largest difference from `mirrorlab-cli
predict` is printed; exits 1 above 1e-5. Runs with the reference environment's python.
"""
import gzip
import os
import sys

import numpy as np
import onnxruntime as ort

TOLERANCE = 1e-5


def read_images(path):
    raw = gzip.open(path).read() if path.endswith(".gz") else open(path, "rb").read()
    assert int.from_bytes(raw[0:4], "big") == 0x803, f"{path}: not an IDX images file"
    n, rows, cols = (int.from_bytes(raw[i:i + 4], "big") for i in (4, 8, 12))
    return np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(n, rows, cols).astype(np.float32) / np.float32(255)


def check(path, images, predictions):
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    inp = session.get_inputs()[0]
    x = read_images(images)
    x = x.reshape([x.shape[0]] + [int(d) for d in inp.shape[1:]])
    ml = np.loadtxt(predictions, delimiter=",", skiprows=1, dtype=np.float64, ndmin=2)
    ok = True
    for batch in (1, 256):
        n = 8 if batch == 1 else len(x)
        outs = [session.run(None, {inp.name: x[i:i + batch]})[0] for i in range(0, n, batch)]
        got = np.concatenate(outs).reshape(n, -1).astype(np.float64)
        diff = float(np.max(np.abs(got - ml[:n])))
        print(f"{os.path.basename(path)}: batch {batch}, {n} samples, max_abs_diff={diff:.3g} "
              f"{'ok' if diff <= TOLERANCE else 'ABOVE ' + str(TOLERANCE)}")
        ok = ok and diff <= TOLERANCE
    return ok


def main(args):
    if len(args) == 0 or len(args) % 3:
        sys.exit(__doc__)
    print(f"onnxruntime {ort.__version__}")
    ok = all([check(*args[i:i + 3]) for i in range(0, len(args), 3)])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main(sys.argv[1:])
