#include "nn/LayerFactory.h"

#include <cctype>
#include <cmath>

#include "Error.h"
#include "FieldNames.h"
#include "JsonFile.h"
#include "nn/BatchNorm.h"
#include "nn/Conv2D.h"
#include "nn/Dense.h"
#include "nn/Initializers.h"
#include "nn/Pooling.h"
#include "nn/SimpleLayers.h"
#include "random/Rng.h"

namespace ml {

const std::vector<LayerKind>& layerKinds() {
  static const std::vector<LayerKind> kinds = {
      {"Dense",
       {{"units", 64},
        {"activation", "relu"},
        {"use_bias", true},
        {"kernel_initializer", "glorot_uniform"},
        {"bias_initializer", "zeros"}},
       "Fully connected: y = activation(x W + b)"},
      {"Activation", {{"activation", "relu"}}, "Applies an activation function"},
      {"Flatten", nlohmann::json::object(), "Flattens each sample to a vector"},
      {"Dropout", {{"rate", 0.5}}, "Randomly zeroes a share of units while training"},
      {"Conv2D",
       {{"filters", 32},
        {"kernel_size", 3},
        {"strides", 1},
        {"padding", "valid"},
        {"activation", "relu"},
        {"use_bias", true},
        {"kernel_initializer", "glorot_uniform"},
        {"bias_initializer", "zeros"}},
       "2-D convolution over (height, width, channels) images"},
      {"MaxPooling2D", {{"pool_size", 2}, {"strides", nullptr}, {"padding", "valid"}}, "Keeps the largest value of each window"},
      {"AveragePooling2D", {{"pool_size", 2}, {"strides", nullptr}, {"padding", "valid"}}, "Averages each window"},
      {"GlobalAveragePooling2D", nlohmann::json::object(), "Averages each channel over the whole image: (h, w, c) -> (c)"},
      {"BatchNormalization",
       {{"momentum", 0.99}, {"epsilon", 0.001}, {"center", true}, {"scale", true}, {"synchronized", false}},
       "Normalises each channel with the batch's mean and variance (moving averages at evaluation)"},
      {"Reshape", {{"target_shape", {28, 28, 1}}}, "Gives each sample another shape with the same number of values"},
  };
  return kinds;
}

std::string kerasLayerName(const std::string& type) {
  std::string s;
  auto lower = [](char c) { return std::islower(static_cast<unsigned char>(c)) != 0; };
  auto upper = [](char c) { return std::isupper(static_cast<unsigned char>(c)) != 0; };
  for (size_t i = 0; i < type.size(); ++i) {
    const char c = type[i];
    // An underscore before a capital that starts a lowercase word or follows a lowercase letter.
    const bool word = i > 0 && upper(c) && i + 1 < type.size() && lower(type[i + 1]);
    if (i > 0 && upper(c) && (word || lower(type[i - 1])) && s.back() != '_') s += '_';
    s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return s;
}

namespace {

// The layer and its arguments as the Model screen shows them (its position, name and type; the
// layer panel's label of an argument), then the key in the file (FieldNames.h).
struct Where {
  size_t index;
  const LayerSpec& spec;
  std::string layer() const { return layerInWords(index, spec.name, spec.type); }
  std::string arg(const std::string& key) const { return layerArgInWords(index, spec.name, spec.type, key); }
};

}  // namespace

static void checkArgs(const LayerSpec& s, const Where& where, const nlohmann::json& allowed) {
  if (s.args.is_null()) return;
  if (!s.args.is_object()) throw UserError(where.layer() + ": its arguments must be a JSON object");
  for (auto it = s.args.begin(); it != s.args.end(); ++it) {
    if (!allowed.contains(it.key())) {
      std::string names;
      for (auto a = allowed.begin(); a != allowed.end(); ++a) names += (names.empty() ? "" : ", ") + a.key();
      throw UserError(where.layer() + ": unknown argument '" + it.key() + "' (allowed: " + (names.empty() ? "none" : names) +
                      ")");
    }
  }
}

template <typename T>
static T arg(const LayerSpec& s, const Where& where, const char* key, const nlohmann::json& defaults) {
  const nlohmann::json& v = s.args.contains(key) ? s.args.at(key) : defaults.at(key);
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    // 2.7 units is not silently 2, and 1e300 is not -9223372036854775808.
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (d != std::floor(d)) throw UserError(where.arg(key) + " must be a whole number, got " + shortDump(v));
      if (!(d >= -0x1p62 && d <= 0x1p62)) throw UserError(where.arg(key) + " is out of range, got " + shortDump(v));
      return static_cast<T>(d);
    }
  }
  try {
    return v.get<T>();
  } catch (const nlohmann::json::exception&) {
    throw UserError(where.arg(key) + " has the wrong type (" + shortDump(v) + ")");
  }
}

