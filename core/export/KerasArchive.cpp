// The Keras 3 model archive (.keras) that keras.saving.load_model opens: a zip (stored, as Keras
// writes it) of metadata.json, config.json (the Sequential model's configuration, written as
// Keras' get_config writes it, with the project's loss, metric and optimizer as compile_config)
// and model.weights.h5 (the layout of KerasExport.cpp). Layers keep their Mirrorlab names; the
// model is float32 (a mixed policy is a training setting, and inference in float32 is the
// reference every check compares with).
#include <ctime>

#include <nlohmann/json.hpp>

#include "Error.h"
#include "export/ExportWriters.h"
#include "export/ZipFile.h"

namespace ml {

namespace {

using Json = nlohmann::ordered_json;

// The version whose layout this writes and whose load_model was run on the result.
constexpr const char* kKerasVersion = "3.15.1";

Json policy() {
  return {{"module", "keras"}, {"class_name", "DTypePolicy"}, {"config", {{"name", "float32"}}}, {"registered_name", nullptr}};
}

Json initializer(const std::string& name) {
  static const std::pair<const char*, const char*> kClasses[] = {{"glorot_uniform", "GlorotUniform"},
                                                                 {"glorot_normal", "GlorotNormal"},
                                                                 {"he_uniform", "HeUniform"},
                                                                 {"he_normal", "HeNormal"},
                                                                 {"random_normal", "RandomNormal"},
                                                                 {"random_uniform", "RandomUniform"},
                                                                 {"zeros", "Zeros"},
                                                                 {"ones", "Ones"}};
  Json config = Json::object();
  if (name == "random_normal") config = {{"mean", 0.0}, {"stddev", 0.05}};  // Mirrorlab's (Keras' defaults)
  if (name == "random_uniform") config = {{"minval", -0.05}, {"maxval", 0.05}};
  if (name != "zeros" && name != "ones") config["seed"] = nullptr;
  for (const auto& [ours, keras] : kClasses)
    if (name == ours)
      return {{"module", "keras.initializers"}, {"class_name", keras}, {"config", config}, {"registered_name", nullptr}};
  throw std::logic_error("no Keras class for initializer " + name);
}

Json batchShape(const Shape& s) {
  Json j = Json::array({nullptr});
  for (int64_t d : s) j.push_back(d);
  return j;
}

// An argument's value as Keras' config writes it.
Json kerasJson(int64_t v) { return v; }
Json kerasJson(double v) { return v; }
Json kerasJson(bool v) { return v; }
Json kerasJson(Act a) { return toString(a); }
Json kerasJson(Padding p) { return toString(p); }
Json kerasJson(const Initializer& i) { return initializer(i.name); }
Json kerasJson(const Pair& p) { return {p.rows, p.cols}; }
Json kerasJson(const std::optional<Pair>& p) { return p ? kerasJson(*p) : Json(nullptr); }
Json kerasJson(const Shape& s) { return s; }
Json kerasJson(std::nullptr_t) { return nullptr; }
Json kerasJson(const std::string& s) { return s; }
Json kerasJson(const KerasValue& v) {
  return std::visit([](const auto& x) { return kerasJson(x); }, v);
}

// The layer's class and config: its kind's hook, or the class with its arguments and the keys
// Keras writes that Mirrorlab does not vary. Also names the weights' group (KerasExport.cpp).
std::string kerasClass(const ExportLayer& l, Json* config) {
  const KerasForm& k = l.kind->keras;
  std::string cls(k.cls);
  if (k.write) {
    std::vector<KerasEntry> entries;
    k.write(*l.layer, cls, entries);
    if (config)
      for (const auto& e : entries) (*config)[e.key] = kerasJson(e.value);
    return cls;
  }
  if (config) {
    forEachArg(l.layer->args(), [&](const char* key, const auto& v, Need) { (*config)[key] = kerasJson(v); });
    for (const auto& e : k.fixed) (*config)[e.key] = kerasJson(e.value);
  }
  return cls;
}

Json layerConfig(const ExportLayer& l) {
  Json c = {{"name", l.name}, {"trainable", true}, {"dtype", policy()}};
  const std::string cls = kerasClass(l, &c);
  Json j = {{"module", "keras.layers"}, {"class_name", cls}, {"config", c}, {"registered_name", nullptr}};
  // Keras writes a build_config for the layers that create weights in build().
  if (!l.weights.empty()) j["build_config"] = {{"input_shape", batchShape(l.layer->inputShape)}};
  return j;
}

Json optimizerConfig(const OptimizerSpec& o) {
  Json c = {{"name", toString(o.kind)}, {"learning_rate", o.learningRate}};
  std::string cls = "Adam";
  if (o.kind == OptimizerKind::Sgd) {
    cls = "SGD";
    c["momentum"] = o.momentum;
    c["nesterov"] = o.nesterov;
  } else if (o.kind == OptimizerKind::RmsProp) {
    cls = "RMSprop";
    c["rho"] = o.rho;
    c["momentum"] = o.momentum;
    c["epsilon"] = o.epsilon;
    c["centered"] = false;
  } else {
    c["beta_1"] = o.beta1;
    c["beta_2"] = o.beta2;
    c["epsilon"] = o.epsilon;
    c["amsgrad"] = false;
  }
  return {{"module", "keras.optimizers"}, {"class_name", cls}, {"config", c}, {"registered_name", nullptr}};
}

Json lossConfig(const TrainingSpec& t) {
  if (!t.fromLogits) return toString(t.loss);
  const std::string cls = t.loss == LossKind::SparseCategoricalCrossentropy ? "SparseCategoricalCrossentropy"
                          : t.loss == LossKind::CategoricalCrossentropy     ? "CategoricalCrossentropy"
                                                                            : "BinaryCrossentropy";
  return {{"module", "keras.losses"},
          {"class_name", cls},
          {"config", {{"name", toString(t.loss)}, {"reduction", "sum_over_batch_size"}, {"from_logits", true}}},
          {"registered_name", nullptr}};
}

Json compileConfig(const TrainingSpec& t) {
  Json metrics = Json::array();
  for (const auto& m : t.metrics) metrics.push_back(m == "acc" ? "accuracy" : m);
  return {{"optimizer", optimizerConfig(t.optimizer)},
          {"loss", lossConfig(t)},
          {"loss_weights", nullptr},
          {"metrics", metrics},
          {"weighted_metrics", nullptr},
          {"run_eagerly", false},
          {"steps_per_execution", 1},
          {"jit_compile", false}};
}

// Keras refuses a "/" in a name; the project's name becomes the model's in snake case.
std::string modelName(const std::string& project) {
  std::string s;
  for (char c : project) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) != 0;
    if (ok)
      s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (!s.empty() && s.back() != '_')
      s += '_';
  }
  while (!s.empty() && s.back() == '_') s.pop_back();
  return s.empty() ? "sequential" : s;
}

