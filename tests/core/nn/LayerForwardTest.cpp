// Forward passes against hand-computed values: Dense with set weights, the activations,
// softmax, Dropout (identity in inference, inverted and keyed by sample id in training), losses.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "Error.h"
#include "NnTestUtil.h"
#include "nn/Dense.h"
#include "nn/LayerKind.h"
#include "nn/Loss.h"
#include "nn/Sequential.h"
#include "nn/SimpleLayers.h"

namespace ml {
namespace {

using test::dense;
using test::layerSpec;
using test::modelSpec;
using test::randomVector;

// W (2, 3) = [[1, 2, 3], [4, 5, 6]], b = [0.5, -0.5, 1].
struct DenseFixture {
  Dense d;
  std::vector<float> params{1, 2, 3, 4, 5, 6, 0.5f, -0.5f, 1.0f}, grads = std::vector<float>(9, 0.0f);
  explicit DenseFixture(Act act) : d(3, act) {
    d.name = "d";
    d.build({2});
    d.bind(params.data(), grads.data());
  }
};

TEST(DenseForward, LinearHandValues) {
  DenseFixture f(Act::Linear);
  ASSERT_EQ(f.d.paramCount(), 9);
  EXPECT_EQ(f.d.kernel(), f.params.data());
  EXPECT_EQ(f.d.bias(), f.params.data() + 6);
  // x rows [1, 0.5] and [-1, 0.25]:
  //   [1 + 2, 2 + 2.5, 3 + 3] + b = [3.5, 4, 7]
  //   [-1 + 1, -2 + 1.25, -3 + 1.5] + b = [0.5, -1.25, -0.5]
  const std::vector<float> x = {1.0f, 0.5f, -1.0f, 0.25f};
  std::vector<float> y(6);
  f.d.forward(x.data(), y.data(), 2, StepContext{});
  const std::vector<float> want = {3.5f, 4.0f, 7.0f, 0.5f, -1.25f, -0.5f};
  for (size_t i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(y[i], want[i]) << i;
}

TEST(DenseForward, ReluHandValues) {
  DenseFixture f(Act::Relu);
  const std::vector<float> x = {1.0f, 0.5f, -1.0f, 0.25f};
  std::vector<float> y(6);
  f.d.forward(x.data(), y.data(), 2, StepContext{});
  const std::vector<float> want = {3.5f, 4.0f, 7.0f, 0.5f, 0.0f, 0.0f};
  for (size_t i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(y[i], want[i]) << i;
}

TEST(DenseForward, NoBias) {
  Dense d(3, Act::Linear, /*useBias=*/false);
  d.name = "d";
  d.build({2});
  ASSERT_EQ(d.paramCount(), 6);
  std::vector<float> params{1, 2, 3, 4, 5, 6}, grads(6);
  d.bind(params.data(), grads.data());
  EXPECT_EQ(d.bias(), nullptr);
  const std::vector<float> x = {1.0f, 0.5f};
  std::vector<float> y(3, 123.0f);  // garbage in y must not leak into the output
  d.forward(x.data(), y.data(), 1, StepContext{});
  EXPECT_FLOAT_EQ(y[0], 3.0f);
  EXPECT_FLOAT_EQ(y[1], 4.5f);
  EXPECT_FLOAT_EQ(y[2], 6.0f);
}

TEST(DenseForward, BuildRejectsNonFlatInputAndBadUnits) {
  Dense d(3, Act::Linear);
  d.name = "hidden";
  try {
    d.build({28, 28});
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("hidden"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Flatten"), std::string::npos) << e.what();
  }
  Dense bad(0, Act::Linear);
  bad.name = "zero";
  EXPECT_THROW(bad.build({4}), UserError);
}

TEST(Activations, ElementwiseHandValues) {
  std::vector<float> v = {-2.0f, -0.5f, 0.0f, 1.0f, 2.0f};
  auto apply = [&](Act a) {
    auto y = v;
    activationForward(a, y.data(), 1, static_cast<int64_t>(y.size()));
    return y;
  };
  const auto lin = apply(Act::Linear);
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(lin[i], v[i]);
  const auto relu = apply(Act::Relu);
  EXPECT_EQ(relu, (std::vector<float>{0.0f, 0.0f, 0.0f, 1.0f, 2.0f}));
  const auto sig = apply(Act::Sigmoid);
  const std::vector<float> sigWant = {0.11920292f, 0.37754067f, 0.5f, 0.73105858f, 0.88079708f};
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(sig[i], sigWant[i], 1e-7) << i;
  const auto th = apply(Act::Tanh);
  const std::vector<float> tanhWant = {-0.96402758f, -0.46211716f, 0.0f, 0.76159416f, 0.96402758f};
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(th[i], tanhWant[i], 1e-7) << i;
}

TEST(Activations, SoftmaxRowsHandValuesAndStability) {
  // Row 0: softmax([1, 2, 3]) = [0.09003057, 0.24472847, 0.66524096]; row 1 is row 0 + 1000 (same
  // result when the maximum is subtracted); row 2 is uniform.
  std::vector<float> y = {1, 2, 3, 1001, 1002, 1003, -7, -7, -7};
  activationForward(Act::Softmax, y.data(), 3, 3);
  const float want[3] = {0.09003057f, 0.24472847f, 0.66524096f};
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < 3; ++j) EXPECT_NEAR(y[static_cast<size_t>(r * 3 + j)], want[j], 1e-7) << r << "," << j;
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(y[static_cast<size_t>(6 + j)], 1.0f / 3.0f, 1e-7);
  for (int r = 0; r < 3; ++r) EXPECT_NEAR(y[r * 3] + y[r * 3 + 1] + y[r * 3 + 2], 1.0f, 1e-6) << r;
}

TEST(Activations, SoftmaxDenseRowsSumToOne) {
  auto logits = randomVector(8 * 10, 3, -5.0, 5.0);
  activationForward(Act::Softmax, logits.data(), 8, 10);
  for (int r = 0; r < 8; ++r) {
    double s = 0;
    for (int j = 0; j < 10; ++j) {
      const float p = logits[static_cast<size_t>(r * 10 + j)];
      EXPECT_GT(p, 0.0f);
      s += p;
    }
    EXPECT_NEAR(s, 1.0, 1e-6) << r;
  }
}

TEST(Activations, ParseNamesAndErrors) {
  EXPECT_EQ(parseActivation("linear", "x"), Act::Linear);
  EXPECT_EQ(parseActivation("", "x"), Act::Linear);
  EXPECT_EQ(parseActivation("relu", "x"), Act::Relu);
  EXPECT_EQ(parseActivation("softmax", "x"), Act::Softmax);
  for (Act a : {Act::Linear, Act::Relu, Act::Sigmoid, Act::Tanh, Act::Softmax}) EXPECT_EQ(parseActivation(toString(a), "x"), a);
  try {
    parseActivation("gelu", "layer 2 'dense'");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("layer 2 'dense'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("gelu"), std::string::npos) << e.what();
  }
}

TEST(ActivationLayer, ForwardCopiesAndApplies) {
  ActivationLayer a(Act::Relu);
  a.name = "a";
  EXPECT_EQ(a.build({2, 3}), (Shape{2, 3}));
  const std::vector<float> x = {-1, 2, -3, 4, 0.5f, -0.5f};
  std::vector<float> y(6);
  a.forward(x.data(), y.data(), 1, StepContext{});
  EXPECT_EQ(y, (std::vector<float>{0, 2, 0, 4, 0.5f, 0}));
  EXPECT_EQ(x[0], -1.0f);  // input untouched
}

TEST(LeakyReLU, HandValuesAndSlopeBelowZero) {
  const LayerSpec spec = layerSpec("LeakyReLU", {{"negative_slope", 0.25}});
  const auto l = makeLayer(spec, 0);
  EXPECT_EQ(l->build({2, 3}), (Shape{2, 3}));
  EXPECT_EQ(l->paramCount(), 0);
  const std::vector<float> x = {-4, 2, 0, 8, -0.5f, 1};
  std::vector<float> y(6);
  l->forward(x.data(), y.data(), 1, StepContext{});
  EXPECT_EQ(y, (std::vector<float>{-1, 2, 0, 8, -0.125f, 1}));
  std::vector<float> dy = {1, 1, 1, 2, 4, 3}, dx(6);
  l->backward(x.data(), y.data(), dy.data(), dx.data(), 1, StepContext{});
  EXPECT_EQ(dx, (std::vector<float>{0.25f, 1, 0.25f, 2, 1, 3}));              // at 0 the slope, as TF and PyTorch
  EXPECT_EQ(layerSpec("LeakyReLU").as<LeakyReLUSpec>()->negativeSlope, 0.3);  // Keras 3's default
}

TEST(LeakyReLU, RefusesANegativeSlopeByName) {
  const LayerSpec spec = layerSpec("LeakyReLU", {{"negative_slope", -1}}, "leaky");
  try {
    makeLayer(spec, 2);
    FAIL() << "a negative slope was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("negative_slope"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("leaky"), std::string::npos) << e.what();
  }
}

TEST(Flatten, ShapeAndIdentity) {
  Flatten f;
  f.name = "flatten";
  EXPECT_EQ(f.build({28, 28}), (Shape{784}));
  EXPECT_TRUE(f.isReshape());
  EXPECT_EQ(f.paramCount(), 0);
}

// ---- Dropout -----------------------------------------------------------------------------------

Dropout makeDropout(double rate, Shape shape = {20}) {
  Dropout d(rate, 0xABCDu);
  d.name = "dropout";
  d.build(shape);
  return d;
}

TEST(Dropout, InferenceIsIdentity) {
  Dropout d = makeDropout(0.5);
  const auto x = randomVector(4 * 20, 1);
  std::vector<float> y(x.size());
  StepContext ctx;  // training = false
  d.forward(x.data(), y.data(), 4, ctx);
  EXPECT_EQ(y, x);
  std::vector<float> dy = randomVector(x.size(), 2), dx(x.size());
  d.backward(x.data(), y.data(), dy.data(), dx.data(), 4, ctx);
  EXPECT_EQ(dx, dy);
}

TEST(Dropout, RateZeroIsIdentityInTraining) {
  Dropout d = makeDropout(0.0);
  const auto x = randomVector(3 * 20, 1);
  std::vector<float> y(x.size());
  StepContext ctx;
  ctx.training = true;
  d.forward(x.data(), y.data(), 3, ctx);
  EXPECT_EQ(y, x);
}

TEST(Dropout, TrainingDropsAboutRateAndScalesKept) {
  for (double rate : {0.2, 0.5, 0.8}) {
    Dropout d = makeDropout(rate);
    const int64_t n = 1000, k = 20;
    std::vector<int64_t> ids(n);
    for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = i;
    StepContext ctx;
    ctx.training = true;
    ctx.seed = 42;
    ctx.step = 1;
    ctx.sampleIds = ids.data();
    const std::vector<float> x(static_cast<size_t>(n * k), 1.5f);
    std::vector<float> y(x.size());
    d.forward(x.data(), y.data(), n, ctx);
    const float kept = static_cast<float>(1.5 / (1.0 - rate));
    int64_t zeros = 0;
    for (float v : y) {
      if (v == 0.0f)
        ++zeros;
      else
        EXPECT_FLOAT_EQ(v, kept);
    }
    const double share = static_cast<double>(zeros) / static_cast<double>(y.size());
    // 20,000 Bernoulli draws: std of the share is below 0.0036.
    EXPECT_NEAR(share, rate, 0.02) << "rate " << rate;
    // Every column is dropped sometimes (no element position is stuck).
    for (int64_t j = 0; j < k; ++j) {
      int64_t z = 0;
      for (int64_t r = 0; r < n; ++r) z += y[static_cast<size_t>(r * k + j)] == 0.0f;
      EXPECT_NEAR(static_cast<double>(z) / n, rate, 0.08) << "column " << j << " rate " << rate;
    }
    // The backward uses the same mask and scale.
    std::vector<float> dy(x.size(), 1.0f), dx(x.size());
    d.backward(x.data(), y.data(), dy.data(), dx.data(), n, ctx);
    for (size_t i = 0; i < y.size(); ++i) EXPECT_FLOAT_EQ(dx[i], y[i] == 0.0f ? 0.0f : kept / 1.5f) << i;
  }
}

TEST(Dropout, MaskDependsOnSampleIdNotRowPosition) {
  Dropout d = makeDropout(0.5, {64});
  const auto a = randomVector(64, 1, 0.5, 1.0), b = randomVector(64, 2, 0.5, 1.0);
  StepContext ctx;
  ctx.training = true;
  ctx.seed = 7;
  ctx.step = 12;

  std::vector<float> ab(a);
  ab.insert(ab.end(), b.begin(), b.end());
  const std::vector<int64_t> idsAB = {1001, 2002};
  std::vector<float> yAB(128);
  ctx.sampleIds = idsAB.data();
  d.forward(ab.data(), yAB.data(), 2, ctx);

  const std::vector<int64_t> idsB = {2002};
  std::vector<float> yB(64);
  ctx.sampleIds = idsB.data();
  d.forward(b.data(), yB.data(), 1, ctx);
  for (size_t j = 0; j < 64; ++j) EXPECT_EQ(yB[j], yAB[64 + j]) << j;

  // Reversed order [b, a]: each row keeps its own mask.
  std::vector<float> ba(b);
  ba.insert(ba.end(), a.begin(), a.end());
  const std::vector<int64_t> idsBA = {2002, 1001};
  std::vector<float> yBA(128);
  ctx.sampleIds = idsBA.data();
  d.forward(ba.data(), yBA.data(), 2, ctx);
  for (size_t j = 0; j < 64; ++j) {
    EXPECT_EQ(yBA[j], yAB[64 + j]) << j;
    EXPECT_EQ(yBA[64 + j], yAB[j]) << j;
  }

  // Same (seed, step, id) again: same mask; another step or seed: another mask.
  auto maskOf = [&](uint64_t seed, uint64_t step) {
    StepContext c = ctx;
    c.seed = seed;
    c.step = step;
    c.sampleIds = idsB.data();
    std::vector<float> y(64);
    d.forward(b.data(), y.data(), 1, c);
    std::vector<bool> m;
    for (float v : y) m.push_back(v != 0.0f);
    return m;
  };
  EXPECT_EQ(maskOf(7, 12), maskOf(7, 12));
  EXPECT_NE(maskOf(7, 12), maskOf(7, 13));
  EXPECT_NE(maskOf(7, 12), maskOf(8, 12));
}

TEST(Dropout, TwoDropoutLayersInAModelGetDifferentMasks) {
  // Layers are salted by position: the same sample must not be dropped identically in both.
  Sequential m(modelSpec({64}, {layerSpec("Dropout", {{"rate", 0.5}}), layerSpec("Dropout", {{"rate", 0.5}})}));
  Sequential one(modelSpec({64}, {layerSpec("Dropout", {{"rate", 0.5}})}));
  const std::vector<float> x(64, 1.0f);
  const std::vector<int64_t> ids = {5};
  StepContext ctx;
  ctx.training = true;
  ctx.seed = 3;
  ctx.sampleIds = ids.data();
  const float* y1 = one.forward(x.data(), 1, ctx);
  const std::vector<float> first(y1, y1 + 64);
  const float* y2 = m.forward(x.data(), 1, ctx);
  int kept = 0;
  for (int j = 0; j < 64; ++j) kept += y2[j] != 0.0f;
  // With one mask applied twice the survivors would be the ~32 of the first; with independent masks ~16.
  int keptFirst = 0;
  for (float v : first) keptFirst += v != 0.0f;
  EXPECT_LT(kept, keptFirst);
  EXPECT_GT(kept, 4);
}

TEST(Dropout, RejectsBadRate) {
  Dropout d(1.0, 1);
  d.name = "drop";
  EXPECT_THROW(d.build({4}), UserError);
  EXPECT_THROW(Sequential(modelSpec({4}, {layerSpec("Dropout", {{"rate", -0.1}})})), UserError);
}

// ---- Losses: hand values -----------------------------------------------------------------------

TEST(LossValues, HandComputed) {
  const std::vector<float> logits = {1, 2, 3};
  const std::vector<float> probs = {0.09003057f, 0.24472847f, 0.66524096f};
  const std::vector<float> cls = {2};
  // -log(softmax([1,2,3])[2]) = 0.40760596
  EXPECT_NEAR(Loss::make(LossKind::SparseCategoricalCrossentropy, true).compute(logits.data(), cls.data(), 1, 3, nullptr),
              0.40760596, 1e-6);
  EXPECT_NEAR(Loss::make(LossKind::SparseCategoricalCrossentropy, false).compute(probs.data(), cls.data(), 1, 3, nullptr),
              0.40760596, 1e-6);
  // Unnormalised probabilities are normalised first (Keras): [0.2, 0.2, 0.4] -> [0.25, 0.25, 0.5].
  const std::vector<float> unnorm = {0.2f, 0.2f, 0.4f};
  EXPECT_NEAR(Loss::make(LossKind::SparseCategoricalCrossentropy, false).compute(unnorm.data(), cls.data(), 1, 3, nullptr),
              std::log(2.0), 1e-6);
  // Categorical with soft target [0.5, 0, 0.5] on [0.25, 0.25, 0.5]: -(0.5 log .25 + 0.5 log .5) = 1.5 log 2.
  const std::vector<float> soft = {0.5f, 0.0f, 0.5f};
  EXPECT_NEAR(Loss::make(LossKind::CategoricalCrossentropy, false).compute(unnorm.data(), soft.data(), 1, 3, nullptr),
              1.5 * std::log(2.0), 1e-6);
  // MSE: rows [1, 2] vs [0, 4] -> (1 + 4) / 2 = 2.5; [0, 0] vs [0, 1] -> 0.5; the SUM is 3.
  const std::vector<float> pred = {1, 2, 0, 0}, target = {0, 4, 0, 1};
  std::vector<float> g(4);
  EXPECT_DOUBLE_EQ(Loss::make(LossKind::MeanSquaredError, false).compute(pred.data(), target.data(), 2, 2, g.data()), 3.0);
  EXPECT_EQ(g, (std::vector<float>{1.0f, -2.0f, 0.0f, -1.0f}));  // 2 (p - t) / k
}

TEST(LossValues, SumsOverRowsNotMeans) {
  const std::vector<float> logits = {1, 2, 3, 1, 2, 3};
  const std::vector<float> cls = {2, 2};
  const Loss l = Loss::make(LossKind::SparseCategoricalCrossentropy, true);
  EXPECT_NEAR(l.compute(logits.data(), cls.data(), 2, 3, nullptr), 2 * 0.40760596, 1e-6);
}

TEST(LossValues, ClipsZeroProbability) {
  const std::vector<float> p = {1.0f, 0.0f};
  const std::vector<float> cls = {1};
  const double v = Loss::make(LossKind::SparseCategoricalCrossentropy, false).compute(p.data(), cls.data(), 1, 2, nullptr);
  EXPECT_TRUE(std::isfinite(v));
  EXPECT_NEAR(v, -std::log(1e-7), 1e-3);
}

TEST(LossValues, NamesAndErrors) {
  EXPECT_EQ(Loss::make(LossKind::MeanSquaredError, false).name(), "mean_squared_error");
  EXPECT_EQ(Loss::make(LossKind::MeanSquaredError, false).targetDim(10), 10);
  EXPECT_EQ(Loss::make(LossKind::SparseCategoricalCrossentropy, false).targetDim(10), 1);
  EXPECT_FALSE(Loss::make(LossKind::MeanSquaredError, false).isClassification());
  // The names are read once, in project/ (project.TypedSettings refuses "hinge" there).
  EXPECT_EQ(parseLossKind("mse"), LossKind::MeanSquaredError);
  EXPECT_EQ(parseLossKind("hinge"), std::nullopt);
  for (LossKind k : {LossKind::SparseCategoricalCrossentropy, LossKind::CategoricalCrossentropy, LossKind::MeanSquaredError,
                     LossKind::BinaryCrossentropy})
    EXPECT_EQ(parseLossKind(toString(k)), k) << toString(k);
}

TEST(Metrics, AccuracyAndMae) {
  const std::vector<float> pred = {0.1f, 0.7f, 0.2f, 0.6f, 0.3f, 0.1f};
  const std::vector<float> sparse = {1, 2};
  EXPECT_DOUBLE_EQ(metricSum(MetricKind::Accuracy, pred.data(), sparse.data(), 2, 3, 1), 1.0);
  const std::vector<float> onehot = {0, 1, 0, 1, 0, 0};
  EXPECT_DOUBLE_EQ(metricSum(MetricKind::Accuracy, pred.data(), onehot.data(), 2, 3, 3), 2.0);
  const std::vector<float> target = {0, 1, 0, 1, 0, 0};
  // |errors|: row 0 (0.1 + 0.3 + 0.2) / 3 = 0.2; row 1 (0.4 + 0.3 + 0.1) / 3 = 0.26667.
  EXPECT_NEAR(metricSum(MetricKind::MeanAbsoluteError, pred.data(), target.data(), 2, 3, 3), 0.2 + 0.8 / 3, 1e-6);
  EXPECT_EQ(parseMetric("acc"), MetricKind::Accuracy);
  EXPECT_THROW(parseMetric("f1"), UserError);
}

// ---- Sequential forward = layer by layer ------------------------------------------------------

TEST(SequentialForward, MatchesHandChainedLayers) {
  Sequential m(modelSpec({2}, {dense(3, "relu"), dense(2, "linear")}));
  ASSERT_EQ(m.paramCount(), 2 * 3 + 3 + 3 * 2 + 2);
  // Layer 1 = the DenseFixture weights; layer 2 W = [[1, 0], [0, 1], [1, 1]], b = [0, -1].
  const std::vector<float> p = {1, 2, 3, 4, 5, 6, 0.5f, -0.5f, 1.0f, 1, 0, 0, 1, 1, 1, 0, -1};
  std::copy(p.begin(), p.end(), m.params().begin());
  const std::vector<float> x = {1.0f, 0.5f, -1.0f, 0.25f};
  const float* y = m.forward(x.data(), 2, StepContext{});
  // h = [3.5, 4, 7] -> [3.5 + 7, 4 + 7 - 1] = [10.5, 10]; h = [0.5, 0, 0] -> [0.5, -1].
  EXPECT_FLOAT_EQ(y[0], 10.5f);
  EXPECT_FLOAT_EQ(y[1], 10.0f);
  EXPECT_FLOAT_EQ(y[2], 0.5f);
  EXPECT_FLOAT_EQ(y[3], -1.0f);
  ASSERT_EQ(m.paramRanges().size(), 2u);
  EXPECT_EQ(m.paramRanges()[0].offset, 0);
  EXPECT_EQ(m.paramRanges()[0].count, 9);
  EXPECT_EQ(m.paramRanges()[1].offset, 9);
  EXPECT_EQ(m.paramRanges()[1].count, 8);
}

TEST(SequentialForward, BatchSizeCanGrowAndShrink) {
  Sequential m(modelSpec({3, 4}, {layerSpec("Flatten"), dense(5, "tanh"), dense(4, "softmax")}));
  m.initialize(3);
  const auto x = randomVector(9 * 12, 4);
  const float* y1 = m.forward(x.data(), 1, StepContext{});
  const std::vector<float> first(y1, y1 + 4);
  const float* y9 = m.forward(x.data(), 9, StepContext{});
  for (int j = 0; j < 4; ++j) EXPECT_NEAR(y9[j], first[static_cast<size_t>(j)], 1e-6);
  const float* y2 = m.forward(x.data(), 2, StepContext{});
  for (int j = 0; j < 4; ++j) EXPECT_NEAR(y2[j], first[static_cast<size_t>(j)], 1e-6);
}

TEST(SequentialForward, GeneratedNamesAreKerasStyleAndUnique) {
  Sequential m(modelSpec({4}, {dense(3, "relu"), layerSpec("Dense", {{"units", 3}}, "dense_1"), dense(2, "linear"),
                               layerSpec("Dropout", {{"rate", 0.1}}), layerSpec("Activation", {{"activation", "relu"}})}));
  EXPECT_EQ(m.layer(0).name, "dense");
  EXPECT_EQ(m.layer(1).name, "dense_1");
  EXPECT_EQ(m.layer(2).name, "dense_2");
  EXPECT_EQ(m.layer(3).name, "dropout");
  EXPECT_EQ(m.layer(4).name, "activation");
  EXPECT_EQ(m.spec().layers[2].name, "dense_2");
  try {
    Sequential dup(modelSpec({4}, {layerSpec("Dense", {{"units", 3}}, "x"), layerSpec("Dense", {{"units", 3}}, "x")}));
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("'x' is used twice"), std::string::npos) << e.what();
  }
}

TEST(SequentialForward, InitializeIsDeterministicAndChecksumTracksParams) {
  const auto spec = modelSpec({3, 4}, {layerSpec("Flatten"), dense(5, "tanh"), dense(4, "softmax")});
  Sequential a(spec), b(spec), c(spec);
  a.initialize(1);
  b.initialize(1);
  c.initialize(2);
  EXPECT_TRUE(std::equal(a.params().begin(), a.params().end(), b.params().begin()));
  EXPECT_EQ(a.checksum(), b.checksum());
  EXPECT_NE(a.checksum(), c.checksum());
  // Biases start at zero; kernels do not.
  for (int j = 0; j < 5; ++j) EXPECT_EQ(a.params()[static_cast<size_t>(60 + j)], 0.0f);
  EXPECT_NE(a.params()[0], 0.0f);
}

}  // namespace
}  // namespace ml
