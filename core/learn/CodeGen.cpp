// Shared parts of the program generators: literals, the model plan, the opening comment and the
// numpy data loader, which mirrors core/data (IDX scaled to [0, 1], CSV label column, the same
// spiral and blob formulas, the validation hold-out) without promising bit-identical samples.
#include <algorithm>
#include <cctype>
#include <charconv>

#include "Error.h"
#include "backend/DeviceList.h"
#include "learn/CodeGen.h"
#include "learn/CodeGenParts.h"
#include "nn/Loss.h"
#include "nn/Sequential.h"

namespace ml {

Framework parseFramework(const std::string& name) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (n == "tf" || n == "tensorflow" || n == "keras") return Framework::TensorFlow;
  if (n == "torch" || n == "pytorch") return Framework::PyTorch;
  throw UserError("unknown framework '" + name + "' (allowed: tf, torch)");
}

const char* toString(Framework f) { return f == Framework::TensorFlow ? "tf" : "torch"; }

std::string generateProgram(const Project& project, Framework framework) {
  return framework == Framework::TensorFlow ? generateTensorFlowProgram(project) : generatePyTorchProgram(project);
}

std::string suggestedFileName(const Project& project, Framework framework) {
  std::string stem;
  for (unsigned char c : project.name) {
    if (std::isalnum(c)) stem += static_cast<char>(std::tolower(c));
    else if (!stem.empty() && stem.back() != '_') stem += '_';
  }
  while (!stem.empty() && stem.back() == '_') stem.pop_back();
  if (stem.empty() || std::isdigit(static_cast<unsigned char>(stem.front()))) stem = "project_" + stem;
  return stem + (framework == Framework::TensorFlow ? "_mirrored_tf.py" : "_ddp_torch.py");
}

namespace codegen {

std::string pyStr(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);  // UTF-8 passes through: Python 3 source is UTF-8
        }
    }
  }
  return out + "\"";
}

std::string pyNum(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, end);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string pyDocText(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n' || c == '\r' || c == '\t') out += ' ';
    else if (c == '\\') out += '/';
    else if (c == '"' && out.size() >= 2 && out.compare(out.size() - 2, 2, "\"\"") == 0) out += '\'';
    else out += c;
  }
  return out;
}

std::string pyInt(int64_t v) { return std::to_string(v); }
std::string pyBool(bool b) { return b ? "True" : "False"; }

std::string pyShape(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

ModelPlan planModel(const Project& p) {
  Sequential model(p.model);  // validates shapes and fills in generated names
  ModelPlan plan;
  plan.input = p.model.inputShape;
  plan.params = model.paramCount();
  plan.outputs = model.outFeatures();
  int64_t in = numel(plan.input);
  const auto& layers = model.spec().layers;
  for (size_t i = 0; i < layers.size(); ++i) {
    const auto& s = layers[i];
    const auto& a = s.args;
    LayerPlan l;
    l.type = s.type;
    l.name = s.name;
    l.inFeatures = in;
    if (s.type == "Dense") {
      l.units = a.at("units").get<int64_t>();
      l.activation = a.value("activation", std::string("linear"));
      l.useBias = a.value("use_bias", true);
      l.kernelInit = a.value("kernel_initializer", std::string("glorot_uniform"));
      l.biasInit = a.value("bias_initializer", std::string("zeros"));
    } else if (s.type == "Activation") {
      l.activation = a.value("activation", std::string("linear"));
    } else if (s.type == "Dropout") {
      l.rate = a.value("rate", 0.5);
    }
    if (l.activation == "none" || l.activation.empty()) l.activation = "linear";
    in = numel(model.layer(i).outputShape);
    plan.layers.push_back(l);
  }
  for (auto it = plan.layers.rbegin(); it != plan.layers.rend(); ++it) {
    if (it->type == "Dense" || it->type == "Activation") {
      plan.endsInSoftmax = it->activation == "softmax";
      break;
    }
  }
  return plan;
}

int projectReplicas(const Project& p) { return std::max(1, parseDevices(p.distribute.devices).size()); }

bool isClassification(const Project& p) { return Loss::make(p.training.loss, p.training.fromLogits).isClassification(); }

std::string headerComment(const Project& p, const std::string& framework, const std::vector<std::string>& mapping) {
  std::string out = "# Mirrorlab project " + pyStr(p.name) + " as a " + framework + " program (generated by Mirrorlab " +
                    MIRRORLAB_VERSION + ").\n";
  for (const auto& line : mapping) out += "# " + line + "\n";
  return out;
}

namespace {

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
    x = read_idx(images_path).astype(np.float32) / 255.0
    y = read_idx(labels_path).astype(np.int64)
    if len(x) != len(y):
        raise ValueError(images_path + " and " + labels_path + " hold different numbers of samples")
    return x, y


def split_validation(x, y, share, seed):
    """Holds out round(share * n) samples chosen by seed; both parts keep their original order."""
    n = len(x)
    n_val = max(1, int(round(share * n)))
    perm = np.random.default_rng(seed).permutation(n)
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
    """Numeric CSV with a header row; returns (features float32, label column float64)."""
    with open(path) as f:
        header = [h.strip().strip('"') for h in f.readline().split(",")]
    if LABEL_COLUMN not in header:
        raise ValueError(path + ": no column " + repr(LABEL_COLUMN) + " (columns: " + ", ".join(header) + ")")
    table = np.atleast_2d(np.genfromtxt(path, delimiter=",", skip_header=1, dtype=np.float64))
    if np.isnan(table).any():
        raise ValueError(path + ": empty or non-numeric cells")
    col = header.index(LABEL_COLUMN)
    return np.delete(table, col, axis=1).astype(np.float32), table[:, col]


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
    cast = (lambda y: y.astype(np.int64)) if classification else (lambda y: y.astype(np.float32).reshape(-1, 1))
    y_train = cast(y_train)
    y_val = cast(y_val) if y_val is not None else None
    if x_val is None and VALIDATION_SPLIT > 0:
        x_train, y_train, x_val, y_val = split_validation(x_train, y_train, VALIDATION_SPLIT, DATA_SEED)
    if STANDARDIZE:  # statistics of the training part only
        mean, std = x_train.mean(axis=0), x_train.std(axis=0)
        std[std == 0] = 1.0
        x_train = (x_train - mean) / std
        x_val = (x_val - mean) / std if x_val is not None else None
    num_classes = int(labels.max()) + 1 if classification else 0
    return x_train, y_train, x_val, y_val, num_classes
)PY";
}

