#!/usr/bin/python3
"""A Keras weights file checked with h5py against Keras 3's layout for a Sequential model, worked out
here from the project file alone, as keras/src/saving/saving_lib.py writes it:
  /vars                            the model's own variables (an empty group)
  /layers/<class>[_k]/vars/<i>     each layer by its class name in snake case, numbered per class
                                   in model order; Dense: 0 = kernel (in, units), 1 = bias (units)
and then the values: equal to the Mirrorlab weights file (.mlw, read here with numpy), and a numpy
forward pass over the file's datasets, given an input and Mirrorlab's outputs, agrees to 1e-5.

usage: keras_layout.py FILE.weights.h5 PROJECT.json WEIGHTS.mlw [INPUT EXPECTED]
"""
import json
import sys

import h5py
import numpy as np

sys.path.insert(0, __import__("os").path.dirname(__file__))
from onnx_reference import read_expected, read_input, softmax  # noqa: E402  (input readers, no ONNX use)

TOLERANCE = 1e-5


def read_mlw(path):
    """The .mlw format (core/nn/WeightsFile.h): magic, version, architecture JSON, count, floats, checksum."""
    raw = open(path, "rb").read()
    assert raw[:8] == b"MLWEIGHT", f"{path}: not a Mirrorlab weights file"
    length = int.from_bytes(raw[12:16], "little")
    arch = json.loads(raw[16:16 + length])
    count = int.from_bytes(raw[16 + length:24 + length], "little")
    params = np.frombuffer(raw, dtype="<f4", count=count, offset=24 + length)
    return arch, params


def expected_layout(project):
    """Keras 3's paths and shapes for the project's Sequential model: {path: shape or None for a group}."""
    shape = list(project["model"]["input_shape"])
    layout = {"vars": None, "layers": None}
    used = {}
    dense = []  # (path, in, units, use_bias) in order
    for layer in project["model"]["layers"]:
        cls = {"Dense": "dense", "Activation": "activation", "Flatten": "flatten", "Dropout": "dropout"}[layer["type"]]
        k = used.get(cls, 0)
        used[cls] = k + 1
        path = f"layers/{cls}" + (f"_{k}" if k else "")
        layout[path] = layout[path + "/vars"] = None
        if layer["type"] == "Flatten":
            shape = [int(np.prod(shape))]
        elif layer["type"] == "Dense":
            units, bias = layer["units"], layer.get("use_bias", True)
            layout[path + "/vars/0"] = (shape[0], units)
            if bias:
                layout[path + "/vars/1"] = (units,)
            dense.append((path, shape[0], units, bias, layer.get("activation", "linear")))
            shape = [units]
        else:
            dense.append((path, None, None, None, layer.get("activation", "linear") if layer["type"] == "Activation" else None))
    return layout, dense


def actual_layout(f):
    found = {}

    def visit(name, obj):
        found[name] = tuple(obj.shape) if isinstance(obj, h5py.Dataset) else None
        if isinstance(obj, h5py.Dataset) and obj.dtype != np.float32:
            raise SystemExit(f"FAIL: {name} is {obj.dtype}, Keras stores float32")
    f.visititems(visit)
    return found


def activation(name, x):
    return {"linear": lambda v: v, "relu": lambda v: np.maximum(v, 0), "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
            "tanh": np.tanh, "softmax": lambda v: softmax(v.reshape(len(v), -1), 1).reshape(v.shape)}[name](x)


def main():
    h5_path, project_path, mlw_path = sys.argv[1:4]
    project = json.load(open(project_path))
    want, steps = expected_layout(project)
    f = h5py.File(h5_path, "r")
    got = actual_layout(f)
    if got != want:
        missing = {k: v for k, v in want.items() if got.get(k, "absent") != v}
        extra = {k: v for k, v in got.items() if k not in want}
        raise SystemExit(f"FAIL: layout differs from Keras 3's: expected but not found {missing}; unexpected {extra}")

    _, params = read_mlw(mlw_path)
    offset = 0
    for path, n_in, units, bias, _ in steps:
        if n_in is None:
            continue
        for name, count in (("0", n_in * units), ("1", units if bias else 0)):
            if count == 0:
                continue
            stored = f[f"{path}/vars/{name}"][()].reshape(-1)
            if not np.array_equal(stored, params[offset:offset + count]):
                raise SystemExit(f"FAIL: {path}/vars/{name} differs from the .mlw weights")
            offset += count
    if offset != params.size:
        raise SystemExit(f"FAIL: the file holds {offset} weights, the .mlw {params.size}")

    diff = None
    if len(sys.argv) > 5:
        x = read_input(sys.argv[4]).astype(np.float64)
        x = x.reshape(len(x), -1)  # Mirrorlab's samples are flat rows; Flatten changes nothing
        for path, n_in, units, bias, act in steps:
            if n_in is not None:
                x = x @ f[f"{path}/vars/0"][()].astype(np.float64)
                if bias:
                    x = x + f[f"{path}/vars/1"][()].astype(np.float64)
            if act is not None:
                x = activation(act, x)
        expected = read_expected(sys.argv[5], len(x))
        diff = float(np.abs(x - expected).max())
    print(f"layout ok: {len(want)} groups and datasets; values equal the .mlw ({params.size} weights)"
          + (f"; max_abs_diff={diff:.3g}" if diff is not None else ""))
    if diff is not None and not diff <= TOLERANCE:
        raise SystemExit(f"FAIL: max |keras weights forward - mirrorlab| = {diff:.3g} > {TOLERANCE}")


if __name__ == "__main__":
    main()
