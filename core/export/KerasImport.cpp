// A .keras archive as a Mirrorlab project and weights: the archive and its metadata checked, the
// Sequential configuration mapped layer by layer (KerasLayerImport.cpp), the compile settings as
// training settings, the model built by Mirrorlab and its weights copied from model.weights.h5
// with every shape checked; then (runImport) both files written.
#include "export/KerasImport.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "AtomicFile.h"
#include "Error.h"
#include "export/KerasLayerImport.h"
#include "export/WeightsNpz.h"
#include "export/ZipFile.h"
#include "nn/LayerKind.h"
#include "nn/Precision.h"
#include "nn/Sequential.h"
#include "project/WeightsFile.h"

namespace fs = std::filesystem;

namespace ml {

namespace {

using Json = nlohmann::json;

constexpr int kKerasMajor = 3;                    // the archive format read here
constexpr const char* kVerifiedKeras = "3.15.1";  // the Keras the tests build models with

[[noreturn]] void refuse(const std::string& file, const std::string& problem, const std::string& fix) {
  throw UserError("Keras model '" + file + "' " + problem + ": " + fix + "; nothing was written");
}

std::string readBytes(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    throw UserError("cannot open the Keras model '" + path +
                    "': " + (fs::exists(path, ec) ? "it is not a file" : "no such file; check the path"));
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) throw UserError("cannot read the Keras model '" + path + "': check its permissions");
  return bytes;
}

// The archive's entries by name; what is not a Keras 3 archive is named for what it is.
std::map<std::string, std::string> archiveEntries(const std::string& path) {
  const std::string bytes = readBytes(path);
  if (bytes.compare(0, 8, "\x89HDF\r\n\x1a\n") == 0)
    refuse(path, "is an HDF5 file (Keras 2's .h5 model, or weights alone), not a Keras 3 archive",
           "open it with Keras and save it with model.save(\"model.keras\"), then import that");
  if (!looksLikeZip(bytes))
    refuse(path, "is not a .keras archive (not a zip file)", "save the model with model.save(\"model.keras\") in Keras 3");
  std::map<std::string, std::string> entries;
  try {
    for (auto& e : readZip(bytes, "'" + path + "'")) entries[e.name] = std::move(e.bytes);
  } catch (const UserError& e) {
    refuse(path, std::string("is damaged (") + e.what() + ")", "save the model again with Keras and import the new file");
  }
  for (const char* need : {"metadata.json", "config.json", "model.weights.h5"})
    if (!entries.count(need))
      refuse(path, std::string("is damaged or not a Keras model: its archive has no ") + need,
             "save the model with model.save(\"model.keras\") in Keras 3");
  return entries;
}

Json parseJson(const std::string& text, const std::string& path, const char* entry) {
  try {
    return Json::parse(text);
  } catch (const Json::exception&) {
    refuse(path, std::string("is damaged: its ") + entry + " is not JSON", "save the model again with Keras");
  }
}

// Keras 3 writes the version it was; another major version may lay the archive out differently.
std::string checkVersion(const Json& meta, const std::string& path, std::vector<std::string>& notes) {
  const std::string v = meta.is_object() ? meta.value("keras_version", std::string()) : std::string();
  int major = 0, minor = 0;
  if (std::sscanf(v.c_str(), "%d.%d", &major, &minor) != 2)
    refuse(path, "is damaged: its metadata.json names no Keras version", "save the model again with Keras");
  if (major > kKerasMajor)
    refuse(path, "was saved by Keras " + v + ", newer than the Keras 3 archives Mirrorlab reads",
           "save it from Keras 3 (keras.saving.load_model, then model.save(\"model.keras\") under Keras 3), "
           "or use a Mirrorlab that names Keras " +
               std::to_string(major) + " in docs/EXPORTING.md");
  if (major < kKerasMajor)
    refuse(path, "was saved by Keras " + v + ", older than the Keras 3 archives Mirrorlab reads",
           "open it in Keras 3 and save it again with model.save(\"model.keras\")");
  int vMajor = 0, vMinor = 0;
  std::sscanf(kVerifiedKeras, "%d.%d", &vMajor, &vMinor);
  if (minor > vMinor)
    notes.push_back("the model was saved by Keras " + v + "; imports were verified with Keras " + kVerifiedKeras +
                    ": check the imported model's evaluate against Keras'");
  return v;
}

Shape inputShape(const Json& dims, const std::string& path, const std::string& where) {
  if (!dims.is_array() || dims.size() < 2)
    refuse(path, "has no input shape in " + where, "build the model with keras.Input(shape) as its first layer and save again");
  Shape s;
  for (size_t i = 1; i < dims.size(); ++i) {
    if (!dims[i].is_number_integer() || dims[i].get<int64_t>() <= 0)
      refuse(path, "has an input of unknown size " + dims.dump() + " in " + where,
             "give every size but the batch in keras.Input(shape=(...)) and save again");
    s.push_back(dims[i].get<int64_t>());
  }
  return s;
}

std::string lossName(const Json& loss, const std::string& path, bool& fromLogits) {
  if (loss.is_null()) return "sparse_categorical_crossentropy";
  if (loss.is_string()) {
    const std::string l = loss.get<std::string>();
    if (l == "mse") return "mean_squared_error";
    for (const char* ok :
         {"sparse_categorical_crossentropy", "categorical_crossentropy", "mean_squared_error", "binary_crossentropy"})
      if (l == ok) return l;
  } else if (loss.is_object()) {
    const Json cfg = loss.value("config", Json::object());
    const std::string name = kerasLayerName(loss.value("class_name", std::string()));
    bool plain = cfg.value("label_smoothing", 0.0) == 0.0 && cfg.value("ignore_class", Json()).is_null() &&
                 cfg.value("reduction", std::string("sum_over_batch_size")) == "sum_over_batch_size" &&
                 cfg.value("axis", -1) == -1;
    fromLogits = cfg.value("from_logits", false);
    for (const char* ok :
         {"sparse_categorical_crossentropy", "categorical_crossentropy", "mean_squared_error", "binary_crossentropy"})
      if (plain && name == ok) return name;
  }
  refuse(path, "is compiled with the loss " + loss.dump() + ", which Mirrorlab lacks",
         "Mirrorlab has sparse_categorical_crossentropy, categorical_crossentropy, binary_crossentropy and "
         "mean_squared_error (no label smoothing, no ignored class): compile with one of them, or save the model uncompiled");
}

OptimizerSpec optimizer(const Json& o, const std::string& path, int& accumulate) {
  OptimizerSpec spec;
  if (o.is_null()) return spec;
  const std::string cls = o.is_string() ? o.get<std::string>() : o.value("class_name", std::string());
  const Json cfg = o.is_object() ? o.value("config", Json::object()) : Json::object();
  const std::optional<OptimizerKind> kind = cls == "SGD" || cls == "sgd"           ? OptimizerKind::Sgd
                                            : cls == "Adam" || cls == "adam"       ? OptimizerKind::Adam
                                            : cls == "RMSprop" || cls == "rmsprop" ? std::optional(OptimizerKind::RmsProp)
                                                                                   : std::nullopt;
  auto lacks = [&](const std::string& what) {
    refuse(path,
           "is compiled with the optimizer " + (cls.empty() ? std::string("(no class)") : cls) + what + ", which Mirrorlab lacks",
           "Mirrorlab has SGD (momentum, nesterov), Adam and RMSprop (rho, momentum) with a constant learning rate and no "
           "weight decay, clipping, EMA or AMSGrad: compile with those, or save the model uncompiled");
  };
  if (!kind) lacks("");
  spec.kind = *kind;
  const Json lr = cfg.value("learning_rate", Json(0.001));
  if (!lr.is_number()) lacks(" (a learning-rate schedule " + lr.dump().substr(0, 60) + ")");
  spec.learningRate = lr.get<double>();
  for (const char* off : {"weight_decay", "clipnorm", "global_clipnorm", "clipvalue", "loss_scale_factor"})
    if (cfg.contains(off) && !cfg[off].is_null() && cfg[off] != 0) lacks(std::string(" (") + off + "=" + cfg[off].dump() + ")");
  for (const char* off : {"use_ema", "amsgrad", "centered"})
    if (cfg.value(off, false)) lacks(std::string(" (") + off + "=True)");
  const Json steps = cfg.value("gradient_accumulation_steps", Json());
  if (steps.is_number_integer() && steps.get<int64_t>() > 1 && steps.get<int64_t>() <= 1024)
    accumulate = static_cast<int>(steps.get<int64_t>());  // Mirrorlab's accumulation: micro-batches per update
  spec.momentum = cfg.value("momentum", 0.0);
  spec.nesterov = cfg.value("nesterov", false);
  spec.beta1 = cfg.value("beta_1", 0.9);
  spec.beta2 = cfg.value("beta_2", 0.999);
  spec.rho = cfg.value("rho", 0.9);
  spec.epsilon = cfg.value("epsilon", 1e-7);
  return spec;
}

// compile_config as the project's training settings; an uncompiled model gets Mirrorlab's defaults.
void training(const Json& compile, const std::string& path, TrainingSpec& t, std::vector<std::string>& notes) {
  if (!compile.is_object()) {
    notes.push_back("the model was saved uncompiled: the project trains with Adam (0.001) and " + lossText(t) +
                    "; change \"training\" in the project if that is not what you want");
    return;
  }
  t.loss = parseLossKind(lossName(compile.value("loss", Json()), path, t.fromLogits)).value();  // one of Keras' names
  t.optimizer = optimizer(compile.value("optimizer", Json()), path, t.accumulate);
  for (const char* off : {"loss_weights", "weighted_metrics"})
    if (compile.contains(off) && !compile[off].is_null() && !compile[off].empty())
      refuse(path, std::string("is compiled with ") + off + ", which Mirrorlab lacks", "compile without it");
  t.metrics.clear();
  const Json metrics = compile.value("metrics", Json::array());
  for (const auto& m : metrics.is_array() ? metrics : Json::array({metrics})) {
    std::string name = m.is_string() ? m.get<std::string>() : m.is_object() ? kerasLayerName(m.value("class_name", "")) : "";
    if (name == "acc" || name == "sparse_categorical_accuracy" || name == "categorical_accuracy") name = "accuracy";
    if (name == "mean_absolute_error") name = "mae";
    if (name != "accuracy" && name != "mae" && name != "binary_accuracy")
      refuse(path, "is compiled with the metric " + m.dump() + ", which Mirrorlab lacks",
             "Mirrorlab's metrics are accuracy, binary_accuracy and mae: compile with those");
    t.metrics.push_back(name);
  }
  if (t.metrics.size() > 1) notes.push_back("Mirrorlab reports one metric: the project keeps " + t.metrics.front());
  if (t.metrics.size() > 1) t.metrics.resize(1);
}

// Keras' axis (batch axis 0) against Mirrorlab's semantics on a sample of shape s.
void checkAxis(const ImportedLayer& l, const Layer& built, const KerasLayerPlace& place) {
  if (l.axis.is_null()) return;
  const auto rank = static_cast<int64_t>(built.inputShape.size());
  std::vector<int64_t> axes;
  for (const auto& a : l.axis.is_array() ? l.axis : Json::array({l.axis})) {
    if (!a.is_number_integer()) place.refuse("has axis=" + l.axis.dump(), "save the model again with Keras");
    const int64_t v = a.get<int64_t>();
    axes.push_back(v < 0 ? rank + 1 + v : v);
  }
  std::sort(axes.begin(), axes.end());
  const bool last = axes == std::vector<int64_t>{rank};
  if (l.spec.kind().keras.axis == KerasAxis::LastAxis) {  // BatchNormalization
    if (!last)
      place.refuse("normalises axis " + l.axis.dump() + " of a " + shapeToString(built.inputShape, false) + " sample",
                   "Mirrorlab normalises the last axis (channels): use axis=-1");
    return;
  }
  std::vector<int64_t> every;
  for (int64_t a = 1; a <= rank; ++a) every.push_back(a);
  int64_t others = 1;
  for (int64_t a = 0; a + 1 < rank; ++a) others *= built.inputShape[static_cast<size_t>(a)];
  std::string list;
  for (int64_t a : every) list += (list.empty() ? "" : ", ") + std::to_string(a);
  if (axes != every && !(last && others == 1))
    place.refuse("takes the softmax over axis " + l.axis.dump() + " of a " + shapeToString(built.inputShape, false) +
                     " sample, where Mirrorlab's softmax spans the whole sample",
                 "flatten before the softmax, or use keras.layers.Softmax(axis=[" + list + "])");
}

// Copies each layer's variables, in Keras' order (kernel, bias; gamma, beta, moving mean and
// variance), into its slice of the flat buffer, checking every shape against the built layer.
std::string dims(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : ", ") + std::to_string(d);
  return "(" + s + ")";
}

