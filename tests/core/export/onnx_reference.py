#!/usr/bin/python3
"""An ONNX model checked and evaluated without Mirrorlab's code: onnx.checker (full check), strict
shape inference, then a numpy evaluator that runs the graph op by op in float64, compared with
outputs Mirrorlab computed.

usage: onnx_reference.py MODEL.onnx INPUT OUTPUT [--expect-opset 13]
  INPUT:  an IDX images file (.gz or raw; pixels / 255, as Mirrorlab reads them) or a raw
          float32 file "x.f32" with the per-sample shape in "x.f32.shape" (e.g. "2 3")
  OUTPUT: Mirrorlab's outputs: a CSV from `mirrorlab-cli predict` (one header row) or raw float32
Prints max_abs_diff=... and exits 1 when it is above 1e-5 or anything in the model is off.
"""
import gzip
import sys

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference

TOLERANCE = 1e-5


def read_input(path):
    if path.endswith(".f32"):
        shape = [int(v) for v in open(path + ".shape").read().split()]
        return np.fromfile(path, dtype="<f4").reshape([-1] + shape)
    raw = gzip.open(path).read() if path.endswith(".gz") else open(path, "rb").read()
    magic, n = int.from_bytes(raw[0:4], "big"), int.from_bytes(raw[4:8], "big")
    assert magic == 0x803, f"{path}: not an IDX images file (magic {magic:#x})"
    rows, cols = int.from_bytes(raw[8:12], "big"), int.from_bytes(raw[12:16], "big")
    return np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(n, rows, cols).astype(np.float32) / np.float32(255)


def read_expected(path, n):
    if path.endswith(".csv"):
        return np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float64, ndmin=2)
    return np.fromfile(path, dtype="<f4").astype(np.float64).reshape(n, -1)


