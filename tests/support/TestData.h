// Small deterministic data sets and models for the tests (distribute, train, gpu).
#pragma once
#include <cmath>
#include <limits>
#include <memory>
#include <span>
#include <vector>

#include "data/Dataset.h"
#include "project/Project.h"
#include "random/Rng.h"
#include "telemetry/Channel.h"

namespace mltest {

// n samples of `features` values in [-1, 1]; label = which of 4 sectors a projection falls in.
inline ml::Dataset makeClassification(int64_t n, int features = 12, uint64_t seed = 3) {
  ml::Dataset d;
  d.name = "test set";
  d.sampleShape = {features};
  d.size = n;
  d.numClasses = 4;
  ml::Rng rng(seed);
  for (int64_t i = 0; i < n; ++i) {
    double a = 0, b = 0;
    for (int f = 0; f < features; ++f) {
      const float v = static_cast<float>(rng.uniform(-1, 1));
      d.x.push_back(v);
      a += (f % 2 ? v : -v) * (1 + f % 3);
      b += v * (f % 4 - 1.5);
    }
    d.y.push_back(static_cast<float>((a > 0 ? 1 : 0) + (b > 0 ? 2 : 0)));
  }
  return d;
}

// makeClassification(n, h * w * c) read as h x w x c "images".
inline ml::Dataset makeImages(int64_t n, const ml::Shape& shape) {
  int features = 1;
  for (int64_t d : shape) features *= static_cast<int>(d);
  ml::Dataset d = makeClassification(n, features);
  d.sampleShape = shape;
  return d;
}

inline ml::ModelSpec makeModel(bool dropout, int features = 12) {
  ml::ModelSpec m;
  m.inputShape = {features};
  m.layers.push_back(ml::makeLayerSpec("Dense", {{"units", 16}, {"activation", "relu"}}));
  if (dropout) m.layers.push_back(ml::makeLayerSpec("Dropout", {{"rate", 0.3}}));
  m.layers.push_back(ml::makeLayerSpec("Dense", {{"units", 8}, {"activation", "tanh"}}));
  m.layers.push_back(ml::makeLayerSpec("Dense", {{"units", 4}, {"activation", "softmax"}}));
  return m;
}

// A small training project over the data above (kind "spirals" only names it: the tests hand the
// data in): 2 epochs, adam at its default rate, the default seed (42).
inline ml::Project makeProject(const std::string& name, ml::ModelSpec model, const std::string& devices, int64_t batch) {
  ml::Project p;
  p.name = name;
  p.model = std::move(model);
  p.data.kind = ml::DataKind::Spirals;
  p.training.epochs = 2;
  p.training.batchSize = batch;
  p.training.optimizer.kind = ml::OptimizerKind::Adam;
  p.distribute.devices = ml::parseDevices(devices);
  return p;
}

// makeClassification(train) to train on and, when validation > 0, another draw to validate on.
inline std::shared_ptr<const ml::DataSplit> makeSplit(int64_t train, int64_t validation = 0) {
  auto s = std::make_shared<ml::DataSplit>();
  s->train = makeClassification(train);
  if (validation > 0) s->validation = makeClassification(validation, 12, 99);
  return s;
}

inline std::vector<ml::Event> drainAll(ml::Channel& ch) {
  std::vector<ml::Event> out;
  ch.drain(out);
  return out;
}

// max |a - b| / max |b|; infinite when the sizes differ or a value is not finite, so that a
// "less than" assertion fails instead of comparing a prefix.
inline double relDiff(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::fabs(static_cast<double>(a[i]) - b[i]));
    den = std::max(den, std::fabs(static_cast<double>(b[i])));
  }
  const double d = num / std::max(den, 1e-30);
  return std::isfinite(d) ? d : std::numeric_limits<double>::infinity();
}

// The smallest valid project file: one Dense layer on the spirals, cpu:2. Tests of the project
// reader change one field of it.
inline nlohmann::json smallProjectJson() {
  return nlohmann::json::parse(R"({
    "schema_version": 1, "name": "t",
    "model": {"input_shape": [4], "layers": [{"type": "Dense", "units": 3, "activation": "softmax"}]},
    "data": {"kind": "spirals"},
    "training": {"epochs": 1, "batch_size": 8},
    "distribute": {"devices": "cpu:2"}
  })");
}

}  // namespace mltest