static std::string allowedTypes() {
  std::string names;
  for (const auto& k : layerKinds()) names += (names.empty() ? "" : ", ") + k.type;
  return names;
}

// Keras' int-or-pair arguments (kernel_size, strides, pool_size): 3 means (3, 3).
static std::pair<int64_t, int64_t> pairArg(const LayerSpec& s, const Where& where, const char* key, const nlohmann::json& v) {
  auto one = [&](const nlohmann::json& e) -> int64_t {
    if (!e.is_number() || e.get<double>() != std::floor(e.get<double>()) || e.get<double>() < 1 || e.get<double>() > 1e6)
      throw UserError(where.arg(key) + " must be a positive whole number or a pair of them, got " + shortDump(v));
    return static_cast<int64_t>(e.get<double>());
  };
  (void)s;
  if (v.is_array()) {
    if (v.size() != 2) throw UserError(where.arg(key) + " must be one number or a pair [rows, columns], got " + shortDump(v));
    return {one(v[0]), one(v[1])};
  }
  const int64_t k = one(v);
  return {k, k};
}

static bool paddingArg(const LayerSpec& s, const Where& where, const nlohmann::json& d) {
  const auto p = arg<std::string>(s, where, "padding", d);
  if (p != "valid" && p != "same") throw UserError(where.arg("padding") + " must be \"valid\" or \"same\", got \"" + p + "\"");
  return p == "same";
}

static Window windowArgs(const LayerSpec& s, const Where& where, const nlohmann::json& d, const char* sizeKey) {
  Window w;
  const nlohmann::json& size = s.args.contains(sizeKey) ? s.args.at(sizeKey) : d.at(sizeKey);
  std::tie(w.kh, w.kw) = pairArg(s, where, sizeKey, size);
  const nlohmann::json& st = s.args.contains("strides") ? s.args.at("strides") : d.at("strides");
  if (st.is_null())
    std::tie(w.sh, w.sw) = std::pair{w.kh, w.kw};  // pooling: strides default to pool_size
  else
    std::tie(w.sh, w.sw) = pairArg(s, where, "strides", st);
  w.same = paddingArg(s, where, d);
  return w;
}

