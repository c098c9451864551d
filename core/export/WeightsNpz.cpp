// Splits the model's flat parameter buffer into Keras-named arrays and back.
#include "export/WeightsNpz.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "Error.h"
#include "nn/WeightsFile.h"

namespace ml {
namespace {

// (name, shape, offset into the flat buffer) of every array of the model, in layer order.
struct Slot {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;
};

std::vector<Slot> slots(const Sequential& model) {
  std::vector<Slot> out;
  for (const auto& r : model.paramRanges()) {
    const Layer& l = model.layer(r.layer);
    if (l.type() == "Dense") {
      const int64_t in = l.inFeatures(), units = l.outFeatures();
      out.push_back({l.name + "/kernel", {in, units}, r.offset});
      if (r.count > in * units) out.push_back({l.name + "/bias", {units}, r.offset + in * units});
    } else if (l.type() == "Conv2D") {
      // Keras' layout (kh, kw, in_channels, filters), as Mirrorlab stores it.
      const auto a = l.args();
      const int64_t kh = a["kernel_size"][0].get<int64_t>(), kw = a["kernel_size"][1].get<int64_t>();
      const int64_t c = l.inputShape.back(), f = a["filters"].get<int64_t>(), k = kh * kw * c * f;
      out.push_back({l.name + "/kernel", {kh, kw, c, f}, r.offset});
      if (r.count > k) out.push_back({l.name + "/bias", {f}, r.offset + k});
    } else if (l.type() == "BatchNormalization") {
      const auto a = l.args();
      const int64_t c = l.inputShape.back();
      int64_t at = r.offset;
      for (const char* w : {"gamma", "beta", "moving_mean", "moving_variance"}) {
        if ((std::string(w) == "gamma" && !a.value("scale", true)) || (std::string(w) == "beta" && !a.value("center", true)))
          continue;
        out.push_back({l.name + "/" + w, {c}, at});
        at += c;
      }
    } else {
      out.push_back({l.name + "/params", {r.count}, r.offset});
    }
  }
  return out;
}

int64_t count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

std::vector<NpyArray> weightArrays(const Sequential& model) {
  std::vector<NpyArray> arrays;
  const auto p = model.params();
  for (const auto& s : slots(model)) {
    const auto first = p.begin() + s.offset;
    arrays.push_back({s.name, s.shape, std::vector<float>(first, first + count(s.shape))});
  }
  return arrays;
}

void saveWeightsNpz(const Sequential& model, const std::string& path) {
  requireFiniteParameters(model, model.params(), "the model whose weights were to be written to '" + path + "'",
                          "nothing was written; these weights come from a diverged run (lower the learning rate and train "
                          "again)");
  writeNpz(path, weightArrays(model));
}

void loadWeightsNpz(Sequential& model, const std::string& path) {
  std::map<std::string, NpyArray> byName;
  for (auto& a : readNpz(path)) byName[a.name] = std::move(a);
  const auto want = slots(model);
  for (const auto& s : want) {
    const auto it = byName.find(s.name);
    if (it == byName.end())
      throw UserError("npz file '" + path + "' has no array '" + s.name +
                      "': save it from this model (train --save-weights FILE.npz)");
    if (it->second.shape != s.shape) {
      std::string got, need;
      for (int64_t d : it->second.shape) got += (got.empty() ? "" : ", ") + std::to_string(d);
      for (int64_t d : s.shape) need += (need.empty() ? "" : ", ") + std::to_string(d);
      throw UserError("array '" + s.name + "' in npz file '" + path + "' has shape (" + got + ") but the model needs (" + need +
                      ")");
    }
  }
  if (byName.size() != want.size()) {
    for (const auto& entry : byName) {
      const std::string& name = entry.first;  // not a structured binding: clang 14 cannot capture one
      if (std::none_of(want.begin(), want.end(), [&](const Slot& s) { return s.name == name; }))
        throw UserError("npz file '" + path + "' holds array '" + name +
                        "', which this model does not have: it belongs to another model");
    }
  }
  // NaN or infinite weights only ever give NaN: refused, naming the array (its layer), before the model changes.
  for (const auto& s : want) {
    const auto& data = byName[s.name].data;
    const auto bad = std::find_if(data.begin(), data.end(), [](float v) { return !std::isfinite(v); });
    if (bad != data.end())
      throw UserError("array '" + s.name + "' in npz file '" + path + "' holds " +
                      (std::isnan(*bad) ? "NaN"
                       : *bad > 0       ? "+inf"
                                        : "-inf") +
                      " (value " + std::to_string(bad - data.begin() + 1) + " of its " + std::to_string(data.size()) +
                      "): these weights come from a diverged run and would only give NaN; train again with a lower "
                      "learning rate");
  }
  auto p = model.params();
  for (const auto& s : want) std::copy(byName[s.name].data.begin(), byName[s.name].data.end(), p.begin() + s.offset);
}

}  // namespace ml
