// The registry's lookups and the factory: the kinds are LayerArgs' alternatives, each struct's
// kind() the entry its own file defines, so the list of kinds is written once (nn/LayerSpecs.h).
#include <cctype>
#include <map>
#include <set>
#include <utility>

#include "Error.h"
#include "Field.h"
#include "nn/Initializers.h"
#include "nn/LayerKind.h"

namespace ml {

const LayerArgs& Layer::args() const {
  static const LayerArgs none;
  return args_ ? *args_ : none;
}

const char* toString(Padding p) { return p == Padding::Same ? "same" : "valid"; }

namespace {

template <size_t... I>
std::vector<const LayerKind*> everyKind(std::index_sequence<I...>) {
  return {&std::variant_alternative_t<I, LayerArgs>::kind()...};
}

}  // namespace

const std::vector<const LayerKind*>& layerKinds() {
  static const std::vector<const LayerKind*> kinds = everyKind(std::make_index_sequence<std::variant_size_v<LayerArgs>>());
  return kinds;
}

const LayerKind& LayerSpec::kind() const { return *layerKinds()[args.index()]; }
std::string_view LayerSpec::type() const { return kind().type; }

const LayerKind* findLayerKind(std::string_view type) {
  for (const LayerKind* k : layerKinds())
    if (k->type == type) return k;
  return nullptr;
}

std::string layerTypeNames() {
  std::string names;
  for (const LayerKind* k : layerKinds()) names += (names.empty() ? "" : ", ") + std::string(k->type);
  return names;
}

std::optional<Act> activationOf(const LayerArgs& args) {
  std::optional<Act> act;
  forEachArg(args, [&](std::string_view key, const auto& v, Need) {
    if constexpr (std::is_same_v<std::decay_t<decltype(v)>, Act>)
      if (key == "activation") act = v;
  });
  return act;
}

std::unique_ptr<Layer> makeLayer(const LayerSpec& spec, size_t index) {
  const LayerKind& kind = spec.kind();
  const LayerPlace place{index, spec.name, std::string(kind.type)};
  std::unique_ptr<Layer> layer = kind.make(spec.args, place);
  layer->name = spec.name;
  layer->setOrigin(kind, spec.args);
  return layer;
}

std::string kerasLayerName(std::string_view type) {
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

std::vector<std::string> layerNames(const std::vector<std::string>& types, const std::vector<std::string>& names) {
  std::map<std::string, int> counts;
  std::set<std::string> used;
  for (const auto& n : names)
    if (!n.empty()) used.insert(n);
  std::vector<std::string> out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!names[i].empty()) {
      out.push_back(names[i]);
      continue;
    }
    const std::string base = kerasLayerName(types[i]);
    std::string name;
    do {
      int& c = counts[base];
      name = c == 0 ? base : base + "_" + std::to_string(c);
      ++c;
    } while (used.count(name));
    used.insert(name);
    out.push_back(name);
  }
  return out;
}

std::string describeLayer(const LayerArgs& args) {
  const LayerKind& k = *layerKinds()[args.index()];
  return k.describe ? k.describe(args) : std::string();
}

std::string LayerPlace::layer() const { return layerInWords(index, name, type); }
std::string LayerPlace::arg(std::string_view key) const { return layerArgInWords(index, name, type, std::string(key)); }
std::string LayerPlace::path(std::string_view key) const { return layerPath(index, std::string(key)); }
UserError LayerPlace::argError(std::string_view key, const std::string& rest) const {
  return UserError(arg(key) + rest, path(key));
}

void requirePositive(const LayerPlace& place, const char* key, int64_t v) {
  if (v <= 0) throw place.argError(key, " must be a positive integer, got " + std::to_string(v));
}

void requireWindow(const LayerPlace& place, const char* key, const Pair& p) {
  if (p.rows < 1 || p.cols < 1 || p.rows > 1000000 || p.cols > 1000000)
    throw place.argError(key, " must be a positive whole number or a pair of them, got [" + std::to_string(p.rows) + ", " +
                                  std::to_string(p.cols) + "]");
}

void requireInitializer(const LayerPlace& place, const char* key, const Initializer& init) {
  try {
    validateInitializer(init.name, place.arg(key));
  } catch (const UserError& e) {
    throw UserError(e.what(), place.path(key));
  }
}

std::string pairText(const Pair& p) { return std::to_string(p.rows) + "x" + std::to_string(p.cols); }

}  // namespace ml