// Copies each layer's variables, in Keras' order (kernel, bias; gamma, beta, moving mean and
// variance, the order of Mirrorlab's slice too), into its slice of the flat buffer; every array's
// shape must be the one the built layer has (weightArrays names them in that order).
std::vector<float> copyWeights(Sequential& model, const std::vector<ImportedLayer>& layers,
                               const std::vector<std::string>& groups, const std::string& h5, const std::string& path) {
  const auto vars = readKerasWeights(h5, "Keras model '" + path + "'");
  std::map<std::string, std::vector<std::vector<int64_t>>> want;  // per layer name, the shapes in order
  for (const auto& a : weightArrays(model)) want[a.name.substr(0, a.name.rfind('/'))].push_back(a.shape);
  std::vector<float> params(static_cast<size_t>(model.paramCount()));
  std::vector<int64_t> offset(model.layerCount(), 0);
  for (const auto& r : model.paramRanges()) offset[r.layer] = r.offset;
  for (size_t i = 0; i < layers.size(); ++i) {
    const auto it = vars.find(groups[i]);
    const std::vector<KerasArray> none;
    const std::vector<KerasArray>& have = it == vars.end() ? none : it->second;
    const std::vector<std::vector<int64_t>>& shapes = want[model.layer(i).name];
    std::string got, need;
    for (const auto& a : have) got += (got.empty() ? "" : " ") + dims(a.shape);
    for (const auto& sh : shapes) need += (need.empty() ? "" : " ") + dims(sh);
    if (got != need)
      refuse(path,
             "is damaged: layer " + std::to_string(i + 1) + " '" + layers[i].spec.name + "' has weights " +
                 (got.empty() ? "none" : got) + " in model.weights.h5 (group layers/" + groups[i] +
                 ") where its configuration needs " + (need.empty() ? "none" : need),
             "save the model again with Keras");
    int64_t at = offset[i];
    for (const auto& a : have) {
      std::copy(a.data.begin(), a.data.end(), params.begin() + at);
      at += static_cast<int64_t>(a.data.size());
    }
  }
  return params;
}