std::string syntheticLoader(bool spirals) {
  std::string gen = spirals ? R"PY(

def make_data(rng):
    """CLASSES spiral arms in 2-D: sample i is on arm i % CLASSES at radius r in [0, 1]."""
    i = np.arange(SAMPLES)
    c = i % CLASSES
    k = i // CLASSES
    n = SAMPLES // CLASSES + (c < SAMPLES % CLASSES)
    r = np.where(n > 1, k / np.maximum(n - 1, 1), 0.0)
    t = 2 * np.pi * c / CLASSES + 4.0 * r + NOISE * rng.standard_normal(SAMPLES)
    x = np.stack([r * np.sin(t), r * np.cos(t)], axis=1).astype(np.float32)
    return x, c.astype(np.int64)
)PY"
                            : R"PY(

def make_data(rng):
    """CLASSES Gaussian clusters in FEATURES dimensions, centres uniform in [-5, 5]."""
    centres = rng.uniform(-5.0, 5.0, size=(CLASSES, FEATURES))
    c = np.arange(SAMPLES) % CLASSES
    x = centres[c] + NOISE * rng.standard_normal((SAMPLES, FEATURES))
    return x.astype(np.float32), c.astype(np.int64)
)PY";
  return gen + R"PY(

def load_data(data_dir=None):
    # Same formula as Mirrorlab's generator; numpy's random stream, so not the same points.
    x, y = make_data(np.random.default_rng(DATA_SEED))
    if VALIDATION_SPLIT > 0:
        x_train, y_train, x_val, y_val = split_validation(x, y, VALIDATION_SPLIT, DATA_SEED)
        return x_train, y_train, x_val, y_val, CLASSES
    return x, y, None, None, CLASSES
)PY";
}

}  // namespace

std::string dataLoaderPython(const Project& p) {
  const DataSpec& d = p.data;
  std::string out = "\n# ---- data: " + d.kind + " ----\n";
  if (d.kind == "fashion-mnist") {
    out += "DATA_DIR = " + pyStr(d.path.empty() ? "/usr/share/datasets/fashion-mnist" : d.path) + "\n";
  } else if (d.kind == "idx") {
    out += "TRAIN_IMAGES = " + pyStr(d.trainImages) + "\nTRAIN_LABELS = " + pyStr(d.trainLabels) + "\n";
    out += "TEST_IMAGES = " + pyStr(d.testImages) + "\nTEST_LABELS = " + pyStr(d.testLabels) + "\n";
  } else if (d.kind == "csv") {
    out += "CSV_PATH = " + pyStr(d.path) + "\nCSV_TEST_PATH = " + pyStr(d.testPath) + "\n";
    out += "LABEL_COLUMN = " + pyStr(d.labelColumn) + "\nSTANDARDIZE = " + pyBool(d.standardize) + "\n";
  } else {
    out += "SAMPLES = " + pyInt(d.samples) + "\nCLASSES = " + pyInt(d.classes) + "\nNOISE = " + pyNum(d.noise) + "\n";
    if (d.kind == "blobs") out += "FEATURES = " + pyInt(d.features) + "\n";
  }
  if (d.kind != "fashion-mnist") out += "VALIDATION_SPLIT = " + pyNum(d.validationSplit) + "\nDATA_SEED = " + std::to_string(d.seed) + "\n";
  out += kCommonData;
  if (d.kind == "fashion-mnist") out += fashionLoader();
  else if (d.kind == "idx") out += idxLoader();
  else if (d.kind == "csv") out += csvLoader();
  else out += syntheticLoader(d.kind == "spirals");
  return out;
}

}  // namespace codegen
}  // namespace ml
