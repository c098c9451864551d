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

Json pair(const Window& w, bool size) { return size ? Json{w.kh, w.kw} : Json{w.sh, w.sw}; }

Json batchShape(const Shape& s) {
  Json j = Json::array({nullptr});
  for (int64_t d : s) j.push_back(d);
  return j;
}

// Dense's and Conv2D's arguments, in the order Keras writes them.
void weightedArgs(const ExportLayer& l, Json& c) {
  const auto arg = [&](const char* key, const char* fallback) { return l.args.value(key, std::string(fallback)); };
  if (l.kind == ExportLayer::Kind::Dense) {
    c["units"] = l.out;
  } else {
    c["filters"] = l.out;
    c["kernel_size"] = pair(l.window, true);
    c["strides"] = pair(l.window, false);
    c["padding"] = l.window.same ? "same" : "valid";
    c["data_format"] = "channels_last";
    c["dilation_rate"] = {1, 1};
    c["groups"] = 1;
  }
  c["activation"] = toString(l.activation);
  c["use_bias"] = l.bias != nullptr;
  c["kernel_initializer"] = initializer(arg("kernel_initializer", "glorot_uniform"));
  c["bias_initializer"] = initializer(arg("bias_initializer", "zeros"));
  for (const char* k : {"kernel_regularizer", "bias_regularizer", "kernel_constraint", "bias_constraint"}) c[k] = nullptr;
}

void batchNormArgs(const ExportLayer& l, Json& c) {
  c["axis"] = -1;  // Mirrorlab normalises the last axis of any sample, as Keras' default does
  c["momentum"] = l.args.value("momentum", 0.99);
  c["epsilon"] = l.epsilon;
  c["center"] = l.beta != nullptr;
  c["scale"] = l.gamma != nullptr;
  c["beta_initializer"] = initializer("zeros");
  c["gamma_initializer"] = initializer("ones");
  c["moving_mean_initializer"] = initializer("zeros");
  c["moving_variance_initializer"] = initializer("ones");
  c["synchronized"] = l.args.value("synchronized", false);
}

// The layer's own arguments, after name, trainable and dtype, in the order Keras writes them.
void layerArgs(const ExportLayer& l, Json& c, std::string& cls) {
  switch (l.kind) {
    case ExportLayer::Kind::Dense:
    case ExportLayer::Kind::Conv2D: weightedArgs(l, c); return;
    case ExportLayer::Kind::BatchNormalization: batchNormArgs(l, c); return;
    case ExportLayer::Kind::MaxPooling2D:
    case ExportLayer::Kind::AveragePooling2D:
      c["pool_size"] = pair(l.window, true);
      c["padding"] = l.window.same ? "same" : "valid";
      c["strides"] = pair(l.window, false);
      c["data_format"] = "channels_last";
      return;
    case ExportLayer::Kind::GlobalAveragePooling2D:
      c["data_format"] = "channels_last";
      c["keepdims"] = false;
      return;
    case ExportLayer::Kind::Dropout:
      c["rate"] = l.args.value("rate", 0.5);
      c["seed"] = nullptr;
      c["noise_shape"] = nullptr;
      return;
    case ExportLayer::Kind::Reshape: c["target_shape"] = l.args.value("target_shape", Json(l.outputShape)); return;
    case ExportLayer::Kind::Flatten: c["data_format"] = "channels_last"; return;
    case ExportLayer::Kind::Activation:
      if (l.activation == Act::Softmax && l.outputShape.size() > 1) {
        // Mirrorlab's softmax spans the whole sample; Keras' Activation only the last axis.
        cls = "Softmax";
        Json axes = Json::array();
        for (size_t a = 1; a <= l.outputShape.size(); ++a) axes.push_back(a);
        c["axis"] = axes;
      } else {
        c["activation"] = toString(l.activation);
      }
      return;
  }
}

const char* kerasClass(ExportLayer::Kind k) {
  switch (k) {
    case ExportLayer::Kind::Dense: return "Dense";
    case ExportLayer::Kind::Activation: return "Activation";
    case ExportLayer::Kind::Flatten: return "Flatten";
    case ExportLayer::Kind::Dropout: return "Dropout";
    case ExportLayer::Kind::Conv2D: return "Conv2D";
    case ExportLayer::Kind::MaxPooling2D: return "MaxPooling2D";
    case ExportLayer::Kind::AveragePooling2D: return "AveragePooling2D";
    case ExportLayer::Kind::GlobalAveragePooling2D: return "GlobalAveragePooling2D";
    case ExportLayer::Kind::BatchNormalization: return "BatchNormalization";
    case ExportLayer::Kind::Reshape: return "Reshape";
  }
  return "Layer";
}

Json layerConfig(const ExportLayer& l) {
  std::string cls = kerasClass(l.kind);
  Json c = {{"name", l.name}, {"trainable", true}, {"dtype", policy()}};
  layerArgs(l, c, cls);
  Json j = {{"module", "keras.layers"}, {"class_name", cls}, {"config", c}, {"registered_name", nullptr}};
  // Keras writes a build_config for the layers that create weights in build().
  if (l.kind == ExportLayer::Kind::Dense || l.kind == ExportLayer::Kind::Conv2D ||
      l.kind == ExportLayer::Kind::BatchNormalization)
    j["build_config"] = {{"input_shape", batchShape(l.inputShape)}};
  return j;
}

Json optimizerConfig(const OptimizerSpec& o) {
  Json c = {{"name", o.name}, {"learning_rate", o.learningRate}};
  std::string cls = "Adam";
  if (o.name == "sgd") {
    cls = "SGD";
    c["momentum"] = o.momentum;
    c["nesterov"] = o.nesterov;
  } else if (o.name == "rmsprop") {
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
  if (!t.fromLogits) return t.loss == "mse" ? "mean_squared_error" : t.loss;
  const std::string cls = t.loss == "sparse_categorical_crossentropy" ? "SparseCategoricalCrossentropy"
                          : t.loss == "categorical_crossentropy"      ? "CategoricalCrossentropy"
                                                                      : "BinaryCrossentropy";
  return {{"module", "keras.losses"},
          {"class_name", cls},
          {"config", {{"name", t.loss}, {"reduction", "sum_over_batch_size"}, {"from_logits", true}}},
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
