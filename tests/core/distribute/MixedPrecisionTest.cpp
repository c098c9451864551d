// Mixed precision in the mirrored step: the invariant under each policy (N replicas give the
// weights of one, replicas bit-identical), float32 untouched by the policy machinery, dynamic loss
// scaling (skip and halve on an overflow, decided after the all-reduce so that every replica does
// the same; grow after the set number of finite steps), and float16's lost gradients without it.
#include <gtest/gtest.h>

#include <cmath>

#include "distribute/Faults.h"
#include "distribute/MirroredStrategy.h"
#include "random/Rng.h"
#include "support/Strategies.h"
#include "support/TestData.h"
#include "support/Training.h"
#include "train/Trainer.h"

namespace {

using mltest::makeClassification;
using mltest::makeModel;
using mltest::relDiff;
using mltest::train;

// n CPU replicas of makeModel(false) under policy p, with Adam.
std::unique_ptr<ml::MirroredStrategy> strategy(int n, ml::Precision p, ml::LossScaling ls = {}, const std::string& algo = "ring",
                                               bool shard = false) {
  ml::StrategyOptions so;
  so.allreduce = ml::parseAllReduceAlgo(algo);
  so.bucketBytes = 256;  // several buckets: the scattered chunks are checked where they were summed
  so.shardOptimizer = shard;
  so.precision = p;
  so.lossScaling = ls;
  return mltest::makeStrategy(makeModel(false), "cpu:" + std::to_string(n), mltest::optimizer("adam"), so);
}

const ml::Dataset& data() {
  static const ml::Dataset d = makeClassification(600);
  return d;
}

using Trained = mltest::Trained;

// Steps at 0.01 that may be skipped (loss scaling): train() checks only the replicas' bits.
const mltest::TrainOptions kSteps{.expectFinite = false, .expectFullBatch = false};

TEST(MixedPrecision, Float32PolicyIsTheOldPathBitForBit) {
  // The default options (no policy at all) and an explicit float32 policy with loss scaling
  // settings present: the same bits after every step.
  ml::LossScaling ls;
  ls.enabled = true;  // ignored: only mixed_float16 scales the loss
  auto a = strategy(2, ml::Precision::Float32);
  auto b = strategy(2, ml::Precision::Float32, ls);
  const Trained ta = train(*a, data(), 50, 5, 1, kSteps), tb = train(*b, data(), 50, 5, 1, kSteps);
  EXPECT_EQ(ta.checksums, tb.checksums);
  EXPECT_EQ(tb.steps.back().lossScale, 0.0);
  // ... and a low-precision policy really changes the numbers.
  auto c = strategy(2, ml::Precision::MixedBfloat16);
  EXPECT_NE(train(*c, data(), 50, 5, 1, kSteps).checksums.back(), ta.checksums.back());
}

TEST(MixedPrecision, NReplicasGiveTheWeightsOfOneUnderEachPolicy) {
  // A scale whose products fit float16 at every shard size: each replica's kernel gradient is a
  // float16 GEMM's output, so with a larger one the whole batch of one replica overflows where the
  // smaller shards of several do not, and the two runs skip different steps (as on real GPUs).
  // 1024 x 60: backward's values are the mean loss's (B = 60) times the scale, 1024 x the sum's.
  ml::LossScaling ls;
  ls.enabled = true;
  ls.initial = 1024 * 60;
  for (ml::Precision p : {ml::Precision::MixedBfloat16, ml::Precision::MixedFloat16}) {
    SCOPED_TRACE(ml::toString(p));
    auto one = strategy(1, p, ls);
    const Trained ref = train(*one, data(), 60, 4, 1, kSteps);
    auto f32 = strategy(1, ml::Precision::Float32);
    const double policyEffect = relDiff(train(*f32, data(), 60, 4, 1, kSteps).weights, ref.weights);
    for (int n : {2, 3}) {
      for (const char* algo : {"ring", "reduce-to-one"}) {
        auto s = strategy(n, p, ls, algo, n == 3);
        const Trained t = train(*s, data(), 60, 4, 1, kSteps);
        for (size_t k = 0; k < t.steps.size(); ++k) EXPECT_EQ(t.steps[k].skipped, ref.steps[k].skipped) << k;
        // The shards' sums come in another order, so a value near a rounding boundary of the low
        // format may round the other way: the weights agree far closer than the policy moves them.
        const double d = relDiff(t.weights, ref.weights);
        EXPECT_LT(d, 2e-3) << n << " replicas, " << algo;
        EXPECT_LT(d, policyEffect / 4) << n << " replicas, " << algo << " (policy effect " << policyEffect << ")";
      }
    }
  }
}

TEST(MixedPrecision, LossScalingSkipsAndHalvesOnAnInjectedOverflowOnEveryReplica) {
  ml::LossScaling ls;
  ls.enabled = true;
  ls.initial = 1024;
  ls.growthSteps = 3;
  auto s = strategy(3, ml::Precision::MixedFloat16, ls);
  s->setFaults(ml::parseFaults({"nan:cpu:1@step=3"}, s->options().devices));
  const Trained t = train(*s, data(), 48, 9, 1, kSteps);
  std::vector<double> scales;
  std::vector<bool> skipped;
  for (const auto& r : t.steps) {
    EXPECT_TRUE(r.finite);  // a skipped step is not a divergence while the scale can still halve
    scales.push_back(r.lossScale);
    skipped.push_back(r.skipped);
  }
  // Steps 1-2 at 1024; step 3's summed gradient holds replica 1's NaN: skipped on all three
  // replicas, scale halved; three finite steps (4-6) double it back for step 7.
  EXPECT_EQ(scales, (std::vector<double>{1024, 1024, 1024, 512, 512, 512, 1024, 1024, 1024}));
  EXPECT_EQ(skipped, (std::vector<bool>{false, false, true, false, false, false, false, false, false}));
  EXPECT_EQ(t.checksums[2], t.checksums[1]);  // no replica changed a weight at step 3
  EXPECT_NE(t.checksums[3], t.checksums[2]);
  EXPECT_EQ(s->lossScale(), 2048);  // steps 7-9: three more finite steps
}

TEST(MixedPrecision, ARealFloat16OverflowHalvesTheScaleUntilTheGradientsFit) {
  // 2^24 times the per-sample loss gradients overflows float16 in backward: the first steps are
  // skipped, halving, until the scaled gradients fit, and the weights stay as they were until then.
  // Backward's values are the mean loss's (B = 40) times the scale: 40 x 2^24 is 2^24 x the sum's.
  ml::LossScaling ls;
  ls.enabled = true;
  ls.initial = 40 * std::ldexp(1.0, 24);
  auto s = strategy(2, ml::Precision::MixedFloat16, ls);
  const uint64_t initial = s->checksums()[0];
  const Trained t = train(*s, data(), 40, 15, 1, kSteps);
  size_t firstGood = 0;
  while (firstGood < t.steps.size() && t.steps[firstGood].skipped) ++firstGood;
  ASSERT_GE(firstGood, 3u);  // at least 2^24 .. 2^22 overflow
  ASSERT_LT(firstGood, t.steps.size());
  for (size_t k = 0; k < firstGood; ++k) {
    EXPECT_EQ(t.steps[k].lossScale, 40 * std::ldexp(1.0, 24 - static_cast<int>(k)));
    EXPECT_EQ(t.checksums[k], initial) << "step " << k + 1;
  }
  EXPECT_NE(t.checksums[firstGood], initial);
  for (size_t k = firstGood; k < t.steps.size(); ++k) {  // then it trains at that scale
    EXPECT_FALSE(t.steps[k].skipped) << "step " << k + 1;
    EXPECT_EQ(t.steps[k].lossScale, t.steps[firstGood].lossScale);
  }
  EXPECT_LT(t.steps.back().lossSum, t.steps[firstGood].lossSum);
}

// A regression whose second layer has tiny weights: the gradient reaching the first layer,
// dh = dz W2^T, is about 1e-8, below half of float16's smallest subnormal (2^-25).
struct TinyGradients {
  ml::Dataset data;
  ml::ModelSpec model;
  TinyGradients() {
    data.name = "tiny gradients";
    data.sampleShape = {8};
    data.size = 256;
    ml::Rng rng(21);
    for (int64_t i = 0; i < data.size; ++i) {
      double t = 0;
      for (int f = 0; f < 8; ++f) {
        const float v = static_cast<float>(rng.uniform(-1, 1));
        data.x.push_back(v);
        t += v * (f % 3 - 1);
      }
      data.y.push_back(static_cast<float>(0.002 * t));
    }
    model.inputShape = {8};
    model.layers.push_back(ml::makeLayerSpec("Dense", {{"units", 8}, {"activation", "linear"}}));
    model.layers.push_back(ml::makeLayerSpec("Dense", {{"units", 1}, {"activation", "linear"}}));
  }
};

struct TinyRun {
  std::vector<float> before, after;  // the first layer's kernel
  bool skipped = false;
  int moved() const {
    int n = 0;
    for (size_t i = 0; i < after.size(); ++i) n += after[i] != before[i] ? 1 : 0;
    return n;
  }
};

// One step of Adam with a negligible epsilon: each weight moves by the rate times the sign of its
// gradient, however small that is, and not at all when its gradient is exactly 0.
TinyRun trainTiny(ml::Precision p, bool scaling, float w2 = 1e-6f) {
  static const TinyGradients tg;
  ml::StrategyOptions so;
  so.precision = p;
  so.lossScaling.enabled = scaling;
  ml::OptimizerSpec o;
  o.kind = ml::OptimizerKind::Adam;
  o.epsilon = 1e-30;
  auto owned = mltest::makeStrategy(tg.model, "cpu:2", o, so, 4, ml::Loss::make(ml::LossKind::MeanSquaredError, false));
  ml::MirroredStrategy& s = *owned;
  auto params = s.model(0).params();
  for (size_t i = 72; i < 80; ++i) params[i] = w2;  // W2, after W1 (8 x 8) and b1 (8)
  s.broadcastParameters();
  TinyRun r;
  r.before.assign(params.begin(), params.begin() + 64);
  const auto order = ml::epochOrder(tg.data.size, 5, 1);
  const auto res = s.trainStep(tg.data, std::span<const int64_t>(order).subspan(0, 128), 1, 1e-3f, 1);
  EXPECT_TRUE(res.finite);
  r.skipped = res.skipped;
  auto after = s.model(0).params();
  r.after.assign(after.begin(), after.begin() + 64);
  return r;
}

TEST(MixedPrecision, Float16WithoutLossScalingLosesTinyGradientsAndScalingKeepsThem) {
  const TinyRun f32 = trainTiny(ml::Precision::Float32, false);
  const TinyRun raw = trainTiny(ml::Precision::MixedFloat16, false);
  const TinyRun scaled = trainTiny(ml::Precision::MixedFloat16, true);
  // float32: every weight of the first layer has a (tiny) gradient and moves.
  EXPECT_EQ(f32.moved(), 64);
  // float16 without scaling: all of them underflowed to exactly 0; the first layer did not move.
  EXPECT_EQ(raw.moved(), 0);
  // float16 with loss scaling (2^15): no step skipped, and the first layer moves as in float32.
  EXPECT_FALSE(scaled.skipped);
  EXPECT_EQ(scaled.moved(), 64);
  int sameDirection = 0;
  for (size_t i = 0; i < 64; ++i)
    sameDirection += (scaled.after[i] - scaled.before[i]) * (f32.after[i] - f32.before[i]) > 0 ? 1 : 0;
  EXPECT_GE(sameDirection, 60) << "of 64 first-layer weights moved the way float32 moved them";
}
// Under float16 the values backward rounds are those a framework has: of the mean loss over the
// global batch (128 here), not of the per-sample sum. With W2 = 1e-4 the first layer's per-sample
// gradient is about 4e-7, which float16 holds (subnormal), but a 128th of it is below 2^-25: it
// underflows without scaling, as on a GPU, and survives with it. With W2 = 0.1 nothing underflows.
TEST(MixedPrecision, Float16RoundsTheGradientsOfTheMeanLossAsAFrameworkDoes) {
  EXPECT_EQ(trainTiny(ml::Precision::MixedFloat16, false, 1e-4f).moved(), 0);
  EXPECT_EQ(trainTiny(ml::Precision::MixedFloat16, true, 1e-4f).moved(), 64);
  EXPECT_EQ(trainTiny(ml::Precision::MixedFloat16, false, 0.1f).moved(), 64);
}

}  // namespace
