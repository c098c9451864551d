// Synthetic sets built from the project's own splitmix64 generator (random/Rng.h), never from
// <random> distributions, whose output differs between standard libraries: the same seed gives
// the same points on every machine, so stored runs can be re-run exactly.
#include "data/Synthetic.h"

#include <cmath>
#include <string>
#include <vector>

#include "Error.h"
#include "Field.h"
#include "Limits.h"
#include "random/Rng.h"

namespace ml {
namespace {

constexpr double kTwoPi = 6.283185307179586;
// Angle an arm sweeps from the centre to radius 1 (the CS231n spirals use 4 radians).
constexpr double kArmSweep = 4.0;

void checkCommon(int64_t samples, int classes, double noise) {
  if (classes < 1 || classes > 1000)
    throw fieldError("data.classes", " is " + std::to_string(classes) + ": a synthetic set needs 1 to 1000 classes");
  if (samples < classes)
    throw fieldError("data.samples", " is " + std::to_string(samples) + ": it must be at least Classes (" +
                                         std::to_string(classes) + ") so every class has a point");
  if (samples > (int64_t{1} << 28))
    throw fieldError("data.samples", " is " + std::to_string(samples) + ": a synthetic set holds at most 268435456 points");
  if (!(noise >= 0.0) || !std::isfinite(noise))
    throw fieldError("data.noise", " must be a finite number >= 0 (it is " + std::to_string(noise) + ")");
}

// Sample i belongs to class i % classes, so any prefix of the set is balanced.
int classOf(int64_t i, int classes) { return static_cast<int>(i % classes); }

}  // namespace

Dataset makeSpirals(int64_t samples, int classes, double noise, uint64_t seed) {
  checkCommon(samples, classes, noise);
  requireMemory(static_cast<double>(samples) * 3 * sizeof(float), "spirals of " + std::to_string(samples) + " samples",
                "lower " + fieldInWords("data.samples"));
  Dataset ds;
  ds.name = "spirals (" + std::to_string(classes) + " arms)";
  ds.sampleShape = {2};
  ds.size = samples;
  ds.targetDim = 1;
  ds.numClasses = classes;
  ds.x.resize(static_cast<size_t>(samples) * 2);
  ds.y.resize(static_cast<size_t>(samples));
  Rng rng(hashKeys(seed, 0x5B1A15ULL));
  for (int64_t i = 0; i < samples; ++i) {
    const int c = classOf(i, classes);
    const int64_t k = i / classes;                                  // position along the arm
    const int64_t n = samples / classes + (c < samples % classes);  // points on this arm
    const double r = n > 1 ? static_cast<double>(k) / static_cast<double>(n - 1) : 0.0;
    // Arms start evenly spaced around the circle; noise perturbs the angle, so the radius stays r.
    const double t = kTwoPi * c / classes + kArmSweep * r + noise * rng.normal();
    ds.x[static_cast<size_t>(2 * i)] = static_cast<float>(r * std::sin(t));
    ds.x[static_cast<size_t>(2 * i + 1)] = static_cast<float>(r * std::cos(t));
    ds.y[static_cast<size_t>(i)] = static_cast<float>(c);
  }
  return ds;
}

Dataset makeBlobs(int64_t samples, int classes, int features, double noise, uint64_t seed) {
  checkCommon(samples, classes, noise);
  if (features < 1 || features > 100000)
    throw fieldError("data.features", " is " + std::to_string(features) + ": blobs need 1 to 100000 features");
  requireMemory(static_cast<double>(samples) * features * sizeof(float),
                "blobs of " + std::to_string(samples) + " samples x " + std::to_string(features) + " features",
                "lower " + fieldInWords("data.samples") + " or " + fieldInWords("data.features"));
  Dataset ds;
  ds.name = "blobs (" + std::to_string(classes) + " classes)";
  ds.sampleShape = {features};
  ds.size = samples;
  ds.targetDim = 1;
  ds.numClasses = classes;
  // Centres and points come from separate streams, so changing `samples` keeps the centres.
  Rng centreRng(hashKeys(seed, 0xb10bULL, 1));
  std::vector<double> centres(static_cast<size_t>(classes) * static_cast<size_t>(features));
  for (double& c : centres) c = centreRng.uniform(-5.0, 5.0);
  Rng rng(hashKeys(seed, 0xb10bULL, 2));
  ds.x.resize(static_cast<size_t>(samples) * static_cast<size_t>(features));
  ds.y.resize(static_cast<size_t>(samples));
  for (int64_t i = 0; i < samples; ++i) {
    const int c = classOf(i, classes);
    const double* centre = centres.data() + static_cast<size_t>(c) * static_cast<size_t>(features);
    float* out = ds.x.data() + i * features;
    for (int f = 0; f < features; ++f) out[f] = static_cast<float>(centre[f] + noise * rng.normal());
    ds.y[static_cast<size_t>(i)] = static_cast<float>(c);
  }
  return ds;
}

}  // namespace ml
