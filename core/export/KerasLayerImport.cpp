// Keras layer configurations as Mirrorlab layer specs. Each class reads the keys Mirrorlab has an
// equivalent for; every other key must hold its neutral value (null, false, the default), so that
// a regularizer, a constraint or a dilation never disappears silently. Keys a later Keras adds
// pass while they are neutral.
#include "export/KerasLayerImport.h"

#include <cmath>
#include <map>
#include <set>

#include "Error.h"
#include "nn/LayerFactory.h"

namespace ml {

using Json = nlohmann::json;

std::string KerasLayerPlace::text() const { return "layer " + std::to_string(position) + " '" + name + "' (" + cls + ")"; }

void KerasLayerPlace::refuse(const std::string& problem, const std::string& fix) const {
  throw UserError("Keras model '" + file + "': " + text() + " " + problem + ": " + fix + "; nothing was written");
}

std::string policyName(const Json& dtype) {
  if (dtype.is_string()) return dtype.get<std::string>();
  if (dtype.is_object() && dtype.contains("config") && dtype["config"].is_object())
    return dtype["config"].value("name", std::string());
  return "";
}

namespace {

const char* const kLayersMirrorlabHas =
    "Mirrorlab has Dense, Conv2D, MaxPooling2D, AveragePooling2D, GlobalAveragePooling2D, BatchNormalization, Dropout, "
    "Flatten, Reshape, Activation (linear, relu, sigmoid, tanh, softmax), Softmax and ReLU";

std::string dump(const Json& v) {
  std::string s = v.dump();
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

// The reader of one layer's config: typed values with the layer named when one is wrong, and the
// keys it read remembered, so that every other key can be checked to be neutral.
class Config {
 public:
  Config(const Json& c, const KerasLayerPlace& p) : c_(c), p_(p) {}
  const KerasLayerPlace& place() const { return p_; }
  bool has(const char* key) const { return c_.contains(key) && !c_[key].is_null(); }
  const Json& raw(const char* key) {
    used_.insert(key);
    static const Json null;
    return c_.contains(key) ? c_[key] : null;
  }
  double number(const char* key, double fallback) {
    const Json& v = raw(key);
    if (v.is_null()) return fallback;
    if (!v.is_number()) wrong(key, v, "a number");
    return v.get<double>();
  }
  int64_t whole(const char* key, int64_t fallback) {
    const double d = number(key, static_cast<double>(fallback));
    if (d != std::floor(d) || std::fabs(d) > 1e12) wrong(key, c_[key], "a whole number");
    return static_cast<int64_t>(d);
  }
  bool flag(const char* key, bool fallback) {
    const Json& v = raw(key);
    if (v.is_null()) return fallback;
    if (!v.is_boolean()) wrong(key, v, "true or false");
    return v.get<bool>();
  }
  std::string text(const char* key, const std::string& fallback) {
    const Json& v = raw(key);
    if (v.is_null()) return fallback;
    if (!v.is_string()) wrong(key, v, "a string");
    return v.get<std::string>();
  }
  // Keras' int-or-pair arguments: 3, [3, 3] or [3, 5].
  Json pair(const char* key, const Json& fallback) {
    Json v = raw(key);
    if (v.is_null()) return fallback;
    if (v.is_number_integer()) v = Json::array({v, v});
    if (!v.is_array() || v.size() != 2 || !v[0].is_number_integer() || !v[1].is_number_integer())
      wrong(key, v, "a whole number or a pair of them");
    return v;
  }
  void require(const char* key, const Json& value, const std::string& fix) {
    const Json& v = raw(key);
    if (!v.is_null() && v != value) p_.refuse("has " + std::string(key) + "=" + dump(v) + ", which Mirrorlab lacks", fix);
  }
  // Every key not read must be absent, null or false (an empty list or object too).
  void restIsNeutral() const {
    static const std::set<std::string> kCommon = {"name", "trainable", "dtype", "seed"};
    for (auto it = c_.begin(); it != c_.end(); ++it) {
      if (used_.count(it.key()) || kCommon.count(it.key())) continue;
      const Json& v = it.value();
      if (v.is_null() || (v.is_boolean() && !v.get<bool>()) || ((v.is_array() || v.is_object()) && v.empty())) continue;
      p_.refuse("sets " + it.key() + "=" + dump(v) + ", which Mirrorlab lacks",
                "remove it from the layer in Keras (or set it to None), save the model again and import that");
    }
  }
  [[noreturn]] void wrong(const char* key, const Json& v, const char* want) const {
    p_.refuse("has " + std::string(key) + "=" + dump(v) + " where Keras writes " + want,
              "the file is damaged or was edited: save the model again with Keras");
  }

 private:
  const Json& c_;
  const KerasLayerPlace& p_;
  std::set<std::string> used_;
};

std::string activation(Config& c, const char* key) {
  const Json& v = c.raw(key);
  if (v.is_null()) return "linear";
  const std::string a = v.is_string() ? v.get<std::string>() : dump(v);
  for (const char* ok : {"linear", "relu", "sigmoid", "tanh", "softmax"})
    if (a == ok) return a;
  c.place().refuse("uses the activation " + a + ", which Mirrorlab lacks",
                   "Mirrorlab has linear, relu, sigmoid, tanh and softmax: use one of them in Keras, retrain, save and import "
                   "that");
}

// Keras' initializer (a name or a serialized object) as Mirrorlab's name. Only training from
// scratch uses it, but a different one would change what the project means.
std::string initializer(Config& c, const char* key, const char* fallback) {
  const Json& v = c.raw(key);
  if (v.is_null()) return fallback;
  std::string cls = v.is_string() ? v.get<std::string>() : v.is_object() ? v.value("class_name", std::string()) : "";
  const Json cfg = v.is_object() && v.contains("config") && v["config"].is_object() ? v["config"] : Json::object();
  const std::string name = kerasLayerName(cls);  // GlorotUniform -> glorot_uniform; names stay as they are
  auto param = [&](const char* k, double want) { return !cfg.contains(k) || cfg[k].is_null() || cfg[k] == want; };
  bool ok = false;
  for (const char* known : {"glorot_uniform", "glorot_normal", "he_uniform", "he_normal", "zeros", "ones"})
    ok = ok || name == known;
  if (name == "random_normal") ok = param("mean", 0.0) && param("stddev", 0.05);
  if (name == "random_uniform") ok = param("minval", -0.05) && param("maxval", 0.05);
  if (ok && name != "zeros" && name != "ones")
    for (auto it = cfg.begin(); it != cfg.end(); ++it)  // seed is Mirrorlab's; axes must be Keras' defaults
      if (it.key() != "seed" && it.key() != "mean" && it.key() != "stddev" && it.key() != "minval" && it.key() != "maxval" &&
          !it.value().is_null())
        ok = false;
  if (!ok)
    c.place().refuse(std::string("uses the ") + key + " " + dump(v) + ", which Mirrorlab lacks",
                     "Mirrorlab has glorot_uniform, glorot_normal, he_uniform, he_normal, zeros, ones, and random_normal "
                     "(stddev 0.05) and random_uniform (-0.05 to 0.05) with Keras' defaults: use one of them in Keras, save "
                     "and import that");
  return name;
}

void channelsLast(Config& c) {
  c.require("data_format", "channels_last", "Mirrorlab's images are channels-last: build the model with channels_last");
}

// Shape of a Reshape's target: whole numbers, one of them possibly -1.
Json targetShape(Config& c) {
  const Json& v = c.raw("target_shape");
  if (!v.is_array() || v.empty()) c.wrong("target_shape", v, "a list of whole numbers");
  for (const auto& d : v)
    if (!d.is_number_integer()) c.wrong("target_shape", v, "a list of whole numbers");
  return v;
}

// One function per Keras class: the spec's type and arguments from the layer's config.
using Mapper = void (*)(Config&, ImportedLayer&);

void dense(Config& c, ImportedLayer& out) {
  Json& a = out.spec.args;
  out.spec.type = "Dense";
  a["units"] = c.whole("units", 0);
  if (a["units"].get<int64_t>() <= 0) c.wrong("units", a["units"], "a positive number");
  a["activation"] = activation(c, "activation");
  a["use_bias"] = c.flag("use_bias", true);
  a["kernel_initializer"] = initializer(c, "kernel_initializer", "glorot_uniform");
  a["bias_initializer"] = initializer(c, "bias_initializer", "zeros");
}

void conv2d(Config& c, ImportedLayer& out) {
  Json& a = out.spec.args;
  out.spec.type = "Conv2D";
  a["filters"] = c.whole("filters", 0);
  a["kernel_size"] = c.pair("kernel_size", nullptr);
  a["strides"] = c.pair("strides", Json::array({1, 1}));
  a["padding"] = c.text("padding", "valid");
  channelsLast(c);
  if (c.pair("dilation_rate", Json::array({1, 1})) != Json::array({1, 1}))
    c.require("dilation_rate", Json::array({1, 1}), "Mirrorlab's convolutions are not dilated: use dilation_rate=1");
  c.require("groups", 1, "Mirrorlab's convolutions have one group: use groups=1");
  a["activation"] = activation(c, "activation");
  a["use_bias"] = c.flag("use_bias", true);
  a["kernel_initializer"] = initializer(c, "kernel_initializer", "glorot_uniform");
  a["bias_initializer"] = initializer(c, "bias_initializer", "zeros");
}

void pooling(Config& c, ImportedLayer& out) {
  Json& a = out.spec.args;
  out.spec.type = c.place().cls;  // MaxPooling2D or AveragePooling2D
  a["pool_size"] = c.pair("pool_size", Json::array({2, 2}));
  a["strides"] = c.pair("strides", a["pool_size"]);
  a["padding"] = c.text("padding", "valid");
  channelsLast(c);
}

void globalAveragePooling(Config& c, ImportedLayer& out) {
  out.spec.type = "GlobalAveragePooling2D";
  channelsLast(c);
  c.require("keepdims", false, "Mirrorlab's GlobalAveragePooling2D gives (channels): use keepdims=False");
}

void batchNormalization(Config& c, ImportedLayer& out) {
  Json& a = out.spec.args;
  out.spec.type = "BatchNormalization";
  out.axis = c.raw("axis").is_null() ? Json(-1) : c.raw("axis");  // checked against the shape later
  a["momentum"] = c.number("momentum", 0.99);
  a["epsilon"] = c.number("epsilon", 0.001);
  a["center"] = c.flag("center", true);
  a["scale"] = c.flag("scale", true);
  a["synchronized"] = c.flag("synchronized", false);
  const std::pair<const char*, const char*> inits[] = {{"beta_initializer", "zeros"},
                                                       {"gamma_initializer", "ones"},
                                                       {"moving_mean_initializer", "zeros"},
                                                       {"moving_variance_initializer", "ones"}};
  for (const auto& [key, want] : inits)
    if (initializer(c, key, want) != want)
      c.place().refuse("sets " + std::string(key) + ", which Mirrorlab lacks", "use Keras' default for it");
  c.raw("renorm_momentum");  // read only when renorm is on, which the neutral check refuses
}

void dropout(Config& c, ImportedLayer& out) {
  out.spec.type = "Dropout";
  out.spec.args["rate"] = c.number("rate", 0.5);
}

void flatten(Config& c, ImportedLayer& out) {
  out.spec.type = "Flatten";
  channelsLast(c);
}

void reshape(Config& c, ImportedLayer& out) {
  out.spec.type = "Reshape";
  out.spec.args["target_shape"] = targetShape(c);
}

void activationLayer(Config& c, ImportedLayer& out) {
  out.spec.type = "Activation";
  out.spec.args["activation"] = activation(c, "activation");
  if (out.spec.args["activation"] == "softmax") out.axis = -1;  // Keras' Activation takes it over the last axis
}

void softmax(Config& c, ImportedLayer& out) {
  out.spec.type = "Activation";
  out.spec.args["activation"] = "softmax";
  out.axis = c.raw("axis").is_null() ? Json(-1) : c.raw("axis");
}

void relu(Config& c, ImportedLayer& out) {
  out.spec.type = "Activation";
  out.spec.args["activation"] = "relu";
  c.require("max_value", nullptr, "Mirrorlab's relu has no ceiling: use max_value=None");
  c.require("negative_slope", 0.0, "Mirrorlab's relu has no slope below zero: use negative_slope=0");
  c.require("threshold", 0.0, "Mirrorlab's relu starts at 0: use threshold=0");
}

const std::map<std::string, Mapper>& mappers() {
  static const std::map<std::string, Mapper> m = {{"Dense", dense},
                                                  {"Conv2D", conv2d},
                                                  {"MaxPooling2D", pooling},
                                                  {"AveragePooling2D", pooling},
                                                  {"GlobalAveragePooling2D", globalAveragePooling},
                                                  {"BatchNormalization", batchNormalization},
                                                  {"Dropout", dropout},
                                                  {"Flatten", flatten},
                                                  {"Reshape", reshape},
                                                  {"Activation", activationLayer},
                                                  {"Softmax", softmax},
                                                  {"ReLU", relu}};
  return m;
}

// The layer's dtype policy: float32, or one mixed policy for the whole model (float32 layers in a
// mixed model, the output's, are Mirrorlab's too).
void checkPolicy(const Json& cfg, const KerasLayerPlace& p, std::string& policy) {
  const std::string dtype = cfg.contains("dtype") ? policyName(cfg["dtype"]) : "";
  if (dtype.empty() || dtype == "float32") return;
  if (dtype != "mixed_bfloat16" && dtype != "mixed_float16")
    p.refuse("computes in " + dtype + ", which Mirrorlab lacks",
             "Mirrorlab's policies are float32, mixed_bfloat16 and mixed_float16: save a model built with one of them");
  if (!policy.empty() && policy != dtype)
    p.refuse("computes in " + dtype + " where earlier layers use " + policy,
             "Mirrorlab has one precision policy per model: save the model with one policy");
  policy = dtype;
}

}  // namespace

ImportedLayer importLayer(const Json& layer, const KerasLayerPlace& p, std::string& policy) {
  if (!layer.is_object() || !layer.contains("config") || !layer["config"].is_object())
    p.refuse("has no configuration", "the file is damaged: save the model again with Keras");
  const Json& cfg = layer["config"];
  if (cfg.contains("trainable") && cfg["trainable"] == false)
    p.refuse("is frozen (trainable=False), which Mirrorlab lacks",
             "set layer.trainable = True in Keras before saving (Mirrorlab trains every layer)");
  checkPolicy(cfg, p, policy);
  if (p.cls == "Sequential" || p.cls == "Functional" || p.cls == "Model")
    p.refuse("is a model inside the model, which Mirrorlab does not nest",
             "put its layers into the outer Sequential model in Keras, save and import that");
  const auto mapper = mappers().find(p.cls);
  if (mapper == mappers().end())
    p.refuse("has no counterpart in Mirrorlab (" + std::string(kLayersMirrorlabHas) + ")",
             "rebuild the model from those layers in Keras, train, save and import that; or keep this model in Keras");
  ImportedLayer out;
  out.spec.name = p.name;
  out.weightsGroup = kerasLayerName(p.cls);
  Config c(cfg, p);
  mapper->second(c, out);
  c.restIsNeutral();
  return out;
}

}  // namespace ml
