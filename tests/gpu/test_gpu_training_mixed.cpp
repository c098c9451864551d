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

#include "backend/DeviceProbe.h"
#include "distribute/MirroredStrategy.h"
#include "project/LayerJson.h"
#include "support/Strategies.h"
#include "support/TestData.h"
#include "support/Training.h"
#include "train/Trainer.h"

namespace {

using mltest::relDiff;
using mltest::train;

using mlgputest::report;

class GpuMixedPrecision : public mlgputest::NeedsGpu {};

const ml::Dataset& data() {
  static const ml::Dataset d = mltest::makeImages(1200, {4, 4, 3});
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
  so.bucketBytes = 256;
  so.precision = p;
  so.lossScaling = ls;
  return mltest::makeStrategy(model, devices, mltest::optimizer("adam"), so);
}

using Trained = mltest::Trained;

// Steps at 0.01 that may be skipped (loss scaling): train() checks only the replicas' bits.
const mltest::TrainOptions kSteps{.expectFinite = false, .expectFullBatch = false};

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
      const Trained cpu = train(*strategy(model, "cpu:1", p, fitting()), data(), 60, 5, 1, kSteps);
      const Trained gpu = train(*strategy(model, "gpu:0", p, fitting()), data(), 60, 5, 1, kSteps);
      const Trained f32 = train(*strategy(model, "gpu:0", ml::Precision::Float32), data(), 60, 5, 1, kSteps);
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
    const Trained one = train(*strategy(cnn(), "gpu:0x1", p, fitting()), data(), 60, 4, 1, kSteps);
    const Trained f32 = train(*strategy(cnn(), "gpu:0x1", ml::Precision::Float32), data(), 60, 4, 1, kSteps);
    const Trained four = train(*strategy(cnn(), "gpu:0x4", p, fitting()), data(), 60, 4, 1, kSteps);
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
  const Trained t = train(*s, data(), 40, 15, 1, kSteps);
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
  const Trained cpu = train(*strategy(mlp(), "cpu:2", ml::Precision::MixedFloat16, ls), data(), 40, 15, 1, kSteps);
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
      so.bucketBytes = 256;
      so.allreduceDtype = dtype;
      ml::OptimizerSpec o;
      o.kind = ml::OptimizerKind::Sgd;  // without momentum
      return mltest::makeStrategy(mlp(), devices, o, so);
    };
    auto wire = make(ml::AllReduceDtype::Bfloat16);
    EXPECT_NE(wire->allReducePath().find("bfloat16 on the wire"), std::string::npos) << wire->allReducePath();
    const Trained f32 = train(*make(ml::AllReduceDtype::Float32), data(), 60, 5, 1, kSteps);
    const Trained bf = train(*wire, data(), 60, 5, 1, kSteps);
    const double d = relDiff(bf.weights, f32.weights);
    EXPECT_GT(d, 1e-6) << "the wire format changed nothing";
    EXPECT_LT(d, 1e-2);
  }
}

TEST_F(GpuMixedPrecision, Float32PolicyIsTheFloat32Path) {
  ml::LossScaling ls;
  ls.enabled = true;  // ignored: only mixed_float16 scales the loss
  const Trained a = train(*strategy(cnn(), "gpu:0x2", ml::Precision::Float32), data(), 50, 4, 1, kSteps);
  const Trained b = train(*strategy(cnn(), "gpu:0x2", ml::Precision::Float32, ls), data(), 50, 4, 1, kSteps);
  EXPECT_EQ(a.checksums, b.checksums);
}

}  // namespace