std::string configJson(const std::vector<ExportLayer>& layers, const Shape& input, const ExportInfo& info) {
  std::string inputName = "input_layer";
  for (const auto& l : layers)
    if (l.name == inputName) inputName += "_0";
  Json list = Json::array();
  list.push_back({{"module", "keras.layers"},
                  {"class_name", "InputLayer"},
                  {"config",
                   {{"batch_shape", batchShape(input)},
                    {"dtype", "float32"},
                    {"sparse", false},
                    {"ragged", false},
                    {"name", inputName},
                    {"optional", false}}},
                  {"registered_name", nullptr}});
  for (const auto& l : layers) {
    if (l.name.find('/') != std::string::npos)
      throw UserError("layer '" + l.name + "' cannot be exported to Keras: Keras refuses a '/' in a layer's name; rename it");
    list.push_back(layerConfig(l));
  }
  Json model = {{"module", "keras"},
                {"class_name", "Sequential"},
                {"config",
                 {{"name", modelName(info.projectName)},
                  {"trainable", true},
                  {"dtype", policy()},
                  {"layers", list},
                  {"build_input_shape", batchShape(input)}}},
                {"registered_name", nullptr},
                {"build_config", {{"input_shape", batchShape(input)}}},
                {"compile_config", info.training ? compileConfig(*info.training) : Json(nullptr)}};
  return model.dump();
}

}  // namespace

std::string kerasClassOf(const ExportLayer& l) { return kerasClass(l, nullptr); }

std::string kerasArchiveBytes(const std::vector<ExportLayer>& layers, const Shape& input, const ExportInfo& info,
                              const std::string& file) {
  // First: a build without HDF5 says so before anything else.
  std::string weights = kerasWeightsBytes(layers, file, info.training ? &info.training->optimizer : nullptr);
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d@%H:%M:%S", &tm);
  // Keras reads neither key back; the "mirrorlab" entry says where the file came from.
  Json from = {{"version", info.version}, {"project", info.projectName}};
  if (info.runId) from["run_id"] = *info.runId;
  if (!info.weightsFile.empty()) from["weights_file"] = info.weightsFile;
  if (!info.inputNote.empty()) from["input"] = info.inputNote;
  const Json metadata = {{"keras_version", kKerasVersion}, {"date_saved", date}, {"mirrorlab", from}};
  return zipBytes({{"metadata.json", metadata.dump()},
                   {"config.json", configJson(layers, input, info)},
                   {"model.weights.h5", std::move(weights)}},
                  ZipCompression::Stored, "Keras model '" + file + "'");
}

}  // namespace ml
