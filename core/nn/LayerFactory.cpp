#include "nn/LayerFactory.h"

#include <cmath>

#include "Error.h"
#include "JsonFile.h"
#include "nn/Dense.h"
#include "nn/Initializers.h"
#include "random/Rng.h"
#include "nn/SimpleLayers.h"

namespace ml {

const std::vector<LayerKind>& layerKinds() {
  static const std::vector<LayerKind> kinds = {
      {"Dense",
       {{"units", 64}, {"activation", "relu"}, {"use_bias", true}, {"kernel_initializer", "glorot_uniform"},
        {"bias_initializer", "zeros"}},
       "Fully connected: y = activation(x W + b)"},
      {"Activation", {{"activation", "relu"}}, "Applies an activation function"},
      {"Flatten", nlohmann::json::object(), "Flattens each sample to a vector"},
      {"Dropout", {{"rate", 0.5}}, "Randomly zeroes a share of units while training"},
  };
  return kinds;
}

static void checkArgs(const LayerSpec& s, const std::string& where, const nlohmann::json& allowed) {
  if (s.args.is_null()) return;
  if (!s.args.is_object()) throw UserError(where + ": arguments must be a JSON object");
  for (auto it = s.args.begin(); it != s.args.end(); ++it) {
    if (!allowed.contains(it.key())) {
      std::string names;
      for (auto a = allowed.begin(); a != allowed.end(); ++a) names += (names.empty() ? "" : ", ") + a.key();
      throw UserError(where + ": unknown argument '" + it.key() + "' (allowed: " + (names.empty() ? "none" : names) + ")");
    }
  }
}

template <typename T>
static T arg(const LayerSpec& s, const std::string& where, const char* key, const nlohmann::json& defaults) {
  const nlohmann::json& v = s.args.contains(key) ? s.args.at(key) : defaults.at(key);
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    // 2.7 units is not silently 2, and 1e300 is not -9223372036854775808.
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (d != std::floor(d)) throw UserError(where + ": argument '" + key + "' must be a whole number, got " + shortDump(v));
      if (!(d >= -0x1p62 && d <= 0x1p62)) throw UserError(where + ": argument '" + key + "' is out of range, got " + shortDump(v));
      return static_cast<T>(d);
    }
  }
  try {
    return v.get<T>();
  } catch (const nlohmann::json::exception&) {
    throw UserError(where + ": argument '" + key + "' has the wrong type (" + shortDump(v) + ")");
  }
}

std::unique_ptr<Layer> makeLayer(const LayerSpec& s, size_t index) {
  const std::string where = "layer " + std::to_string(index + 1) + " '" + s.name + "' (" + s.type + ")";
  const LayerKind* kind = nullptr;
  for (const auto& k : layerKinds())
    if (k.type == s.type) kind = &k;
  if (!kind) throw UserError(where + ": unknown layer type '" + s.type + "' (allowed: Dense, Activation, Flatten, Dropout)");
  checkArgs(s, where, kind->defaults);
  std::unique_ptr<Layer> layer;
  const auto& d = kind->defaults;
  if (s.type == "Dense") {
    if (!s.args.contains("units")) throw UserError(where + ": argument 'units' is required (a positive integer)");
    const auto units = arg<int64_t>(s, where, "units", d);
    if (units <= 0) throw UserError(where + ": units must be a positive integer, got " + std::to_string(units));
    const auto kinit = arg<std::string>(s, where, "kernel_initializer", d);
    const auto binit = arg<std::string>(s, where, "bias_initializer", d);
    validateInitializer(kinit, where);
    validateInitializer(binit, where);
    const std::string act = s.args.contains("activation") ? arg<std::string>(s, where, "activation", d) : "linear";
    layer = std::make_unique<Dense>(units, parseActivation(act, where), arg<bool>(s, where, "use_bias", d), kinit, binit);
  } else if (s.type == "Activation") {
    if (!s.args.contains("activation")) throw UserError(where + ": argument 'activation' is required");
    layer = std::make_unique<ActivationLayer>(parseActivation(arg<std::string>(s, where, "activation", d), where));
  } else if (s.type == "Flatten") {
    layer = std::make_unique<Flatten>();
  } else if (s.type == "Dropout") {
    const auto rate = arg<double>(s, where, "rate", d);
    if (!(rate >= 0.0 && rate < 1.0)) throw UserError(where + ": rate must be in [0, 1), got " + std::to_string(rate));
    layer = std::make_unique<Dropout>(rate, splitmix64(0xD409u + index));
  }
  layer->name = s.name;
  return layer;
}

}  // namespace ml
