// Data and models shared by the step and telemetry benchmarks: random 28x28 "images" (no disk,
// no decompression in the timings) and the MLPs of the example projects.
#pragma once
#include <vector>

#include "data/Dataset.h"
#include "nn/Specs.h"
#include "random/Rng.h"

namespace mlbench {

inline ml::Dataset randomImages(int64_t n) {
  ml::Dataset d;
  d.name = "random 28x28";
  d.sampleShape = {28, 28};
  d.size = n;
  d.numClasses = 10;
  d.x.resize(static_cast<size_t>(n * 784));
  ml::Rng r(1);
  for (auto& v : d.x) v = static_cast<float>(r.uniform());
  for (int64_t i = 0; i < n; ++i) d.y.push_back(static_cast<float>(i % 10));
  return d;
}

// Flatten -> Dense(h, relu)... -> Dense(10, softmax)
inline ml::ModelSpec mlp(const std::vector<int64_t>& hidden) {
  ml::ModelSpec m;
  m.inputShape = {28, 28};
  m.layers.push_back({"", ml::FlattenSpec{}});
  for (auto h : hidden) m.layers.push_back({"", ml::DenseSpec{.units = h, .activation = ml::Act::Relu}});
  m.layers.push_back({"", ml::DenseSpec{.units = 10, .activation = ml::Act::Softmax}});
  return m;
}

}  // namespace mlbench
