// One reader and one writer for every layer kind: each argument's C++ type decides its JSON form.
#include "project/LayerJson.h"

#include <cmath>
#include <set>

#include "Error.h"
#include "JsonFile.h"
#include "nn/Initializers.h"

namespace ml {

using nlohmann::json;

namespace {

// Reads one argument; `where` is the argument in words, for the message.
struct ArgReader {
  const std::string& where;

  [[noreturn]] void wrongType(const json& v) const { throw UserError(where + " has the wrong type (" + shortDump(v) + ")"); }

  void operator()(const json& v, int64_t& out) const {
    // 2.7 units is not silently 2, and 1e300 is not -9223372036854775808.
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (d != std::floor(d)) throw UserError(where + " must be a whole number, got " + shortDump(v));
      if (!(d >= -0x1p62 && d <= 0x1p62)) throw UserError(where + " is out of range, got " + shortDump(v));
      out = static_cast<int64_t>(d);
      return;
    }
    if (v.is_number_unsigned() && v.get<uint64_t>() > (uint64_t{1} << 62))
      throw UserError(where + " is out of range, got " + shortDump(v));
    if (!v.is_number_integer()) wrongType(v);
    out = v.get<int64_t>();
  }
  void operator()(const json& v, double& out) const {
    if (!v.is_number()) wrongType(v);
    out = v.get<double>();
  }
  void operator()(const json& v, bool& out) const {
    if (!v.is_boolean()) wrongType(v);
    out = v.get<bool>();
  }
  void operator()(const json& v, Act& out) const {
    if (!v.is_string()) wrongType(v);
    out = parseActivation(v.get<std::string>(), where);
  }
  void operator()(const json& v, Initializer& out) const {
    if (!v.is_string()) wrongType(v);
    validateInitializer(v.get<std::string>(), where);
    out.name = v.get<std::string>();
  }
  void operator()(const json& v, Padding& out) const {
    const std::string p = v.is_string() ? v.get<std::string>() : shortDump(v);
    if (p != "valid" && p != "same") throw UserError(where + " must be \"valid\" or \"same\", got \"" + clipText(p, 40) + "\"");
    out = p == "same" ? Padding::Same : Padding::Valid;
  }
  // Keras' int-or-pair arguments (kernel_size, strides, pool_size): 3 means (3, 3).
  void operator()(const json& v, Pair& out) const {
    auto one = [&](const json& e) -> int64_t {
      if (!e.is_number() || e.get<double>() != std::floor(e.get<double>()) || e.get<double>() < 1 || e.get<double>() > 1e6)
        throw UserError(where + " must be a positive whole number or a pair of them, got " + shortDump(v));
      return static_cast<int64_t>(e.get<double>());
    };
    if (v.is_array()) {
      if (v.size() != 2) throw UserError(where + " must be one number or a pair [rows, columns], got " + shortDump(v));
      out = {one(v[0]), one(v[1])};
      return;
    }
    out.rows = out.cols = one(v);
  }
  void operator()(const json& v, std::optional<Pair>& out) const {
    if (v.is_null()) {
      out.reset();
      return;
    }
    (*this)(v, out.emplace());
  }
  void operator()(const json& v, Shape& out) const {
    out.clear();
    if (v.is_array())
      for (const auto& e : v) {
        if (!e.is_number_integer()) throw UserError(where + " must be a list of whole numbers, got " + shortDump(v));
        out.push_back(e.get<int64_t>());
      }
    if (!v.is_array() || out.empty())
      throw UserError(where + " must be a list of whole numbers, e.g. [28, 28, 1], got " + shortDump(v));
  }
};

json toJson(int64_t v) { return v; }
json toJson(double v) { return v; }
json toJson(bool v) { return v; }
json toJson(Act a) { return toString(a); }
json toJson(const Initializer& i) { return i.name; }
json toJson(Padding p) { return toString(p); }
json toJson(const Pair& p) { return p.rows == p.cols ? json(p.rows) : json::array({p.rows, p.cols}); }
json toJson(const std::optional<Pair>& p) { return p ? toJson(*p) : json(nullptr); }
json toJson(const Shape& s) { return s; }

}  // namespace