Sequential buildModel(const ModelSpec& spec, const std::string& path) {
  try {
    return Sequential(spec);
  } catch (const UserError& e) {
    refuse(path, std::string("does not build in Mirrorlab (") + e.what() + ")",
           "Keras and Mirrorlab differ there: change that layer in Keras, save and import again");
  }
}

void guessData(Project& p, const Sequential& model, std::vector<std::string>& notes) {
  const int64_t n = numel(p.model.inputShape);
  if (n == 28 * 28) {
    p.data.kind = DataKind::FashionMnist;
    p.data.path = "/usr/share/datasets/fashion-mnist";
    notes.push_back("28x28 inputs: the project's data is Fashion-MNIST (pixels / 255); change \"data\" for another data set");
    return;
  }
  p.data.kind = DataKind::Blobs;
  p.data.features = static_cast<int>(n);
  if (model.outFeatures() > 1) p.data.classes = static_cast<int>(model.outFeatures());
  notes.push_back("the project trains on synthetic blobs until you set its \"data\" to your data set");
}

// The Sequential's layers in order, each with its place in messages and the group its weights
// sit in (Keras numbers the groups per class: dense, dense_1...).
struct ImportedLayers {
  std::vector<ImportedLayer> layers;
  std::vector<KerasLayerPlace> places;
  std::vector<std::string> groups;
  std::string policy;  // the mixed-precision policy, "" for float32
  bool inputLayer = false;
};

