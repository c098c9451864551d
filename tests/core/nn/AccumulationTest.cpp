// Parameter gradients ACCUMULATE, activation gradients OVERWRITE: two backward passes without
// zeroGrads give twice the gradient (catches "=" where "+=" belongs, and the reverse in dx).
#include <gtest/gtest.h>

#include "NnTestUtil.h"
#include "nn/Loss.h"
#include "nn/Sequential.h"

namespace ml {
namespace {

using test::dense;
using test::layerSpec;
using test::modelSpec;
using test::randomVector;

struct Pass {
  Sequential model;
  Loss loss;
  std::vector<float> x, t;
  std::vector<int64_t> ids;
  StepContext ctx;
  int64_t n;

  Pass(const ModelSpec& spec, const std::string& lossName, int64_t rows)
      : model(spec), loss(Loss::make(parseLossKind(lossName).value(), false)), n(rows) {
    model.initialize(5);
    model.configureLoss(loss);
    x = randomVector(static_cast<size_t>(n * model.inFeatures()), 9);
    for (int64_t r = 0; r < n; ++r) {
      if (loss.isClassification())
        t.push_back(static_cast<float>(r % model.outFeatures()));
      else
        for (int64_t j = 0; j < model.outFeatures(); ++j) t.push_back(0.25f * static_cast<float>(j - r));
      ids.push_back(100 + r);
    }
    ctx.training = true;
    ctx.seed = 1;
    ctx.step = 4;
    ctx.sampleIds = ids.data();
  }
  void run() {
    const float* y = model.forward(x.data(), n, ctx);
    loss.compute(y, t.data(), n, model.outFeatures(), model.outputGrad(n));
    model.backward(x.data(), n, ctx);
  }
};

const ModelSpec kDeep =
    modelSpec({3, 4}, {layerSpec("Flatten"), dense(6, "relu"), layerSpec("Dropout", {{"rate", 0.3}}), dense(5, "tanh"),
                       layerSpec("Activation", {{"activation", "sigmoid"}}), dense(4, "softmax")});

TEST(GradientAccumulation, OneRowTwoPassesGiveExactlyTwice) {
  // With one row every gradient entry is a single product, so doubling is exact.
  Pass p(kDeep, "sparse_categorical_crossentropy", 1);
  p.model.zeroGrads();
  p.run();
  const std::vector<float> once(p.model.grads().begin(), p.model.grads().end());
  p.run();
  int nonZero = 0;
  for (size_t i = 0; i < once.size(); ++i) {
    EXPECT_EQ(p.model.grads()[i], 2.0f * once[i]) << "param " << i;
    nonZero += once[i] != 0.0f;
  }
  EXPECT_GT(nonZero, static_cast<int>(once.size()) / 3);
}

TEST(GradientAccumulation, BatchTwoPassesGiveTwice) {
  for (const char* lossName : {"sparse_categorical_crossentropy", "mean_squared_error"}) {
    Pass p(kDeep, lossName, 8);
    p.model.zeroGrads();
    p.run();
    const std::vector<float> once(p.model.grads().begin(), p.model.grads().end());
    p.run();
    for (size_t i = 0; i < once.size(); ++i)
      EXPECT_NEAR(p.model.grads()[i], 2.0f * once[i], 1e-6f + 1e-5f * std::fabs(once[i])) << lossName << " param " << i;
    p.model.zeroGrads();
    for (float g : p.model.grads()) EXPECT_EQ(g, 0.0f);
    p.run();
    for (size_t i = 0; i < once.size(); ++i) EXPECT_EQ(p.model.grads()[i], once[i]) << "after zeroGrads, param " << i;
  }
}

TEST(GradientAccumulation, DiscardGradsWritesWhatZeroGradsWouldOverStaleValues) {
  // Dense overwrites its slice; BatchNormalization does not, so Sequential zeroes its slice first.
  const ModelSpec spec = modelSpec(
      {3, 4}, {layerSpec("Flatten"), dense(6, "relu"), layerSpec("BatchNormalization"), dense(5, "tanh"), dense(4, "softmax")});
  Pass ref(spec, "sparse_categorical_crossentropy", 8);
  ref.model.zeroGrads();
  ref.run();
  Pass p(spec, "sparse_categorical_crossentropy", 8);
  for (float& g : p.model.grads()) g = 1e6f;  // stale values a step would leave
  p.model.discardGrads();
  p.run();
  for (size_t i = 0; i < ref.model.grads().size(); ++i) EXPECT_EQ(p.model.grads()[i], ref.model.grads()[i]) << "param " << i;
  // The next pass adds again; a discard with no backward after it reads as zeros once settled.
  p.run();
  for (size_t i = 0; i < ref.model.grads().size(); ++i)
    EXPECT_NEAR(p.model.grads()[i], 2.0f * ref.model.grads()[i], 1e-6f + 1e-5f * std::fabs(ref.model.grads()[i])) << i;
  p.model.discardGrads();
  p.model.settleGrads();
  for (float g : p.model.grads()) EXPECT_EQ(g, 0.0f);
}

TEST(GradientAccumulation, MicroBatchesAddUpToTheFullBatch) {
  // Sums, not means: rows [0, 4) + rows [4, 8) = rows [0, 8) (Dropout keyed by sample id).
  Pass full(kDeep, "sparse_categorical_crossentropy", 8);
  full.model.zeroGrads();
  full.run();
  Pass half(kDeep, "sparse_categorical_crossentropy", 8);
  half.model.zeroGrads();
  const int64_t in = half.model.inFeatures();
  for (int64_t start : {0, 4}) {
    StepContext ctx = half.ctx;
    ctx.sampleIds = half.ids.data() + start;
    const float* y = half.model.forward(half.x.data() + start * in, 4, ctx);
    half.loss.compute(y, half.t.data() + start, 4, half.model.outFeatures(), half.model.outputGrad(4));
    half.model.backward(half.x.data() + start * in, 4, ctx);
  }
  for (size_t i = 0; i < full.model.grads().size(); ++i)
    EXPECT_NEAR(half.model.grads()[i], full.model.grads()[i], 1e-5f + 1e-5f * std::fabs(full.model.grads()[i])) << i;
}

TEST(GradientAccumulation, OnLayerDoneReportsEveryParameterLayerOnceTopDown) {
  Pass p(kDeep, "sparse_categorical_crossentropy", 2);
  p.model.zeroGrads();
  const float* y = p.model.forward(p.x.data(), p.n, p.ctx);
  p.loss.compute(y, p.t.data(), p.n, p.model.outFeatures(), p.model.outputGrad(p.n));
  std::vector<size_t> done;
  p.model.backward(p.x.data(), p.n, p.ctx, [&](size_t i) { done.push_back(i); });
  EXPECT_EQ(done, (std::vector<size_t>{5, 3, 1}));
}

}  // namespace
}  // namespace ml
