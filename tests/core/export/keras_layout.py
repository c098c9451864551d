#!/usr/bin/python3
"""A Keras weights file checked with h5py against Keras 3's layout for a Sequential model, worked out
here from the project file alone, as keras/src/saving/saving_lib.py writes it:
  /vars                            the model's own variables (an empty group)
  /layers/<class>[_k]/vars/<i>     each layer by its class name in snake case, numbered per class
                                   in model order; Dense: 0 = kernel (in, units), 1 = bias (units);
                                   Conv2D: kernel (kh, kw, in, filters), bias; BatchNormalization:
                                   gamma, beta (when used), moving_mean, moving_variance
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
    """The .mlw format (core/project/WeightsFile.h): magic, version, architecture JSON, count, floats, checksum."""
    raw = open(path, "rb").read()
    assert raw[:8] == b"MLWEIGHT", f"{path}: not a Mirrorlab weights file"
    length = int.from_bytes(raw[12:16], "little")
    arch = json.loads(raw[16:16 + length])
    count = int.from_bytes(raw[16 + length:24 + length], "little")
    params = np.frombuffer(raw, dtype="<f4", count=count, offset=24 + length)
    return arch, params


CLASSES = {"Dense": "dense", "Activation": "activation", "Flatten": "flatten", "Dropout": "dropout", "Conv2D": "conv2d",
           "MaxPooling2D": "max_pooling2d", "AveragePooling2D": "average_pooling2d",
           "GlobalAveragePooling2D": "global_average_pooling2d", "BatchNormalization": "batch_normalization",
           "Reshape": "reshape"}


def pair(v, default):
    v = default if v is None else v
    return [v, v] if isinstance(v, int) else list(v)


def window(layer):
    """(kernel, strides, same) of a Conv2D or pooling layer, with Keras' defaults."""
    if layer["type"] == "Conv2D":
        k = pair(layer["kernel_size"], None)
        s = pair(layer.get("strides"), 1)
    else:
        k = pair(layer.get("pool_size"), 2)
        s = pair(layer.get("strides"), k)
    return k, s, layer.get("padding", "valid") == "same"


