"""Keras models for `mirrorlab-cli import`, built and trained by TensorFlow here, and the files
import must refuse.

usage: keras_models.py DATA_FOLDER OUT_FOLDER
Writes to OUT_FOLDER:
  mlp.keras, cnn_bn.keras, kinds.keras: Sequential models trained one epoch on 3,000 Fashion-MNIST
      training images (pixels / 255), compiled with Adam, SGD with Nesterov momentum and RMSprop;
      kinds.keras uses Reshape, Conv2D (strides, same padding, no bias), BatchNormalization without
      center, the ReLU and Softmax layers, AveragePooling2D, MaxPooling2D, Dropout and
      GlobalAveragePooling2D
  keras_evaluate.json: Keras' evaluate of each on the 10,000 test images {name: {loss, accuracy}}
  functional.keras (a Functional model), layernorm.keras (LayerNormalization at layer 3),
  regularized.keras (a kernel_regularizer at layer 2), newer.keras (metadata of Keras 4.0.0),
  damaged.keras (one byte of the weights flipped), legacy.h5 (Keras' HDF5 model file)
Runs with the reference environment's python (scripts/pyref.sh).
"""
import gzip
import json
import os
import sys
import zipfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import keras  # noqa: E402
from keras import layers  # noqa: E402


def idx(path):
    raw = gzip.open(path).read()
    magic, n = int.from_bytes(raw[0:4], "big"), int.from_bytes(raw[4:8], "big")
    if magic == 0x801:
        return np.frombuffer(raw, dtype=np.uint8, offset=8).astype(np.int64)
    rows, cols = int.from_bytes(raw[8:12], "big"), int.from_bytes(raw[12:16], "big")
    return np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(n, rows, cols).astype(np.float32) / np.float32(255)


def models():
    mlp = keras.Sequential([keras.Input((28, 28)), layers.Flatten(), layers.Dense(64, activation="relu"),
                            layers.Dropout(0.2), layers.Dense(10, activation="softmax")], name="mlp")
    mlp.compile(optimizer=keras.optimizers.Adam(0.002), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    cnn = keras.Sequential([keras.Input((28, 28, 1)), layers.Conv2D(8, 3, activation="relu"), layers.BatchNormalization(),
                            layers.MaxPooling2D(2), layers.Flatten(), layers.Dense(10, activation="softmax")], name="cnn_bn")
    cnn.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9, nesterov=True), loss="sparse_categorical_crossentropy",
                metrics=["accuracy"])
    kinds = keras.Sequential([
        keras.Input((28, 28)), layers.Reshape((28, 28, 1)),
        layers.Conv2D(6, 3, strides=2, padding="same", use_bias=False, kernel_initializer="he_normal"),
        layers.BatchNormalization(center=False, momentum=0.9), layers.ReLU(),
        layers.AveragePooling2D(2, strides=1, padding="same"), layers.MaxPooling2D(2), layers.Dropout(0.1),
        layers.Conv2D(12, 3, activation="tanh"), layers.GlobalAveragePooling2D(), layers.Dense(10), layers.Softmax()],
        name="kinds")
    kinds.compile(optimizer=keras.optimizers.RMSprop(0.003), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return {"mlp": mlp, "cnn_bn": cnn, "kinds": kinds}


def bad_files(out, good):
    inp = keras.Input((28, 28))
    keras.Model(inp, layers.Dense(10, activation="softmax")(layers.Flatten()(inp))).save(f"{out}/functional.keras")
    keras.Sequential([keras.Input((28, 28)), layers.Flatten(), layers.Dense(16), layers.LayerNormalization(name="norm"),
                      layers.Dense(10, activation="softmax")]).save(f"{out}/layernorm.keras")
    keras.Sequential([keras.Input((28, 28)), layers.Flatten(), layers.Dense(16, kernel_regularizer="l2", name="hidden"),
                      layers.Dense(10, activation="softmax")]).save(f"{out}/regularized.keras")
    good.save(f"{out}/legacy.h5")
    with zipfile.ZipFile(f"{out}/mlp.keras") as src, zipfile.ZipFile(f"{out}/newer.keras", "w") as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == "metadata.json":
                meta = json.loads(data)
                meta["keras_version"] = "4.0.0"
                data = json.dumps(meta).encode()
            dst.writestr(item, data)
    raw = bytearray(open(f"{out}/mlp.keras", "rb").read())
    raw[len(raw) // 2] ^= 0x55  # inside model.weights.h5, the largest entry: the CRC-32 sees it
    open(f"{out}/damaged.keras", "wb").write(bytes(raw))


def main(data, out):
    keras.utils.set_random_seed(7)
    x = idx(f"{data}/train-images-idx3-ubyte.gz")[:3000]
    y = idx(f"{data}/train-labels-idx1-ubyte.gz")[:3000]
    tx, ty = idx(f"{data}/t10k-images-idx3-ubyte.gz"), idx(f"{data}/t10k-labels-idx1-ubyte.gz")
    results = {}
    for name, m in models().items():
        shape = (-1,) + tuple(m.input_shape[1:])
        m.fit(x.reshape(shape), y, batch_size=64, epochs=1, verbose=0)
        m.save(f"{out}/{name}.keras")
        loss, acc = m.evaluate(tx.reshape(shape), ty, batch_size=500, verbose=0)
        results[name] = {"loss": float(loss), "accuracy": float(acc)}
        print(f"{name}: keras evaluate loss {loss:.7f} accuracy {acc:.5f}")
    json.dump(results, open(f"{out}/keras_evaluate.json", "w"))
    bad_files(out, m)
    print(f"keras {keras.__version__}: models and bad files in {out}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(*sys.argv[1:])
