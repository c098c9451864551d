#!/usr/bin/python3
"""PyTorch weights (.npz) loaded into a torch.nn.Sequential built from the project file alone, as the
generated PyTorch program builds its model (nn.Linear per Dense with weight = kernel.T, the
activations as modules, nn.Flatten, nn.Dropout in eval mode), then its outputs on an input
compared with Mirrorlab's to 1e-5.

usage: torch_load.py WEIGHTS.npz PROJECT.json INPUT EXPECTED [--program PROGRAM.py]
  INPUT and EXPECTED as in onnx_reference.py (IDX images or raw float32; predict's CSV or raw float32)
  --program: the model is the generated PyTorch program's own build_model(), its weights set by the
  program's load_weights() (convolutional models: Conv2D, pooling, BatchNormalization, Reshape)
"""
import importlib.util
import json
import os
import sys

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(__file__))
from onnx_reference import read_expected, read_input  # noqa: E402  (input readers only)

TOLERANCE = 1e-5
ACTIVATIONS = {"relu": nn.ReLU, "sigmoid": nn.Sigmoid, "tanh": nn.Tanh}


def activation(name, shape):
    if name == "softmax":  # Mirrorlab's softmax runs over the whole sample
        return [nn.Flatten(), nn.Softmax(dim=1), nn.Unflatten(1, tuple(shape))]
    return [ACTIVATIONS[name]()] if name in ACTIVATIONS else []


def build(project, arrays):
    """The model, with each Dense layer's weights taken from the .npz by Mirrorlab's layer name."""
    shape, modules, used, counters = list(project["model"]["input_shape"]), [], set(), {}
    for layer in project["model"]["layers"]:
        kind = layer["type"]
        k = counters.get(kind, 0)
        counters[kind] = k + 1
        name = layer.get("name") or kind.lower() + (f"_{k}" if k else "")  # Mirrorlab's generated names
        if kind == "Flatten":
            modules.append(nn.Flatten())
            shape = [int(np.prod(shape))]
        elif kind == "Dropout":
            modules.append(nn.Dropout(layer.get("rate", 0.5)))  # a project file leaves defaults out
        elif kind == "Activation":
            modules += activation(layer["activation"], shape)
        elif kind == "Dense":
            bias = layer.get("use_bias", True)
            linear = nn.Linear(shape[0], layer["units"], bias=bias)
            kernel = arrays[f"{name}/kernel"]
            if kernel.shape != (shape[0], layer["units"]):
                raise SystemExit(f"FAIL: {name}/kernel has shape {kernel.shape}, want {(shape[0], layer['units'])}")
            with torch.no_grad():
                linear.weight.copy_(torch.from_numpy(kernel.T.copy()))
                if bias:
                    linear.bias.copy_(torch.from_numpy(arrays[f"{name}/bias"]))
            used.update({f"{name}/kernel"} | ({f"{name}/bias"} if bias else set()))
            modules.append(linear)
            shape = [layer["units"]]
            modules += activation(layer.get("activation", "linear"), shape)
    extra = set(arrays.files) - used
    if extra:
        raise SystemExit(f"FAIL: arrays the model does not use: {sorted(extra)}")
    return nn.Sequential(*modules).eval()


def main():
    npz_path, project_path, input_path, expected_path = sys.argv[1:5]
    project = json.load(open(project_path))
    arrays = np.load(npz_path)
    for key in arrays.files:
        if arrays[key].dtype != np.float32:
            raise SystemExit(f"FAIL: {key} is {arrays[key].dtype}, want float32")
    if "--program" in sys.argv:
        spec = importlib.util.spec_from_file_location("generated", sys.argv[sys.argv.index("--program") + 1])
        program = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(program)
        model = program.build_model()
        program.load_weights(model, npz_path)
        model.eval()
        # The program folds a last softmax into its loss (F.cross_entropy on the logits): put it back.
        if "folded into the loss" in open(sys.argv[sys.argv.index("--program") + 1]).read():
            model = nn.Sequential(model, nn.Softmax(dim=1)).eval()
    else:
        model = build(project, arrays)
    x = read_input(input_path)
    x = x.reshape([len(x)] + list(project["model"]["input_shape"]))
    with torch.no_grad():
        y = model(torch.from_numpy(np.ascontiguousarray(x))).double().numpy()
    expected = read_expected(expected_path, len(x))
    diff = float(np.abs(y - expected).max())
    print(f"torch {torch.__version__}: {len(arrays.files)} arrays, {sum(p.numel() for p in model.parameters())} parameters, "
          f"samples={len(x)} max_abs_diff={diff:.3g}")
    if not diff <= TOLERANCE:
        raise SystemExit(f"FAIL: max |torch - mirrorlab| = {diff:.3g} > {TOLERANCE}")


if __name__ == "__main__":
    main()
