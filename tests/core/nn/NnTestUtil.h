// Helpers shared by the nn tests: model specs in one line, deterministic random buffers, the
// normalised error used by every gradient check.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "project/Project.h"
#include "random/Rng.h"

namespace ml::test {

inline LayerSpec layerSpec(std::string type, nlohmann::json args = nlohmann::json::object(), std::string name = "") {
  LayerSpec s;
  s.type = std::move(type);
  s.name = std::move(name);
  s.args = std::move(args);
  return s;
}

inline LayerSpec dense(int64_t units, const std::string& act) {
  return layerSpec("Dense", {{"units", units}, {"activation", act}});
}

inline ModelSpec modelSpec(Shape input, std::vector<LayerSpec> layers) {
  ModelSpec m;
  m.inputShape = std::move(input);
  m.layers = std::move(layers);
  return m;
}

// Uniform values in [lo, hi), deterministic by seed.
inline std::vector<float> randomVector(size_t n, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.uniform(lo, hi));
  return v;
}

// |a - n| / max(floor, |a| + |n|): relative for large gradients, absolute near zero.
inline double normalisedError(double analytic, double numeric, double floor = 1e-3) {
  return std::fabs(analytic - numeric) / std::max(floor, std::fabs(analytic) + std::fabs(numeric));
}

}  // namespace ml::test