static std::unique_ptr<Layer> makeSpatialLayer(const LayerSpec& s, const Where& where, const nlohmann::json& d) {
  if (s.type == "Conv2D") {
    for (const char* key : {"filters", "kernel_size"})
      if (!s.args.contains(key)) throw UserError(where.arg(key) + " is required (e.g. Conv2D(32, 3))");
    const auto filters = arg<int64_t>(s, where, "filters", d);
    if (filters <= 0) throw UserError(where.arg("filters") + " must be a positive integer, got " + std::to_string(filters));
    const Window w = windowArgs(s, where, d, "kernel_size");
    const auto kinit = arg<std::string>(s, where, "kernel_initializer", d);
    const auto binit = arg<std::string>(s, where, "bias_initializer", d);
    validateInitializer(kinit, where.arg("kernel_initializer"));
    validateInitializer(binit, where.arg("bias_initializer"));
    const std::string act = s.args.contains("activation") ? arg<std::string>(s, where, "activation", d) : "linear";
    return std::make_unique<Conv2D>(filters, w, parseActivation(act, where.arg("activation")), arg<bool>(s, where, "use_bias", d),
                                    kinit, binit);
  }
  if (s.type == "MaxPooling2D" || s.type == "AveragePooling2D")
    return std::make_unique<Pool2D>(s.type == "MaxPooling2D", windowArgs(s, where, d, "pool_size"));
  if (s.type == "GlobalAveragePooling2D") return std::make_unique<GlobalAveragePooling2D>();
  if (s.type == "BatchNormalization") {
    const auto momentum = arg<double>(s, where, "momentum", d), epsilon = arg<double>(s, where, "epsilon", d);
    if (!(momentum >= 0.0 && momentum <= 1.0))
      throw UserError(where.arg("momentum") + " must be in [0, 1], got " + shortDump(momentum));
    if (!(epsilon > 0.0 && epsilon < 1.0))
      throw UserError(where.arg("epsilon") + " must be in (0, 1), got " + shortDump(epsilon));
    return std::make_unique<BatchNorm>(momentum, epsilon, arg<bool>(s, where, "center", d), arg<bool>(s, where, "scale", d),
                                       arg<bool>(s, where, "synchronized", d));
  }
  if (s.type == "Reshape") {
    if (!s.args.contains("target_shape")) throw UserError(where.arg("target_shape") + " is required, e.g. [28, 28, 1]");
    const auto& t = s.args.at("target_shape");
    Shape target;
    if (t.is_array()) {
      for (const auto& e : t) {
        if (!e.is_number_integer())
          throw UserError(where.arg("target_shape") + " must be a list of whole numbers, got " + shortDump(t));
        target.push_back(e.get<int64_t>());
      }
    }
    if (!t.is_array() || target.empty())
      throw UserError(where.arg("target_shape") + " must be a list of whole numbers, e.g. [28, 28, 1], got " + shortDump(t));
    return std::make_unique<Reshape>(target);
  }
  return nullptr;
}

std::unique_ptr<Layer> makeLayer(const LayerSpec& s, size_t index) {
  const Where where{index, s};
  const LayerKind* kind = nullptr;
  for (const auto& k : layerKinds())
    if (k.type == s.type) kind = &k;
  if (!kind) throw UserError(where.layer() + ": unknown layer type '" + s.type + "' (allowed: " + allowedTypes() + ")");
  checkArgs(s, where, kind->defaults);
  std::unique_ptr<Layer> layer;
  const auto& d = kind->defaults;
  if (s.type == "Dense") {
    if (!s.args.contains("units")) throw UserError(where.arg("units") + " is required (a positive integer)");
    const auto units = arg<int64_t>(s, where, "units", d);
    if (units <= 0) throw UserError(where.arg("units") + " must be a positive integer, got " + std::to_string(units));
    const auto kinit = arg<std::string>(s, where, "kernel_initializer", d);
    const auto binit = arg<std::string>(s, where, "bias_initializer", d);
    validateInitializer(kinit, where.arg("kernel_initializer"));
    validateInitializer(binit, where.arg("bias_initializer"));
    const std::string act = s.args.contains("activation") ? arg<std::string>(s, where, "activation", d) : "linear";
    layer = std::make_unique<Dense>(units, parseActivation(act, where.arg("activation")), arg<bool>(s, where, "use_bias", d),
                                    kinit, binit);
  } else if (s.type == "Activation") {
    if (!s.args.contains("activation")) throw UserError(where.arg("activation") + " is required");
    layer =
        std::make_unique<ActivationLayer>(parseActivation(arg<std::string>(s, where, "activation", d), where.arg("activation")));
  } else if (s.type == "Flatten") {
    layer = std::make_unique<Flatten>();
  } else if (s.type == "Dropout") {
    const auto rate = arg<double>(s, where, "rate", d);
    if (!(rate >= 0.0 && rate < 1.0)) throw UserError(where.arg("rate") + " must be in [0, 1), got " + std::to_string(rate));
    layer = std::make_unique<Dropout>(rate, splitmix64(0xD409u + index));
  } else {
    layer = makeSpatialLayer(s, where, d);
  }
  layer->name = s.name;
  return layer;
}

}  // namespace ml