LayerArgs layerArgsFromJson(const LayerKind& kind, const json& obj, const ArgWords& where) {
  LayerArgs args = kind.example;
  // Start from the kind's defaults, not the palette's example values.
  std::visit([](auto& spec) { spec = std::decay_t<decltype(spec)>{}; }, args);
  forEachArg(args, [&](const char* key, auto& member, Need need) {
    if (!obj.contains(key)) {
      if (need == Need::Required) throw UserError(where(key) + " is required");
      return;
    }
    const std::string words = where(key);
    ArgReader{words}(obj.at(key), member);
  });
  return args;
}

json layerArgsToJson(const LayerArgs& args, bool all) {
  json out = json::object();
  std::visit(
      [&](const auto& spec) {
        using Spec = std::decay_t<decltype(spec)>;
        const Spec defaults{};
        std::vector<json> plain;  // the defaults, in the order of the arguments
        Spec::fields(defaults, [&](const char*, const auto& v, Need) { plain.push_back(toJson(v)); });
        size_t i = 0;
        Spec::fields(spec, [&](const char* key, const auto& v, Need need) {
          json value = toJson(v);
          if (all || need == Need::Required || value != plain[i]) out[key] = std::move(value);
          ++i;
        });
      },
      args);
  return out;
}

std::string layerArgNames(const LayerKind& kind) {
  std::string names;
  forEachArg(kind.example, [&](const char* key, const auto&, Need) { names += (names.empty() ? "" : ", ") + std::string(key); });
  return names.empty() ? "none" : names;
}

LayerSpec layerFromJson(const json& entry, const LayerPlace& place, const std::string& source) {
  const std::string prefix = source.empty() ? std::string() : source + ": ";
  const LayerKind* kind = findLayerKind(place.type);
  if (!kind)
    throw UserError(
        prefix + place.layer() + ": unknown layer type '" + clipText(place.type, 40) + "' (allowed: " + layerTypeNames() + ")",
        place.path("type"));
  std::set<std::string> known;
  forEachArg(kind->example, [&](const char* key, const auto&, Need) { known.insert(key); });
  for (auto it = entry.begin(); it != entry.end(); ++it)
    if (it.key() != "type" && it.key() != "name" && !known.count(it.key()))
      throw UserError(
          prefix + place.layer() + ": unknown argument '" + clipText(it.key(), 40) + "' (allowed: " + layerArgNames(*kind) + ")",
          place.path());
  LayerSpec spec;
  if (entry.contains("name")) {
    if (!entry.at("name").is_string())
      throw UserError(prefix + place.arg("name") + " must be a string, got " + shortDump(entry.at("name")), place.path("name"));
    spec.name = entry.at("name").get<std::string>();
  }
  std::string reading;  // the argument being read, the field of its refusal
  try {
    spec.args = layerArgsFromJson(*kind, entry, [&](std::string_view key) {
      reading = key;
      return prefix + place.arg(key);
    });
  } catch (const UserError& e) {
    if (!e.field().empty()) throw;
    throw UserError(e.what(), place.path(reading));
  }
  return spec;
}

LayerSpec makeLayerSpec(std::string_view type, const json& args, const std::string& name) {
  json entry = args.is_null() ? json::object() : args;
  entry["type"] = std::string(type);
  if (!name.empty()) entry["name"] = name;
  // A model built in code names its first layer as Keras would: "conv2d".
  return layerFromJson(entry, LayerPlace{0, name.empty() ? kerasLayerName(type) : name, std::string(type)}, "");
}

json layerToJson(const LayerSpec& spec) {
  json j = layerArgsToJson(spec.args);
  j["type"] = std::string(spec.type());
  if (!spec.name.empty()) j["name"] = spec.name;
  return j;
}

}  // namespace ml
