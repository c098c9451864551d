"""Projects the equivalence tests of the generated programs share (tf_equivalence.py on the reference
environment's TensorFlow, torch_equivalence.py on Debian's PyTorch): spirals MLPs and small CNNs on
8x8 images written here as IDX files."""
import os

import numpy as np


def spirals(name, optimizer, devices, batch, classes=3, layers=None, workers=1, **training):
    """Spirals (800 samples, 640 for training): 2 -> 32 tanh -> 32 tanh -> classes softmax unless `layers`."""
    t = {"epochs": 5, "batch_size": batch, "optimizer": optimizer, "loss": "sparse_categorical_crossentropy",
         "metrics": ["accuracy"], "seed": 42}
    t.update(training)
    layers = layers or [{"type": "Dense", "units": 32, "activation": "tanh"}, {"type": "Dense", "units": 32, "activation": "tanh"},
                        {"type": "Dense", "units": classes, "activation": "softmax"}]
    return {"schema_version": 1, "name": name, "model": {"input_shape": [2], "layers": layers},
            "data": {"kind": "spirals", "samples": 800, "classes": classes, "noise": 0.2, "seed": 7, "validation_split": 0.2},
            "training": t, "distribute": {"devices": devices, **({"workers": workers} if workers > 1 else {})}}


def write_images(folder):
    """400 8x8 grey images of 4 classes (a bar across, a bar down, a diagonal, a square) with noise, as
    IDX files images.idx and labels.idx (320 for training after the 0.2 hold-out)."""
    rng = np.random.default_rng(5)
    y = np.arange(400) % 4
    x = rng.uniform(0, 90, (400, 8, 8))
    for i, c in enumerate(y):
        k = rng.integers(1, 7)
        if c == 0:
            x[i, k, :] += 150
        elif c == 1:
            x[i, :, k] += 150
        elif c == 2:
            x[i, np.arange(8), np.arange(8)] += 150
        else:
            x[i, 2:6, 2:6] += 120
    for name, data in (("images", np.clip(x, 0, 255).astype(np.uint8)), ("labels", y.astype(np.uint8))):
        with open(os.path.join(folder, name + ".idx"), "wb") as f:
            f.write(bytes([0, 0, 8, data.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in data.shape) + data.tobytes())


def images(name, folder, devices, batch, layers, **training):
    """A model over write_images' 8x8x1 images (4 classes), Adam 0.01 unless `training` says otherwise."""
    t = {"epochs": 5, "batch_size": batch, "optimizer": {"name": "adam", "learning_rate": 0.01},
         "loss": "sparse_categorical_crossentropy", "metrics": ["accuracy"], "seed": 3}
    t.update(training)
    return {"schema_version": 1, "name": name, "model": {"input_shape": [8, 8, 1], "layers": layers},
            "data": {"kind": "idx", "train_images": os.path.join(folder, "images.idx"),
                     "train_labels": os.path.join(folder, "labels.idx"), "validation_split": 0.2, "seed": 1},
            "training": t, "distribute": {"devices": devices}}


def cnn_layers(norm=None):
    """Conv 4 (same) -> [BatchNormalization(**norm) -> relu] -> max-pool 2 -> Conv 6 (valid) -> Flatten -> Dense 4 softmax.
    Before BatchNormalization the convolution has no bias: the normalisation removes it, so its gradient is
    rounding noise, which Adam scales up to full steps (two exact programs then differ by 1e-2 there)."""
    layers = [{"type": "Conv2D", "filters": 4, "kernel_size": 3, "padding": "same"}]
    layers[0].update({"activation": "linear", "use_bias": False} if norm is not None else {"activation": "relu"})
    if norm is not None:
        layers += [{"type": "BatchNormalization", "momentum": 0.9, **norm}, {"type": "Activation", "activation": "relu"}]
    return layers + [{"type": "MaxPooling2D", "pool_size": 2}, {"type": "Conv2D", "filters": 6, "kernel_size": 3, "activation": "relu"},
                     {"type": "Flatten"}, {"type": "Dense", "units": 4, "activation": "softmax"}]


def reshaped_norm_layers(shape, synchronized=False):
    """The 8x8 image reshaped to a rank-2 sample `shape`, BatchNormalization over its last axis, then an MLP."""
    return [{"type": "Reshape", "target_shape": list(shape)},
            {"type": "BatchNormalization", "name": "norm", "momentum": 0.8, **({"synchronized": True} if synchronized else {})},
            {"type": "Flatten"}, {"type": "Dense", "units": 16, "activation": "tanh"}, {"type": "Dense", "units": 4, "activation": "softmax"}]
