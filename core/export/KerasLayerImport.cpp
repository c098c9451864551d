// Keras layer configurations as Mirrorlab layer specs. Each class reads the keys Mirrorlab has an
// equivalent for; every other key must hold its neutral value (null, false, the default), so that
// a regularizer, a constraint or a dilation never disappears silently. Keys a later Keras adds
// pass while they are neutral.
#include "export/KerasLayerImport.h"

#include <cmath>
#include <map>
#include <set>

#include "Error.h"
#include "nn/LayerKind.h"
#include "project/LayerJson.h"

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

// "Mirrorlab has Dense, Activation, ..., ReLU, Softmax": every Keras class the registry reads.
std::string layersMirrorlabHas() {
  std::string out;
  for (const LayerKind* k : layerKinds()) {
    if (!k->keras.cls.empty()) out += (out.empty() ? "" : ", ") + std::string(k->keras.cls);
    for (const auto& a : k->keras.aliases) out += ", " + std::string(a.cls);
  }
  return "Mirrorlab has " + out + "; its activations are linear, relu, sigmoid, tanh and softmax";
}

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

// A value Keras writes, as the config holds it (initializers by name, pairs as pairs).
Json configValue(const KerasValue& v) {
  return std::visit(
      [](const auto& x) -> Json {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, Initializer>)
          return x.name;
        else
          return Json(x);
      },
      v);
}

// Keys Keras writes that Mirrorlab does not vary must hold Mirrorlab's value (or be absent).
void checkFixed(Config& c, const std::vector<KerasEntry>& fixed) {
  for (const auto& e : fixed) {
    const Json want = configValue(e.value);
    if (std::holds_alternative<Initializer>(e.value)) {
      if (initializer(c, e.key.c_str(), want.get<std::string>().c_str()) != want)
        c.place().refuse("sets " + e.key + ", which Mirrorlab lacks", "use Keras' default for it");
      continue;
    }
    Json have = c.raw(e.key.c_str());
    if (have.is_number_integer() && want.is_array()) have = Json::array({have, have});  // Keras' int-or-pair
    if (!have.is_null() && want.is_null())  // a regularizer or constraint: Mirrorlab has none
      c.place().refuse("sets " + e.key + "=" + dump(have) + ", which Mirrorlab lacks",
                       "remove it from the layer in Keras (or set it to None), save the model again and import that");
    if (!have.is_null() && have != want)
      c.place().refuse("has " + e.key + "=" + dump(have) + ", which Mirrorlab lacks",
                       "use " + e.key + "=" + dump(want) + " in Keras, save the model and import that");
  }
}

// The kind's arguments from the config: each in Keras' form made the project file's (an
// initializer object as its name, 3 as [3, 3]), then read as a project file's layer is.
LayerArgs readArgs(Config& c, const LayerKind& kind) {
  Json args = Json::object();
  forEachArg(kind.example, [&](const char* key, const auto& member, Need) {
    using T = std::decay_t<decltype(member)>;
    std::string from = key;  // the argument's key, or an older Keras' name for it
    for (const auto& [old, now] : kind.keras.renamed)
      if (now == key && !c.has(key) && c.has(std::string(old).c_str())) from = old;
    if (!c.has(from.c_str())) {
      c.raw(from.c_str());  // absent or null: the argument's default
      return;
    }
    if constexpr (std::is_same_v<T, Act>)
      args[key] = activation(c, from.c_str());
    else if constexpr (std::is_same_v<T, Initializer>)
      args[key] = initializer(c, from.c_str(), "");
    else if constexpr (std::is_same_v<T, Pair> || std::is_same_v<T, std::optional<Pair>>)
      args[key] = c.pair(from.c_str(), nullptr);
    else
      args[key] = c.raw(from.c_str());
  });
  const KerasLayerPlace& p = c.place();
  return layerArgsFromJson(
      kind, args, [&](std::string_view key) { return "Keras model '" + p.file + "': " + p.text() + " " + std::string(key); });
}

// The Keras axis a kind checks against the built model (KerasImport.cpp): BatchNormalization's,
// and a softmax's (Keras' Activation takes it over the last axis).
Json axisOf(Config& c, const LayerKind& kind, const LayerArgs& args) {
  const bool softmax = kind.keras.axis == KerasAxis::Softmax && activationOf(args) == Act::Softmax;
  if (kind.keras.axis != KerasAxis::LastAxis && !softmax) return nullptr;
  const Json& axis = c.raw("axis");
  return axis.is_null() ? Json(-1) : axis;
}

// The kind that reads a Keras class (its own, or another class read as it: ReLU as Activation).
const LayerKind* kindOfClass(const std::string& cls, const KerasAlias** alias) {
  *alias = nullptr;
  for (const LayerKind* k : layerKinds()) {
    if (k->keras.cls == cls) return k;
    for (const auto& a : k->keras.aliases)
      if (a.cls == cls) {
        *alias = &a;
        return k;
      }
  }
  return nullptr;
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
  const KerasAlias* alias = nullptr;
  const LayerKind* kind = kindOfClass(p.cls, &alias);
  if (!kind)
    p.refuse("has no counterpart in Mirrorlab (" + layersMirrorlabHas() + ")",
             "rebuild the model from those layers in Keras, train, save and import that; or keep this model in Keras");
  ImportedLayer out;
  out.spec.name = p.name;
  out.weightsGroup = kerasLayerName(p.cls);
  Config c(cfg, p);
  if (alias) {
    out.spec.args = alias->args;
    checkFixed(c, alias->fixed);
  } else {
    out.spec.args = readArgs(c, *kind);
    checkFixed(c, kind->keras.fixed);
  }
  for (const auto key : kind->keras.ignored) c.raw(std::string(key).c_str());
  out.axis = axisOf(c, *kind, out.spec.args);
  c.restIsNeutral();
  return out;
}

}  // namespace ml