def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def windows(x, a, fill):
    """(N, C, H, W) padded by the node's pads -> (N, C, OH, OW, kh, kw): every window of the input."""
    kh, kw = a["kernel_shape"]
    sh, sw = a.get("strides", [1, 1])
    top, left, bottom, right = a.get("pads", [0, 0, 0, 0])
    xp = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=fill)
    oh, ow = (xp.shape[2] - kh) // sh + 1, (xp.shape[3] - kw) // sw + 1
    out = np.empty(x.shape[:2] + (oh, ow, kh, kw), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            out[..., i, j] = xp[:, :, i:i + sh * oh:sh, j:j + sw * ow:sw]
    return out


def per_channel(v, ndim):
    return v.reshape((1, -1) + (1,) * (ndim - 2))


def run_node(node, v):
    a, x = attrs(node), [v[name] for name in node.input]
    op = node.op_type
    if op == "Gemm":
        A = x[0].T if a.get("transA", 0) else x[0]
        B = x[1].T if a.get("transB", 0) else x[1]
        y = a.get("alpha", 1.0) * (A @ B)
        return y + a.get("beta", 1.0) * x[2] if len(x) > 2 else y
    if op == "MatMul":
        return x[0] @ x[1]
    if op == "Add":
        return x[0] + x[1]
    if op == "Sub":
        return x[0] - x[1]
    if op == "Mul":
        return x[0] * x[1]
    if op == "Relu":
        return np.maximum(x[0], 0)
    if op == "Sigmoid":
        return 1 / (1 + np.exp(-x[0]))
    if op == "Tanh":
        return np.tanh(x[0])
    if op == "Softmax":
        return softmax(x[0], a.get("axis", -1))
    if op == "Flatten":
        axis = a.get("axis", 1)
        return x[0].reshape(int(np.prod(x[0].shape[:axis])), -1)
    if op == "Reshape":
        return x[0].reshape([int(d) for d in x[1]])
    if op == "Identity":
        return x[0]
    if op == "Transpose":
        return np.transpose(x[0], a["perm"])
    if op == "Conv":
        y = np.einsum("ncyxij,mcij->nmyx", windows(x[0], a, 0.0), x[1], optimize=True)
        return y + per_channel(x[2], 4) if len(x) > 2 else y
    if op == "MaxPool":
        return windows(x[0], a, -np.inf).max(axis=(4, 5))
    if op == "AveragePool":  # count_include_pad 0 (the default): the padding is not counted
        if a.get("count_include_pad", 0):
            raise SystemExit("FAIL: AveragePool counts the padding; TensorFlow's 'same' does not")
        return windows(x[0], a, 0.0).sum(axis=(4, 5)) / windows(np.ones_like(x[0]), a, 0.0).sum(axis=(4, 5))
    if op == "GlobalAveragePool":
        return x[0].mean(axis=(2, 3), keepdims=True)
    if op == "BatchNormalization":
        n = x[0].ndim
        return (x[0] - per_channel(x[3], n)) / np.sqrt(per_channel(x[4], n) + a.get("epsilon", 1e-5)) * per_channel(x[1], n) \
            + per_channel(x[2], n)
    raise SystemExit(f"FAIL: the evaluator does not know op {op} (node {node.name})")


def evaluate(model, inputs, chunk=500):
    """The graph over the inputs, chunk samples at a time (a convolution's windows take memory)."""
    weights = {t.name: numpy_helper.to_array(t).astype(np.float64) if t.data_type == onnx.TensorProto.FLOAT
               else numpy_helper.to_array(t) for t in model.graph.initializer}
    outputs = []
    for lo in range(0, max(len(inputs), 1), chunk):
        values = dict(weights)
        values[model.graph.input[0].name] = inputs[lo:lo + chunk].astype(np.float64)
        for node in model.graph.node:  # ONNX requires topological order: one pass
            values[node.output[0]] = run_node(node, values)
        outputs.append(values[model.graph.output[0].name])
    return np.concatenate(outputs)


def dims(value_info):
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


def main():
    model_path, input_path, expected_path = sys.argv[1:4]
    expect_opset = int(sys.argv[sys.argv.index("--expect-opset") + 1]) if "--expect-opset" in sys.argv else None
    model = onnx.load(model_path)
    onnx.checker.check_model(model, full_check=True)
    inferred = shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    opsets = {o.domain: o.version for o in model.opset_import}
    if expect_opset is not None and opsets.get("", None) != expect_opset:
        raise SystemExit(f"FAIL: opset {opsets}, want {expect_opset}")
    inp, out = model.graph.input[0], model.graph.output[0]
    if dims(inp)[0] != "batch" or dims(out)[0] != "batch":
        raise SystemExit(f"FAIL: the batch dimension is not dynamic: input {dims(inp)}, output {dims(out)}")
    meta = {p.key: p.value for p in model.metadata_props}
    for key in ("project", "run_id", "mirrorlab_version"):
        if key not in meta:
            raise SystemExit(f"FAIL: metadata lacks {key}: {meta}")
    ops = [n.op_type for n in model.graph.node]
    if "Dropout" in ops:
        raise SystemExit("FAIL: Dropout left in the inference graph")

    x = read_input(input_path)
    x = x.reshape([x.shape[0]] + [int(d) for d in dims(inp)[1:]])  # an IDX image (h, w) is (h, w, 1) to a CNN
    y = evaluate(model, x)
    expected = read_expected(expected_path, x.shape[0])
    if y.shape != expected.shape:
        raise SystemExit(f"FAIL: output shape {y.shape}, Mirrorlab's {expected.shape}")
    # The declared output shape (and shape inference's) agrees with what the graph computes.
    declared = dims(out)[1:]
    if [int(d) for d in declared] != list(y.shape[1:]):
        raise SystemExit(f"FAIL: declared output {dims(out)}, computed {y.shape}")
    diff = float(np.abs(y - expected).max()) if y.size else 0.0
    print(f"ops={','.join(ops)} opset={opsets.get('')} samples={x.shape[0]} inferred_values={len(inferred.graph.value_info)} "
          f"metadata={meta} max_abs_diff={diff:.3g}")
    if not diff <= TOLERANCE:
        raise SystemExit(f"FAIL: max |onnx - mirrorlab| = {diff:.3g} > {TOLERANCE}")


if __name__ == "__main__":
    main()
