// binary_crossentropy (on probabilities, on logits, fused with a sigmoid output) against hand values
// and finite differences; binary_accuracy and the metric "accuracy" resolves to, as Keras picks it.
#include <gtest/gtest.h>

#include <cmath>

#include "NnTestUtil.h"
#include "nn/Loss.h"
#include "nn/Sequential.h"

namespace ml {
namespace {

using test::layerSpec;
using test::modelSpec;
using test::normalisedError;
using test::randomVector;

TEST(BinaryCrossentropy, HandValuesOnLogitsAndProbabilities) {
  const std::vector<float> t{1, 0, 1};
  const std::vector<float> z{0.0f, 2.0f, -30.0f};
  const Loss logits = Loss::make(LossKind::BinaryCrossentropy, true);
  std::vector<float> g(3);
  // One sample of 3 outputs: the mean of log 2, log(1 + e^2), 30 + log(1 + e^-30).
  const double want = (std::log(2.0) + std::log1p(std::exp(2.0)) + 30.0 + std::log1p(std::exp(-30.0))) / 3;
  EXPECT_NEAR(logits.compute(z.data(), t.data(), 1, 3, g.data()), want, 1e-6);
  EXPECT_NEAR(g[0], (0.5 - 1) / 3, 1e-7);
  EXPECT_NEAR(g[1], (1 / (1 + std::exp(-2.0))) / 3, 1e-7);
  const Loss probs = Loss::make(LossKind::BinaryCrossentropy, false);
  const std::vector<float> p{0.5f, 0.25f, 0.0f};  // the last one clipped to 1e-7
  const double wantP = (std::log(2.0) - std::log(0.75) - std::log(1e-7)) / 3;
  EXPECT_NEAR(probs.compute(p.data(), t.data(), 1, 3, g.data()), wantP, 1e-5);
  EXPECT_NEAR(g[1], (1 / 0.75) / 3, 1e-6);
  EXPECT_EQ(g[2], 0.0f);  // clipped: no gradient, as Keras
}

TEST(BinaryCrossentropy, GradientsMatchFiniteDifferences) {
  for (const bool fromLogits : {true, false}) {
    const Loss loss = Loss::make(LossKind::BinaryCrossentropy, fromLogits);
    const int64_t n = 4, k = 3;
    auto pred = randomVector(static_cast<size_t>(n * k), 5, fromLogits ? -3.0 : 0.05, fromLogits ? 3.0 : 0.95);
    std::vector<float> t;
    for (int64_t i = 0; i < n * k; ++i) t.push_back(static_cast<float>(i % 2));
    std::vector<float> g(pred.size());
    loss.compute(pred.data(), t.data(), n, k, g.data());
    for (size_t i = 0; i < pred.size(); ++i) {
      const float x0 = pred[i];
      const double h = 1e-3;
      pred[i] = x0 + static_cast<float>(h);
      const double up = loss.compute(pred.data(), t.data(), n, k, nullptr);
      pred[i] = x0 - static_cast<float>(h);
      const double down = loss.compute(pred.data(), t.data(), n, k, nullptr);
      pred[i] = x0;
      EXPECT_LT(normalisedError(g[i], (up - down) / (2 * h)), 1e-2) << "logits=" << fromLogits << " i=" << i;
    }
  }
}

// A sigmoid output with binary_crossentropy fuses (p - t with respect to the logit): the model's
// parameter gradients still match finite differences of the loss.
TEST(BinaryCrossentropy, FusedSigmoidGivesTheTrueParameterGradient) {
  Sequential m(modelSpec({5}, {layerSpec("Dense", {{"units", 4}, {"activation", "tanh"}}),
                               layerSpec("Dense", {{"units", 2}, {"activation", "sigmoid"}})}));
  m.initialize(3);
  Loss loss = Loss::make(LossKind::BinaryCrossentropy, false);
  m.configureLoss(loss);
  EXPECT_TRUE(loss.fusedSoftmax());
  const int64_t n = 6;
  const auto x = randomVector(static_cast<size_t>(n * 5), 8);
  std::vector<float> t;
  for (int64_t i = 0; i < n * 2; ++i) t.push_back(static_cast<float>((i / 2 + i) % 2));
  auto value = [&] { return loss.compute(m.forward(x.data(), n, StepContext{}), t.data(), n, 2, nullptr); };
  m.zeroGrads();
  const float* y = m.forward(x.data(), n, StepContext{});
  loss.compute(y, t.data(), n, 2, m.outputGrad(n));
  m.backward(x.data(), n, StepContext{});
  auto p = m.params();
  for (size_t i = 0; i < p.size(); ++i) {
    const float p0 = p[i];
    const double h = 1e-2;
    p[i] = p0 + static_cast<float>(h);
    const double up = value();
    p[i] = p0 - static_cast<float>(h);
    const double down = value();
    p[i] = p0;
    EXPECT_LT(normalisedError(m.grads()[i], (up - down) / (2 * h), 5e-3), 1e-2) << "param " << i;
  }
}

TEST(BinaryCrossentropy, AccuracyIsBinaryAccuracyAsInKeras) {
  const Loss probs = Loss::make(LossKind::BinaryCrossentropy, false), logits = Loss::make(LossKind::BinaryCrossentropy, true);
  EXPECT_EQ(metricFor("accuracy", probs), MetricKind::BinaryAccuracy);
  EXPECT_EQ(metricFor("", probs), MetricKind::BinaryAccuracy);
  EXPECT_EQ(metricFor("accuracy", logits), MetricKind::BinaryAccuracyLogits);
  EXPECT_EQ(metricFor("accuracy", Loss::make(LossKind::SparseCategoricalCrossentropy, false)), MetricKind::Accuracy);
  EXPECT_STREQ(toString(MetricKind::BinaryAccuracyLogits), "binary_accuracy");
  const std::vector<float> p{0.7f, 0.2f, 0.4f, 0.9f}, t{1, 0, 1, 1};
  EXPECT_DOUBLE_EQ(metricSum(MetricKind::BinaryAccuracy, p.data(), t.data(), 2, 2, 2), 1.0 + 0.5);
  const std::vector<float> z{0.3f, -1.0f, -0.1f, 2.0f};
  EXPECT_DOUBLE_EQ(metricSum(MetricKind::BinaryAccuracyLogits, z.data(), t.data(), 4, 1, 1), 3.0);
}

}  // namespace
}  // namespace ml