ImportedLayers readLayers(const Json& layers, const std::string& path, ModelSpec& model) {
  ImportedLayers out;
  std::map<std::string, int> used;
  for (size_t i = 0; i < layers.size(); ++i) {
    const Json& l = layers[i];
    const std::string cls = l.is_object() ? l.value("class_name", std::string()) : "";
    const Json cfg = l.is_object() && l.contains("config") && l["config"].is_object() ? l["config"] : Json::object();
    if (cls == "InputLayer" && i == 0) {
      model.inputShape = inputShape(cfg.contains("batch_shape") ? cfg["batch_shape"] : cfg.value("batch_input_shape", Json()),
                                    path, "its InputLayer");
      if (cfg.value("sparse", false) || cfg.value("ragged", false) || cfg.value("dtype", std::string("float32")) != "float32")
        refuse(path, "takes sparse, ragged or non-float32 inputs", "Mirrorlab's inputs are dense float32 tensors");
      out.inputLayer = true;
      continue;
    }
    out.places.push_back(KerasLayerPlace{path, out.layers.size() + 1, cfg.value("name", std::string("?")), cls});
    out.layers.push_back(importLayer(l, out.places.back(), out.policy));
    const std::string& group = out.layers.back().weightsGroup;
    const int k = used[group]++;
    out.groups.push_back(k == 0 ? group : group + "_" + std::to_string(k));
    model.layers.push_back(out.layers.back().spec);
  }
  if (out.layers.empty()) refuse(path, "holds no layers", "add layers to the model in Keras and save it again");
  return out;
}