def out_size(n, k, s, same):
    return -(-n // s) if same else (n - k) // s + 1


def expected_layout(project):
    """Keras 3's paths and shapes for the project's Sequential model, worked out from the file:
    {path: shape, or None for a group}, and the layers in order with their variables' shapes."""
    shape = list(project["model"]["input_shape"])
    layout = {"vars": None, "layers": None}
    used = {}
    steps = []
    for layer in project["model"]["layers"]:
        kind = layer["type"]
        cls = CLASSES[kind]
        if kind == "Activation" and layer["activation"] == "softmax" and len(shape) > 1:
            cls = "softmax"  # the TensorFlow program's Softmax(axis=[1, 2, 3]): Mirrorlab's softmax spans the sample
        k = used.get(cls, 0)
        used[cls] = k + 1
        path = f"layers/{cls}" + (f"_{k}" if k else "")
        layout[path] = layout[path + "/vars"] = None
        variables, in_shape = [], list(shape)
        if kind == "Flatten":
            shape = [int(np.prod(shape))]
        elif kind == "Dense":
            variables.append((shape[0], layer["units"]))
            if layer.get("use_bias", True):
                variables.append((layer["units"],))
            shape = [layer["units"]]
        elif kind == "Conv2D":
            (kh, kw), (sh, sw), same = window(layer)
            variables.append((kh, kw, shape[2], layer["filters"]))
            if layer.get("use_bias", True):
                variables.append((layer["filters"],))
            shape = [out_size(shape[0], kh, sh, same), out_size(shape[1], kw, sw, same), layer["filters"]]
        elif kind in ("MaxPooling2D", "AveragePooling2D"):
            (kh, kw), (sh, sw), same = window(layer)
            shape = [out_size(shape[0], kh, sh, same), out_size(shape[1], kw, sw, same), shape[2]]
        elif kind == "GlobalAveragePooling2D":
            shape = [shape[2]]
        elif kind == "BatchNormalization":
            count = int(layer.get("scale", True)) + int(layer.get("center", True)) + 2
            variables += [(shape[-1],)] * count
        elif kind == "Reshape":
            target = list(layer["target_shape"])
            if -1 in target:
                target[target.index(-1)] = int(np.prod(shape)) // -int(np.prod(target))
            shape = target
        for i, var_shape in enumerate(variables):
            layout[f"{path}/vars/{i}"] = tuple(var_shape)
        steps.append({"path": path, "layer": layer, "vars": len(variables), "in": in_shape, "out": list(shape)})
    return layout, steps


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


def windows(x, layer, fill):
    """(N, H, W, C) -> (N, OH, OW, kh, kw, C), padded as TensorFlow pads "same" (the odd row/column last)."""
    (kh, kw), (sh, sw), same = window(layer)
    n, h, w, c = x.shape
    oh, ow = out_size(h, kh, sh, same), out_size(w, kw, sw, same)
    ph, pw = max((oh - 1) * sh + kh - h, 0), max((ow - 1) * sw + kw - w, 0)
    xp = np.pad(x, ((0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)), constant_values=fill)
    out = np.empty((n, oh, ow, kh, kw, c), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            out[:, :, :, i, j, :] = xp[:, i:i + sh * oh:sh, j:j + sw * ow:sw, :]
    return out


def forward(f, steps, x):
    """Keras' inference forward pass over the file's variables, channels-last, in float64."""
    for st in steps:
        layer, kind = st["layer"], st["layer"]["type"]
        v = [f[f"{st['path']}/vars/{i}"][()].astype(np.float64) for i in range(st["vars"])]
        if kind == "Flatten":
            x = x.reshape(len(x), -1)
        elif kind == "Dense":
            x = x @ v[0] + (v[1] if len(v) > 1 else 0)
        elif kind == "Conv2D":
            x = np.einsum("nyxijc,ijcf->nyxf", windows(x, layer, 0.0), v[0], optimize=True) + (v[1] if len(v) > 1 else 0)
        elif kind == "MaxPooling2D":
            x = windows(x, layer, -np.inf).max(axis=(3, 4))
        elif kind == "AveragePooling2D":  # TensorFlow's "same" averages the positions inside the image
            x = windows(x, layer, 0.0).sum(axis=(3, 4)) / windows(np.ones_like(x), layer, 0.0).sum(axis=(3, 4))
        elif kind == "GlobalAveragePooling2D":
            x = x.mean(axis=(1, 2))
        elif kind == "BatchNormalization":
            gamma = v.pop(0) if layer.get("scale", True) else 1.0
            beta = v.pop(0) if layer.get("center", True) else 0.0
            x = (x - v[0]) / np.sqrt(v[1] + layer.get("epsilon", 1e-3)) * gamma + beta
        elif kind == "Reshape":
            x = x.reshape([len(x)] + st["out"])
        if kind in ("Dense", "Conv2D", "Activation"):
            x = activation(layer.get("activation", "linear"), x)
    return x


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
    for st in steps:  # the .mlw holds each layer's variables in Keras' order, one after the other
        for i in range(st["vars"]):
            stored = f[f"{st['path']}/vars/{i}"][()].reshape(-1)
            if not np.array_equal(stored, params[offset:offset + stored.size]):
                raise SystemExit(f"FAIL: {st['path']}/vars/{i} differs from the .mlw weights")
            offset += stored.size
    if offset != params.size:
        raise SystemExit(f"FAIL: the file holds {offset} weights, the .mlw {params.size}")

    diff = None
    if len(sys.argv) > 5:
        x = read_input(sys.argv[4]).astype(np.float64)
        x = x.reshape([len(x)] + list(project["model"]["input_shape"]))
        x = forward(f, steps, x)
        expected = read_expected(sys.argv[5], len(x))
        diff = float(np.abs(x.reshape(len(x), -1) - expected).max())
    print(f"layout ok: {len(want)} groups and datasets; values equal the .mlw ({params.size} weights)"
          + (f"; max_abs_diff={diff:.3g}" if diff is not None else ""))
    if diff is not None and not diff <= TOLERANCE:
        raise SystemExit(f"FAIL: max |keras weights forward - mirrorlab| = {diff:.3g} > {TOLERANCE}")


if __name__ == "__main__":
    main()
