// The data half of the generated programs, in numpy: Mirrorlab's random numbers (random/Rng.h:
// splitmix64 counters, Box-Muller normals, Fisher-Yates with next() % n), and with them the same
// spirals and blobs, the same validation hold-out, the same CSV standardisation and the same
// per-epoch shuffle (train/Trainer.cpp epochOrder), so a program fed the same weights trains on
// the same batches in the same order as Mirrorlab.
#include "learn/CodeGenParts.h"

namespace ml::codegen {
namespace {

constexpr const char* kRandom = R"PY(

# ---- Mirrorlab's random numbers (core/random/Rng.h), so the data, the split and the shuffle match ----
MASK64 = (1 << 64) - 1


def splitmix64(x):
    """splitmix64 over a uint64 array; numpy's array arithmetic wraps modulo 2**64 as C++ does."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def hash_keys(a, b, c=0, d=0):
    """Mirrorlab's hashKeys: splitmix64(splitmix64(splitmix64(splitmix64(a) ^ b) ^ c) ^ d), in Python integers."""
    def mix(x):
        x = (x + 0x9E3779B97F4A7C15) & MASK64
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
        return x ^ (x >> 31)
    h = mix(a & MASK64)
    for key in (b, c, d):
        h = mix(h ^ (key & MASK64))
    return h


def rng_bits(seed, count):
    """The first `count` values of Mirrorlab's Rng(seed).next(): splitmix64(seed + k)."""
    return splitmix64(np.uint64(seed) + np.arange(count, dtype=np.uint64))


def rng_uniform(seed, count):
    return (rng_bits(seed, count) >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


def rng_normal(seed, count):
    """Box-Muller, one value per two uniforms, as Rng.normal()."""
    u = rng_uniform(seed, 2 * count)
    u1, u2 = np.maximum(u[0::2], 1e-300), u[1::2]
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(6.283185307179586 * u2)


def shuffled(n, key):
    """Fisher-Yates from the last position down, j = next() % (i + 1), as Mirrorlab shuffles."""
    order = list(range(n))
    if n > 1:
        i = np.arange(n - 1, 0, -1, dtype=np.uint64)
        picks = (rng_bits(key, n - 1) % (i + np.uint64(1))).astype(np.int64).tolist()
        for pos, j in zip(range(n - 1, 0, -1), picks):
            order[pos], order[j] = order[j], order[pos]
    return np.array(order, dtype=np.int64)


def epoch_order(n, seed, epoch):
    """The order in which Mirrorlab visits the n training samples in `epoch` (1, 2, ...)."""
    return shuffled(n, hash_keys(seed, 0x5EED, epoch))
)PY";

// The IDX reader and the helpers every data kind uses.
constexpr const char* kCommonData = R"PY(

def read_idx(path):
    """An IDX file of unsigned bytes (gzip or raw): 0, 0, 0x08, ndim, ndim big-endian sizes, data."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise ValueError(path + ": not an IDX file of unsigned bytes")
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_idx_pair(images_path, labels_path):
    x = read_idx(images_path).astype(np.float32) / np.float32(255.0)
    y = read_idx(labels_path).astype(np.int64)
    if len(x) != len(y):
        raise ValueError(images_path + " and " + labels_path + " hold different numbers of samples")
    return x, y


def split_validation(x, y, share, seed):
    """Holds out round(share * n) samples chosen as Mirrorlab does; both parts keep their original order."""
    n = len(x)
    n_val = max(1, int(math.floor(share * n + 0.5)))
    perm = shuffled(n, hash_keys(seed, 0x5971))
    train_idx, val_idx = np.sort(perm[:n - n_val]), np.sort(perm[n - n_val:])
    return x[train_idx], y[train_idx], x[val_idx], y[val_idx]
)PY";

std::string fashionLoader() {
  return R"PY(

def find_idx(folder, base):
    for name in (base + ".gz", base):
        path = os.path.join(folder, name)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(os.path.join(folder, base + ".gz") + " not found: install the Debian package "
                            "dataset-fashion-mnist or pass --data FOLDER")


def load_data(data_dir=None):
    folder = data_dir or DATA_DIR
    x_train, y_train = load_idx_pair(find_idx(folder, "train-images-idx3-ubyte"), find_idx(folder, "train-labels-idx1-ubyte"))
    x_test, y_test = load_idx_pair(find_idx(folder, "t10k-images-idx3-ubyte"), find_idx(folder, "t10k-labels-idx1-ubyte"))
    num_classes = int(max(y_train.max(), y_test.max())) + 1
    return x_train, y_train, x_test, y_test, num_classes
)PY";
}

std::string idxLoader() {
  return R"PY(

def load_data(data_dir=None):
    def path(p):
        return os.path.join(data_dir, os.path.basename(p)) if data_dir and p else p
    x_train, y_train = load_idx_pair(path(TRAIN_IMAGES), path(TRAIN_LABELS))
    x_val = y_val = None
    if TEST_IMAGES:
        x_val, y_val = load_idx_pair(path(TEST_IMAGES), path(TEST_LABELS))
    elif VALIDATION_SPLIT > 0:
        x_train, y_train, x_val, y_val = split_validation(x_train, y_train, VALIDATION_SPLIT, DATA_SEED)
    num_classes = int(max(y_train.max(), y_val.max() if y_val is not None else 0)) + 1
    return x_train, y_train, x_val, y_val, num_classes
)PY";
}

std::string csvLoader() {
  return R"PY(

def read_csv(path):
    """Numeric CSV with a header row; returns (features float32, label column float32)."""
    with open(path, encoding="utf-8-sig") as f:
        header = [h.strip().strip('"') for h in f.readline().split(",")]
    if LABEL_COLUMN not in header:
        raise ValueError(path + ": no column " + repr(LABEL_COLUMN) + " (columns: " + ", ".join(header) + ")")
    table = np.atleast_2d(np.genfromtxt(path, delimiter=",", skip_header=1, dtype=np.float64, encoding="utf-8-sig"))
    if np.isnan(table).any():
        raise ValueError(path + ": empty or non-numeric cells")
    col = header.index(LABEL_COLUMN)
    return np.delete(table, col, axis=1).astype(np.float32), table[:, col].astype(np.float32)


def standardize(x, mean, std):
    """(x - mean) / std in float64, as Mirrorlab; a column constant up to rounding becomes 0."""
    out = (x.astype(np.float64) - mean) / np.where(std > 0, std, 1.0)
    return np.where(std > 0, out, 0.0).astype(np.float32)


def load_data(data_dir=None):
    path = os.path.join(data_dir, os.path.basename(CSV_PATH)) if data_dir else CSV_PATH
    x_train, y_train = read_csv(path)
    x_val = y_val = None
    if CSV_TEST_PATH:
        test_path = os.path.join(data_dir, os.path.basename(CSV_TEST_PATH)) if data_dir else CSV_TEST_PATH
        x_val, y_val = read_csv(test_path)
    labels = y_train if y_val is None else np.concatenate([y_train, y_val])
    # Class labels when every label is a small non-negative integer (as Mirrorlab decides).
    classification = bool(np.all(labels >= 0) and np.all(labels == np.floor(labels)) and labels.max() <= 1e6
                          and len(np.unique(labels)) <= 1000)
    cast = (lambda y: y.astype(np.int64)) if classification else (lambda y: y.reshape(-1, 1))
    y_train = cast(y_train)
    y_val = cast(y_val) if y_val is not None else None
    if x_val is None and VALIDATION_SPLIT > 0:
        x_train, y_train, x_val, y_val = split_validation(x_train, y_train, VALIDATION_SPLIT, DATA_SEED)
    if STANDARDIZE:  # statistics of the training part only, two passes in float64
        mean = x_train.astype(np.float64).mean(axis=0)
        std = np.sqrt(((x_train.astype(np.float64) - mean) ** 2).mean(axis=0))
        std = np.where(std > 1e-7 * np.maximum(1.0, np.abs(mean)), std, 0.0)
        x_train = standardize(x_train, mean, std)
        x_val = standardize(x_val, mean, std) if x_val is not None else None
    num_classes = int(labels.max()) + 1 if classification else 0
    return x_train, y_train, x_val, y_val, num_classes
)PY";
}

std::string syntheticLoader(bool spirals) {
  std::string gen = spirals ? R"PY(

def make_data(seed):
    """CLASSES spiral arms in 2-D: sample i is on arm i % CLASSES at radius r in [0, 1]."""
    i = np.arange(SAMPLES)
    c = i % CLASSES
    k = i // CLASSES
    n = SAMPLES // CLASSES + (c < SAMPLES % CLASSES)
    r = np.where(n > 1, k / np.maximum(n - 1, 1), 0.0)
    t = 6.283185307179586 * c / CLASSES + 4.0 * r + NOISE * rng_normal(hash_keys(seed, 0x5B1A15), SAMPLES)
    x = np.stack([r * np.sin(t), r * np.cos(t)], axis=1).astype(np.float32)
    return x, c.astype(np.int64)
)PY"
                            : R"PY(

def make_data(seed):
    """CLASSES Gaussian clusters in FEATURES dimensions, centres uniform in [-5, 5]."""
    centres = (-5.0 + 10.0 * rng_uniform(hash_keys(seed, 0xB10B, 1), CLASSES * FEATURES)).reshape(CLASSES, FEATURES)
    c = np.arange(SAMPLES) % CLASSES
    x = centres[c] + NOISE * rng_normal(hash_keys(seed, 0xB10B, 2), SAMPLES * FEATURES).reshape(SAMPLES, FEATURES)
    return x.astype(np.float32), c.astype(np.int64)
)PY";
  return gen + R"PY(

def load_data(data_dir=None):
    # Mirrorlab's formula with Mirrorlab's random numbers: the same points.
    x, y = make_data(DATA_SEED)
    if VALIDATION_SPLIT > 0:
        x_train, y_train, x_val, y_val = split_validation(x, y, VALIDATION_SPLIT, DATA_SEED)
        return x_train, y_train, x_val, y_val, CLASSES
    return x, y, None, None, CLASSES
)PY";
}

}  // namespace

std::string dataLoaderPython(const Project& p) {
  const DataSpec& d = p.data;
  std::string out = std::string("\n# ---- data: ") + toString(d.kind) + " ----\n";
  out += "INPUT_SHAPE = " + pyShape(p.model.inputShape) +
         "  # one sample as the model takes it (images: channels-last)\n\n\n"
         "def as_input(x):\n    return None if x is None else x.reshape((-1,) + INPUT_SHAPE)\n\n\n";
  if (d.kind == DataKind::FashionMnist) {
    out += "DATA_DIR = " + pyStr(d.path.empty() ? "/usr/share/datasets/fashion-mnist" : d.path) + "\n";
  } else if (d.kind == DataKind::Idx) {
    out += "TRAIN_IMAGES = " + pyStr(d.trainImages) + "\nTRAIN_LABELS = " + pyStr(d.trainLabels) + "\n";
    out += "TEST_IMAGES = " + pyStr(d.testImages) + "\nTEST_LABELS = " + pyStr(d.testLabels) + "\n";
  } else if (d.kind == DataKind::Csv) {
    out += "CSV_PATH = " + pyStr(d.path) + "\nCSV_TEST_PATH = " + pyStr(d.testPath) + "\n";
    out += "LABEL_COLUMN = " + pyStr(d.labelColumn) + "\nSTANDARDIZE = " + pyBool(d.standardize) + "\n";
  } else {
    out += "SAMPLES = " + pyInt(d.samples) + "\nCLASSES = " + pyInt(d.classes) + "\nNOISE = " + pyNum(d.noise) + "\n";
    if (d.kind == DataKind::Blobs) out += "FEATURES = " + pyInt(d.features) + "\n";
  }
  if (d.kind != DataKind::FashionMnist)
    out += "VALIDATION_SPLIT = " + pyNum(d.validationSplit) + "\nDATA_SEED = " + std::to_string(d.seed) + "\n";
  out += kRandom;
  out += kCommonData;
  if (d.kind == DataKind::FashionMnist)
    out += fashionLoader();
  else if (d.kind == DataKind::Idx)
    out += idxLoader();
  else if (d.kind == DataKind::Csv)
    out += csvLoader();
  else
    out += syntheticLoader(d.kind == DataKind::Spirals);
  return out;
}

}  // namespace ml::codegen
