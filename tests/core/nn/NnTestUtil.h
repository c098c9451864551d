// Helpers shared by the nn tests: model specs in one line, deterministic random buffers, the
// normalised error used by every gradient check.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nn/Dense.h"
#include "nn/Precision.h"
#include "project/Project.h"
#include "random/Rng.h"

namespace ml::test {

// A layer as a project file gives it: its type and keyword arguments (project/LayerJson.h).
inline LayerSpec layerSpec(const std::string& type, const nlohmann::json& args = nlohmann::json::object(),
                           const std::string& name = "") {
  return makeLayerSpec(type, args, name);
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

// The threads this process has now (/proc/self/status): a kernel that started a pool would add some.
inline int threadsOfThisProcess() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return -1;
}

struct DenseOut {
  std::vector<float> y, dx, grads;
};

// A layer's forward and `backwards` backward passes (gradients accumulate) under precision p, on
// the current thread's team if any: weights from initSeed, inputs uniform in [xLo, 1) and upstream
// gradients in [-1, 1) from dataSeed.
template <class L>
DenseOut runLayerPasses(L& layer, const Shape& input, int64_t n, Precision p, uint64_t initSeed, uint64_t dataSeed, double xLo,
                        int backwards) {
  layer.build(input);
  std::vector<float> params(static_cast<size_t>(layer.paramCount())), grads(params.size(), 0.0f);
  layer.bind(params.data(), grads.data());
  layer.initialize(initSeed);
  layer.setPrecision(p);
  Rng rng(dataSeed);
  std::vector<float> x(static_cast<size_t>(n * layer.inFeatures())), dy(static_cast<size_t>(n * layer.outFeatures()));
  for (float& v : x) v = static_cast<float>(rng.uniform(xLo, 1));
  for (float& v : dy) v = static_cast<float>(rng.uniform(-1, 1));
  DenseOut o;
  o.y.assign(dy.size(), 0.0f);
  o.dx.assign(x.size(), 0.0f);
  StepContext ctx;
  ctx.training = true;
  layer.forward(x.data(), o.y.data(), n, ctx);
  for (int rep = 0; rep < backwards; ++rep) {
    std::vector<float> dz = dy;
    layer.backward(x.data(), o.y.data(), dz.data(), o.dx.data(), n, ctx);
  }
  o.grads = grads;
  return o;
}

// One Dense (in -> out, batch n, seeded weights and data) forward and `backwards` backward passes
// (gradients accumulate) under precision p, on the current thread's team if any.
inline DenseOut runDenseLayer(int64_t in, int64_t out, int64_t n, Act act, Precision p, int backwards = 1) {
  Dense d(out, act);
  d.name = "dense";
  return runLayerPasses(d, {in}, n, p, 11, 12, 0.0, backwards);
}

}  // namespace ml::test
