// Mixed precision on GPUs through the plugin (its *_low kernels and the loss gradient's scale),
// held against the CPU path, which rounds at the same points: mixed_bfloat16 and mixed_float16 on
// gpu:0 give the CPU's weights far closer than the policy moves them (an MLP and a CNN); N logical
// GPUs give the weights of one under each policy, skipping the same steps; a real float16 overflow
// skips steps and halves the scale on every replica until the scaled gradients fit; float32 stays
// the float32 path. Skips with the probe's reason where there is no usable GPU.
#include "GpuTrainingTest.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "TestData.h"
#include "backend/DeviceProbe.h"
#include "distribute/MirroredStrategy.h"
#include "project/LayerJson.h"
#include "train/Trainer.h"

namespace {

using mltest::relDiff;

using mlgputest::report;

class GpuMixedPrecision : public mlgputest::NeedsGpu {};

const ml::Dataset& data() {
  static const ml::Dataset d = [] {
    ml::Dataset x = mltest::makeClassification(1200, 48);
    x.sampleShape = {4, 4, 3};
    return x;
  }();
  return d;
}

ml::ModelSpec mlp() {
  ml::ModelSpec m = mltest::makeModel(false, 48);
  m.inputShape = {4, 4, 3};
  m.layers.insert(m.layers.begin(), ml::makeLayerSpec("Flatten"));
  return m;
}

ml::ModelSpec cnn() {
  ml::ModelSpec m;
  m.inputShape = {4, 4, 3};
  m.layers.push_back(
      ml::makeLayerSpec("Conv2D", {{"filters", 6}, {"kernel_size", 2}, {"padding", "same"}, {"activation", "relu"}}));
  m.layers.push_back(ml::makeLayerSpec("MaxPooling2D", {{"pool_size", 2}}));
  m.layers.push_back(ml::makeLayerSpec("Flatten"));
  m.layers.push_back(ml::makeLayerSpec("Dense", {{"units", 4}, {"activation", "softmax"}}));
  return m;
}

std::unique_ptr<ml::MirroredStrategy> strategy(const ml::ModelSpec& model, const std::string& devices, ml::Precision p,
                                               ml::LossScaling ls = {}) {
  ml::StrategyOptions so;
  so.devices = ml::parseDevices(devices);
  so.bucketBytes = 256;
  so.precision = p;
  so.lossScaling = ls;
  ml::OptimizerSpec o;
  o.name = "adam";
  auto s = std::make_unique<ml::MirroredStrategy>(model, ml::Loss::make("sparse_categorical_crossentropy", false),
                                                  ml::MetricKind::Accuracy, o, so);
  s->initialize(11);
  return s;
}

struct Trace {
  std::vector<float> weights;
  std::vector<ml::StepResult> steps;
  std::vector<uint64_t> checksums;
};

Trace train(ml::MirroredStrategy& s, int64_t B, int steps) {
  const auto order = ml::epochOrder(data().size, 5, 1);
  Trace t;
  for (int k = 0; k < steps; ++k) {
    const auto idx = std::span<const int64_t>(order).subspan(static_cast<size_t>(k * B), static_cast<size_t>(B));
    t.steps.push_back(s.trainStep(data(), idx, 1, 0.01f, static_cast<uint64_t>(k + 1)));
    const auto sums = s.checksums();
    for (size_t i = 1; i < sums.size(); ++i) EXPECT_EQ(sums[i], sums[0]) << "replica " << i << " after step " << k + 1;
    t.checksums.push_back(sums[0]);
  }
  auto p = s.model(0).params();
  t.weights.assign(p.begin(), p.end());
  return t;
}

// A scale whose products fit float16 (as in the CPU's MixedPrecisionTest): backward's values are
// the mean loss's (B = 60) times the scale.
ml::LossScaling fitting() {
  ml::LossScaling ls;
  ls.enabled = true;
  ls.initial = 1024 * 60;
  return ls;
}

TEST_F(GpuMixedPrecision, EachPolicyOnAGpuGivesTheCpusWeights) {
  for (const auto& [name, model] : {std::pair<const char*, ml::ModelSpec>{"mlp", mlp()}, {"cnn", cnn()}})
    for (ml::Precision p : {ml::Precision::MixedBfloat16, ml::Precision::MixedFloat16}) {
      SCOPED_TRACE(std::string(name) + " " + ml::toString(p));
      const Trace cpu = train(*strategy(model, "cpu:1", p, fitting()), 60, 5);
      const Trace gpu = train(*strategy(model, "gpu:0", p, fitting()), 60, 5);
      const Trace f32 = train(*strategy(model, "gpu:0", ml::Precision::Float32), 60, 5);
      const double policyEffect = relDiff(f32.weights, gpu.weights), d = relDiff(gpu.weights, cpu.weights);
      std::printf("%s %s: GPU against CPU %.3g relative after 5 steps; the policy moves the weights %.3g\n", name,
                  ml::toString(p), d, policyEffect);
      EXPECT_GT(policyEffect, 1e-5) << "the policy changed nothing on the GPU";
      EXPECT_LT(d, policyEffect / 4) << "policy effect " << policyEffect;
      EXPECT_LT(d, 2e-3);
      for (size_t k = 0; k < gpu.steps.size(); ++k) {
        EXPECT_EQ(gpu.steps[k].skipped, cpu.steps[k].skipped) << k;
        EXPECT_EQ(gpu.steps[k].lossScale, cpu.steps[k].lossScale) << k;
      }
    }
}

TEST_F(GpuMixedPrecision, FourLogicalGpusGiveTheWeightsOfOneUnderEachPolicy) {
  for (ml::Precision p : {ml::Precision::MixedBfloat16, ml::Precision::MixedFloat16}) {
    SCOPED_TRACE(ml::toString(p));
    const Trace one = train(*strategy(cnn(), "gpu:0x1", p, fitting()), 60, 4);
    const Trace f32 = train(*strategy(cnn(), "gpu:0x1", ml::Precision::Float32), 60, 4);
    const Trace four = train(*strategy(cnn(), "gpu:0x4", p, fitting()), 60, 4);
    for (size_t k = 0; k < four.steps.size(); ++k) EXPECT_EQ(four.steps[k].skipped, one.steps[k].skipped) << k;
    const double d = relDiff(four.weights, one.weights);
    EXPECT_LT(d, 2e-3);
    EXPECT_LT(d, relDiff(f32.weights, one.weights) / 4);
  }
}

// 2^24 times the per-sample loss gradients overflows float16 in backward: the first steps are
// skipped on both replicas, halving the scale, and the weights stay as they were until it fits.
TEST_F(GpuMixedPrecision, ARealFloat16OverflowHalvesTheScaleUntilTheGradientsFit) {
  ml::LossScaling ls;
  ls.enabled = true;
  ls.initial = 40 * std::ldexp(1.0, 24);
  auto s = strategy(mlp(), "gpu:0x2", ml::Precision::MixedFloat16, ls);
  const uint64_t initial = s->checksums()[0];
  const Trace t = train(*s, 40, 15);
  size_t firstGood = 0;
  while (firstGood < t.steps.size() && t.steps[firstGood].skipped) ++firstGood;
  ASSERT_GE(firstGood, 3u);
  ASSERT_LT(firstGood, t.steps.size());
  for (size_t k = 0; k < firstGood; ++k) {
    EXPECT_EQ(t.steps[k].lossScale, 40 * std::ldexp(1.0, 24 - static_cast<int>(k)));
    EXPECT_EQ(t.checksums[k], initial) << "step " << k + 1;
  }
  for (size_t k = firstGood; k < t.steps.size(); ++k) EXPECT_FALSE(t.steps[k].skipped) << "step " << k + 1;
  EXPECT_NE(t.checksums[firstGood], initial);
  // The CPU skips the same steps.
  const Trace cpu = train(*strategy(mlp(), "cpu:2", ml::Precision::MixedFloat16, ls), 40, 15);
  for (size_t k = 0; k < t.steps.size(); ++k) EXPECT_EQ(t.steps[k].skipped, cpu.steps[k].skipped) << "step " << k + 1;
}

// --allreduce-dtype bfloat16 on GPUs: the logical-GPU sum rounds each value and each partial sum
// to bfloat16, NCCL sums bfloat16 buffers. The replicas stay bit-identical (train() checks), the
// start line says so, and the weights move from float32's by about bfloat16's precision, not more.
TEST_F(GpuMixedPrecision, Bfloat16OnTheWireKeepsTheReplicasIdentical) {
  for (const char* devices : {"gpu:0x3", "gpu:0,1"}) {
    if (std::string(devices) == "gpu:0,1" && report().gpus.size() < 2) continue;
    SCOPED_TRACE(devices);
    auto make = [&](ml::AllReduceDtype dtype) {
      ml::StrategyOptions so;
      so.devices = ml::parseDevices(devices);
      so.bucketBytes = 256;
      so.allreduceDtype = dtype;
      ml::OptimizerSpec o;
      o.name = "sgd";
      auto s = std::make_unique<ml::MirroredStrategy>(mlp(), ml::Loss::make("sparse_categorical_crossentropy", false),
                                                      ml::MetricKind::Accuracy, o, so);
      s->initialize(11);
      return s;
    };
    auto wire = make(ml::AllReduceDtype::Bfloat16);
    EXPECT_NE(wire->allReducePath().find("bfloat16 on the wire"), std::string::npos) << wire->allReducePath();
    const Trace f32 = train(*make(ml::AllReduceDtype::Float32), 60, 5);
    const Trace bf = train(*wire, 60, 5);
    const double d = relDiff(bf.weights, f32.weights);
    EXPECT_GT(d, 1e-6) << "the wire format changed nothing";
    EXPECT_LT(d, 1e-2);
  }
}

TEST_F(GpuMixedPrecision, Float32PolicyIsTheFloat32Path) {
  ml::LossScaling ls;
  ls.enabled = true;  // ignored: only mixed_float16 scales the loss
  const Trace a = train(*strategy(cnn(), "gpu:0x2", ml::Precision::Float32), 50, 4);
  const Trace b = train(*strategy(cnn(), "gpu:0x2", ml::Precision::Float32, ls), 50, 4);
  EXPECT_EQ(a.checksums, b.checksums);
}

}  // namespace