// config.json's top level: a Sequential model, or a refusal naming what it is.
const Json& sequentialConfig(const Json& root, const std::string& path) {
  const std::string cls = root.is_object() ? root.value("class_name", std::string()) : std::string();
  if (cls == "Functional" || cls == "Model")
    refuse(path, "holds a Functional model (keras.Model(inputs, outputs)), not a Sequential one",
           "Mirrorlab imports keras.Sequential models: rebuild it as keras.Sequential([...]) with the same layers, copy "
           "the weights (set_weights), save that and import it");
  if (cls != "Sequential" || !root.contains("config") || !root["config"].is_object())
    refuse(path,
           "holds a " + (cls.empty() ? std::string("model of no known class") : "'" + cls + "' model") +
               ", not a keras.Sequential model",
           "Mirrorlab imports keras.Sequential models: rebuild it as one, save and import that");
  return root["config"];
}

}  // namespace

KerasImport importKeras(const std::string& path) {
  auto entries = archiveEntries(path);
  KerasImport out;
  out.kerasVersion = checkVersion(parseJson(entries["metadata.json"], path, "metadata.json"), path, out.notes);
  const Json root = parseJson(entries["config.json"], path, "config.json");
  const Json& cfg = sequentialConfig(root, path);
  Project& p = out.project;
  p.name = cfg.value("name", fs::path(path).stem().string());
  p.description = "Imported from " + fs::path(path).filename().string() + " (Keras " + out.kerasVersion + ").";
  const ImportedLayers layers = readLayers(cfg.value("layers", Json::array()), path, p.model);
  if (!layers.inputLayer)
    p.model.inputShape =
        inputShape(cfg.value("build_input_shape", root.value("build_config", Json::object()).value("input_shape", Json())), path,
                   "its configuration (the model was never built)");
  if (!layers.policy.empty()) p.training.precision = parsePrecision(layers.policy).value_or(Precision::Float32);  // checked
  training(root.value("compile_config", Json()), path, p.training, out.notes);
  Sequential model = buildModel(p.model, path);
  for (size_t i = 0; i < layers.layers.size(); ++i) checkAxis(layers.layers[i], model.layer(i), layers.places[i]);
  guessData(p, model, out.notes);
  out.params = copyWeights(model, layers.layers, layers.groups, entries["model.weights.h5"], path);
  validate(p, "the project imported from '" + path + "'");
  return out;
}

ImportResult runImport(const ImportRequest& r) {
  ImportResult res;
  const fs::path model(r.model);
  const fs::path beside = model.parent_path() / model.stem();
  res.projectPath = r.project.empty() ? beside.string() + ".json" : r.project;
  res.weightsPath = r.weights.empty() ? beside.string() + ".mlw" : r.weights;
  std::error_code ec;
  if (fs::equivalent(res.projectPath, res.weightsPath, ec) || res.projectPath == res.weightsPath || res.projectPath == r.model ||
      res.weightsPath == r.model)
    throw UserError("import: the project, the weights and the Keras model need three different files (got '" + res.projectPath +
                    "' and '" + res.weightsPath + "'); nothing was written");
  checkCanWrite(res.projectPath, "project file");  // before any reading: a typo costs nothing
  checkCanWrite(res.weightsPath, "weights file");
  res.imported = importKeras(r.model);
  Sequential built(res.imported.project.model);
  std::copy(res.imported.params.begin(), res.imported.params.end(), built.params().begin());
  // The weights go to a temporary name first: when the project cannot be written, an older
  // weights file under the real name is left as it was.
  const std::string pending = res.weightsPath + ".importing";
  const bool npz = res.weightsPath.size() > 4 && res.weightsPath.compare(res.weightsPath.size() - 4, 4, ".npz") == 0;
  if (npz)
    saveWeightsNpz(built, pending);
  else
    saveWeights(built, pending);
  try {
    res.imported.project.save(res.projectPath);
    fs::rename(pending, res.weightsPath);
  } catch (const fs::filesystem_error& e) {
    fs::remove(pending, ec);
    throw UserError("cannot write the weights file '" + res.weightsPath + "': " + e.code().message());
  } catch (...) {
    fs::remove(pending, ec);
    throw;
  }
  return res;
}

}  // namespace ml
