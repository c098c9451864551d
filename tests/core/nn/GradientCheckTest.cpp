// Numeric gradient checks (central differences) for every layer, activation and loss.
// Parameter gradients are checked through Sequential (forward, Loss::compute into outputGrad,
// backward); input gradients are checked on each layer directly with our own buffers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

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
using test::normalisedError;
using test::randomVector;

// The models compute in float, so a loss carries a rounding noise of ~1e-7 relative; with a step of
// 1e-3 that noise alone is ~1e-4 in the difference quotient, the size of the smallest gradients
// here. A step of 1e-2 keeps it ~1e-5 while the O(h^2) truncation stays below 1e-4 relative.
// The layer-level checks (L linear in the output) are far less noisy and use 1e-3.
constexpr double kModelH = 1e-2;  // central-difference step through a whole model + loss
constexpr double kH = 1e-3;       // central-difference step for a single layer
constexpr double kTol = 1e-2;     // on the normalised error
constexpr double kFloor = 1e-3;   // absolute floor of the normalised error (single layer)
// Through a model the noise of the difference quotient is ~3e-5 at kModelH, so gradients below
// ~5e-3 are compared absolutely (to 5e-5); the vector as a whole must also agree to 1e-3 (L2).
constexpr double kModelFloor = 5e-3;
constexpr double kModelVectorTol = 1e-3;
constexpr double kKinkMargin = 5e-2;  // |pre-activation| of every relu > this (> any perturbation)
constexpr int64_t kRows = 4;

enum class Targets { Sparse, OneHot, Soft, Regression };

struct GradCase {
  std::string label;
  ModelSpec spec;
  std::string loss = "sparse_categorical_crossentropy";
  bool fromLogits = false;
  bool configureLoss = true;  // call Sequential::configureLoss (fuses a softmax output when it can)
  bool expectFused = false;   // what configureLoss should decide
  Targets targets = Targets::Sparse;
  bool training = false;  // Dropout active
};

std::ostream& operator<<(std::ostream& o, const GradCase& c) { return o << c.label; }

std::vector<float> makeTargets(Targets t, int64_t n, int64_t k, uint64_t seed) {
  std::vector<float> out;
  Rng rng(seed);
  for (int64_t r = 0; r < n; ++r) {
    switch (t) {
      case Targets::Sparse: out.push_back(static_cast<float>((r * 3 + 1) % k)); break;
      case Targets::OneHot:
        for (int64_t j = 0; j < k; ++j) out.push_back(j == (r * 3 + 1) % k ? 1.0f : 0.0f);
        break;
      case Targets::Soft: {
        std::vector<double> w(static_cast<size_t>(k));
        double s = 0;
        for (auto& v : w) s += (v = rng.uniform(0.1, 1.0));
        for (double v : w) out.push_back(static_cast<float>(v / s));
        break;
      }
      case Targets::Regression:
        for (int64_t j = 0; j < k; ++j) out.push_back(static_cast<float>(rng.uniform(-1.0, 1.0)));
        break;
    }
  }
  return out;
}

// Smallest |pre-activation| over every relu in the model for input x (a relu's kink must not lie
// within a perturbation of the point). Computed with a truncated copy of the model whose relu is linear.
double reluMargin(const Sequential& model, const std::vector<float>& x, int64_t n, const StepContext& ctx) {
  double margin = 1e30;
  const auto& layers = model.spec().layers;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (activationOf(layers[i].args) != Act::Relu) continue;
    ModelSpec probe = model.spec();
    probe.layers.resize(i + 1);
    if (auto* d = probe.layers[i].as<DenseSpec>()) d->activation = Act::Linear;
    if (auto* c = probe.layers[i].as<Conv2DSpec>()) c->activation = Act::Linear;
    if (auto* a = probe.layers[i].as<ActivationSpec>()) a->activation = Act::Linear;
    Sequential p(probe);
    std::copy(model.params().begin(), model.params().begin() + p.paramCount(), p.params().begin());
    const float* z = p.forward(x.data(), n, ctx);
    for (int64_t j = 0; j < n * p.outFeatures(); ++j) margin = std::min(margin, std::fabs(static_cast<double>(z[j])));
  }
  return margin;
}

struct GradientComparison {
  std::vector<double> analytic, numeric;
  double worst = 0;      // largest normalised error (floor kModelFloor)
  double vectorErr = 0;  // |a - n| / |(|a| + |n|)| over all parameters
  int nonZero = 0;       // numeric gradients clearly away from 0
  int worstIndex = -1;
};

// Analytic parameter gradients (forward, loss into outputGrad, backward) against central differences
// of the summed loss, at every parameter.
GradientComparison compareGradients(Sequential& model, const Loss& loss, const std::vector<float>& x, const std::vector<float>& t,
                                    int64_t n, const StepContext& ctx) {
  const int64_t k = model.outFeatures();
  GradientComparison r;
  model.zeroGrads();
  const float* y = model.forward(x.data(), n, ctx);
  const double l0 = loss.compute(y, t.data(), n, k, model.outputGrad(n));
  EXPECT_TRUE(std::isfinite(l0));
  model.backward(x.data(), n, ctx);
  r.analytic.assign(model.grads().begin(), model.grads().end());

  auto lossAt = [&] {
    const float* yy = model.forward(x.data(), n, ctx);
    return loss.compute(yy, t.data(), n, k, nullptr);
  };
  EXPECT_DOUBLE_EQ(lossAt(), l0) << "the forward pass is not deterministic";

  auto params = model.params();
  double diff2 = 0, norm2 = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const float orig = params[i];
    const float up = static_cast<float>(orig + kModelH), down = static_cast<float>(orig - kModelH);
    params[i] = up;
    const double lp = lossAt();
    params[i] = down;
    const double lm = lossAt();
    params[i] = orig;
    const double numeric = (lp - lm) / (static_cast<double>(up) - static_cast<double>(down));
    r.numeric.push_back(numeric);
    const double a = r.analytic[i];
    const double err = normalisedError(a, numeric, kModelFloor);
    if (err > r.worst) {
      r.worst = err;
      r.worstIndex = static_cast<int>(i);
    }
    diff2 += (a - numeric) * (a - numeric);
    norm2 += (std::fabs(a) + std::fabs(numeric)) * (std::fabs(a) + std::fabs(numeric));
    if (std::fabs(numeric) > 1e-4) ++r.nonZero;
  }
  r.vectorErr = norm2 > 0 ? std::sqrt(diff2 / norm2) : 0.0;
  return r;
}

StepContext gradContext(bool training, const std::vector<int64_t>& ids) {
  StepContext ctx;
  ctx.training = training;
  ctx.seed = 99;
  ctx.step = 3;
  ctx.sampleIds = ids.data();
  return ctx;
}

const std::vector<int64_t> kIds = {1000, 17, 4242, 5};

class ParamGradientCheck : public ::testing::TestWithParam<GradCase> {};

TEST_P(ParamGradientCheck, AnalyticMatchesCentralDifferences) {
  const GradCase& c = GetParam();
  Sequential model(c.spec);
  model.initialize(11);
  Loss loss = Loss::make(parseLossKind(c.loss).value(), c.fromLogits);
  if (c.configureLoss) model.configureLoss(loss);
  ASSERT_EQ(loss.fusedSoftmax(), c.expectFused) << "configureLoss decided differently than expected";

  const int64_t n = kRows;
  const StepContext ctx = gradContext(c.training, kIds);
  // Inputs that keep every relu away from its kink.
  std::vector<float> x;
  bool found = false;
  for (uint64_t seed = 1; seed < 200 && !found; ++seed) {
    x = randomVector(static_cast<size_t>(n * model.inFeatures()), seed);
    found = reluMargin(model, x, n, ctx) > kKinkMargin;
  }
  ASSERT_TRUE(found) << "no input keeps the relus away from 0";
  const std::vector<float> t = makeTargets(c.targets, n, model.outFeatures(), 5);

  const GradientComparison r = compareGradients(model, loss, x, t, n, ctx);
  ASSERT_EQ(static_cast<int64_t>(r.numeric.size()), model.paramCount());
  for (size_t i = 0; i < r.numeric.size(); ++i)
    EXPECT_LT(normalisedError(r.analytic[i], r.numeric[i], kModelFloor), kTol)
        << c.label << ": param " << i << " analytic " << r.analytic[i] << " numeric " << r.numeric[i];
  // A check over gradients that are all zero proves nothing.
  EXPECT_GT(r.nonZero, model.paramCount() / 3) << c.label;
  EXPECT_LT(r.vectorErr, kModelVectorTol) << c.label << ": over all parameters";
  RecordProperty("worst_normalised_error", std::to_string(r.worst));
  if (std::getenv("NN_GRADCHECK_VERBOSE"))
    std::printf("%s: worst normalised error %.3g (param %d), vector error %.3g\n", c.label.c_str(), r.worst, r.worstIndex,
                r.vectorErr);
}

// Negative controls: the check must see a wrong gradient. A loss that writes d/d(logits) into a
// softmax Dense that still applies its Jacobian (or the reverse) is wrong.
TEST(ParamGradientCheckControl, DetectsFusedMismatch) {
  const ModelSpec spec = modelSpec({3, 4}, {layerSpec("Flatten"), dense(5, "tanh"), dense(4, "softmax")});
  const std::vector<float> x = randomVector(static_cast<size_t>(kRows * 12), 3);
  const std::vector<float> t = makeTargets(Targets::Sparse, kRows, 4, 5);
  const StepContext ctx = gradContext(false, kIds);
  {
    Sequential model(spec);
    model.initialize(11);
    Loss loss = Loss::make(LossKind::SparseCategoricalCrossentropy, false);
    loss.setFusedSoftmax(true);  // but the Dense is not told
    EXPECT_GT(compareGradients(model, loss, x, t, kRows, ctx).vectorErr, 0.1);
  }
  {
    Sequential model(spec);
    model.initialize(11);
    Loss loss = Loss::make(LossKind::SparseCategoricalCrossentropy, false);
    model.configureLoss(loss);
    loss.setFusedSoftmax(false);  // the Dense skips its Jacobian, the loss gives d/d(probabilities)
    EXPECT_GT(compareGradients(model, loss, x, t, kRows, ctx).vectorErr, 0.1);
  }
}

// configureLoss must leave the model matching the loss it was last given. A model configured for a
// fused cross-entropy and then for mean squared error (a studio that changes the loss and reuses
// its models, or a test harness) must apply the softmax Jacobian again.
TEST(ConfigureLoss, ReconfiguringWithANonFusingLossUnfusesTheOutputLayer) {
  for (bool activationLayer : {false, true}) {
    const ModelSpec spec = activationLayer ? modelSpec({3, 4}, {layerSpec("Flatten"), dense(5, "tanh"), dense(4, "linear"),
                                                                layerSpec("Activation", {{"activation", "softmax"}})})
                                           : modelSpec({3, 4}, {layerSpec("Flatten"), dense(5, "tanh"), dense(4, "softmax")});
    Sequential model(spec);
    model.initialize(11);
    Loss ce = Loss::make(LossKind::CategoricalCrossentropy, false);
    model.configureLoss(ce);
    ASSERT_TRUE(ce.fusedSoftmax());
    Loss mse = Loss::make(LossKind::MeanSquaredError, false);
    model.configureLoss(mse);
    ASSERT_FALSE(mse.fusedSoftmax());
    const std::vector<float> x = randomVector(static_cast<size_t>(kRows * 12), 3);
    const std::vector<float> t = makeTargets(Targets::Soft, kRows, 4, 5);
    const GradientComparison r = compareGradients(model, mse, x, t, kRows, gradContext(false, kIds));
    EXPECT_LT(r.vectorErr, kModelVectorTol) << (activationLayer ? "Activation(softmax)" : "Dense(softmax)")
                                            << " output still skips its Jacobian after configureLoss(mean_squared_error)";
  }
}

ModelSpec mlp(const std::string& hidden, const std::string& out, int64_t outUnits = 4) {
  return modelSpec({3, 4}, {layerSpec("Flatten"), dense(5, hidden), dense(outUnits, out)});
}

std::vector<GradCase> gradCases() {
  std::vector<GradCase> cases;
  // Every activation in the hidden Dense, fused softmax + sparse CE on top.
  for (const char* act : {"linear", "relu", "sigmoid", "tanh", "softmax"}) {
    GradCase c;
    c.label = std::string("DenseHidden_") + act;
    c.spec = mlp(act, "softmax");
    c.expectFused = true;
    cases.push_back(c);
  }
  // Every activation as an Activation layer between two Dense.
  for (const char* act : {"linear", "relu", "sigmoid", "tanh", "softmax"}) {
    GradCase c;
    c.label = std::string("ActivationLayer_") + act;
    c.spec = modelSpec(
        {3, 4}, {layerSpec("Flatten"), dense(5, "linear"), layerSpec("Activation", {{"activation", act}}), dense(4, "softmax")});
    c.expectFused = true;
    cases.push_back(c);
  }
  {
    GradCase c;
    c.label = "DropoutTraining";
    c.spec =
        modelSpec({3, 4}, {layerSpec("Flatten"), dense(6, "tanh"), layerSpec("Dropout", {{"rate", 0.4}}), dense(4, "softmax")});
    c.expectFused = true;
    c.training = true;
    cases.push_back(c);
  }
  {
    GradCase c;
    c.label = "DropoutInference";
    c.spec =
        modelSpec({3, 4}, {layerSpec("Flatten"), dense(6, "tanh"), layerSpec("Dropout", {{"rate", 0.4}}), dense(4, "softmax")});
    c.expectFused = true;
    cases.push_back(c);
  }
  {
    GradCase c;
    c.label = "DeepReluDropoutSigmoid";
    c.spec = modelSpec({3, 4}, {layerSpec("Flatten"), dense(6, "relu"), layerSpec("Dropout", {{"rate", 0.3}}),
                                dense(5, "sigmoid"), dense(4, "softmax")});
    c.expectFused = true;
    c.training = true;
    cases.push_back(c);
  }
  {
    GradCase c;
    c.label = "DenseNoBias";
    c.spec =
        modelSpec({3, 4}, {layerSpec("Flatten"), layerSpec("Dense", {{"units", 5}, {"activation", "tanh"}, {"use_bias", false}}),
                           dense(4, "softmax")});
    c.expectFused = true;
    cases.push_back(c);
  }
  {
    GradCase c;
    c.label = "FlattenBetweenDense";  // a reshape in the middle passes the gradient buffer through
    c.spec = modelSpec({12}, {dense(6, "tanh"), layerSpec("Flatten"), dense(4, "softmax")});
    c.expectFused = true;
    cases.push_back(c);
  }
  {
    GradCase c;
    c.label = "LeakyReLUBetweenDense";  // negative inputs pass at the slope
    c.spec = modelSpec({3, 4}, {layerSpec("Flatten"), dense(6, "linear"), layerSpec("LeakyReLU", {{"negative_slope", 0.1}}),
                                dense(4, "softmax")});
    c.expectFused = true;
    cases.push_back(c);
  }
  // Losses.
  {
    GradCase c;
    c.label = "SparseCE_FromLogits";
    c.spec = mlp("tanh", "linear");
    c.fromLogits = true;
    cases.push_back(c);
  }
  {
    GradCase c;
    c.label = "SparseCE_SigmoidOutputNotFused";
    c.spec = mlp("tanh", "sigmoid");
    cases.push_back(c);
  }
  {
    GradCase c;
    c.label = "SparseCE_SoftmaxOutputUnfused";  // softmax Jacobian + normalised probabilities path
    c.spec = mlp("tanh", "softmax");
    c.configureLoss = false;
    cases.push_back(c);
  }
  {
    GradCase c;
    c.label = "SparseCE_SoftmaxActivationLayerFused";
    c.spec = modelSpec({3, 4}, {layerSpec("Flatten"), dense(5, "tanh"), dense(4, "linear"),
                                layerSpec("Activation", {{"activation", "softmax"}})});
    c.expectFused = true;
    cases.push_back(c);
  }
  {
    GradCase c;
    c.label = "CategoricalCE_OneHotFused";
    c.spec = mlp("tanh", "softmax");
    c.loss = "categorical_crossentropy";
    c.targets = Targets::OneHot;
    c.expectFused = true;
    cases.push_back(c);
  }
  {
    GradCase c;
    c.label = "CategoricalCE_SoftFused";
    c.spec = mlp("sigmoid", "softmax");
    c.loss = "categorical_crossentropy";
    c.targets = Targets::Soft;
    c.expectFused = true;
    cases.push_back(c);
  }
  {
    GradCase c;
    c.label = "CategoricalCE_SoftUnfused";
    c.spec = mlp("tanh", "softmax");
    c.loss = "categorical_crossentropy";
    c.targets = Targets::Soft;
    c.configureLoss = false;
    cases.push_back(c);
  }
  {
    GradCase c;
    c.label = "CategoricalCE_SoftFromLogits";
    c.spec = mlp("tanh", "linear");
    c.loss = "categorical_crossentropy";
    c.fromLogits = true;
    c.targets = Targets::Soft;
    cases.push_back(c);
  }
  {
    GradCase c;
    c.label = "CategoricalCE_SoftSigmoidOutput";
    c.spec = mlp("tanh", "sigmoid");
    c.loss = "categorical_crossentropy";
    c.targets = Targets::Soft;
    cases.push_back(c);
  }
  for (const char* out : {"linear", "tanh", "sigmoid"}) {
    GradCase c;
    c.label = std::string("MSE_") + out + "Output";
    c.spec = mlp("relu", out, 3);
    c.loss = "mean_squared_error";
    c.targets = Targets::Regression;
    cases.push_back(c);
  }
  {
    GradCase c;
    c.label = "MSE_SoftmaxOutputNeverFused";  // regression never fuses, even on a softmax output
    c.spec = mlp("tanh", "softmax");
    c.loss = "mse";
    c.targets = Targets::Soft;
    cases.push_back(c);
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllLayersAndLosses, ParamGradientCheck, ::testing::ValuesIn(gradCases()),
                         [](const ::testing::TestParamInfo<GradCase>& info) { return info.param.label; });

// ---- Input gradients, layer by layer with our own buffers --------------------------------------

// L = sum_ij r_ij y_ij, so dL/dy = r. Checks dx (and param grads when the layer has any).
void checkLayerGradients(Layer& layer, std::vector<float> x, const StepContext& ctx, const std::string& label,
                         std::vector<float>* params = nullptr, std::vector<float>* grads = nullptr) {
  const int64_t n = static_cast<int64_t>(x.size()) / layer.inFeatures(), out = layer.outFeatures();
  const std::vector<float> r = randomVector(static_cast<size_t>(n * out), 77);
  std::vector<float> y(static_cast<size_t>(n * out));
  auto value = [&] {
    layer.forward(x.data(), y.data(), n, ctx);
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += static_cast<double>(r[i]) * y[i];
    return s;
  };
  value();
  std::vector<float> dy = r;  // scratch: the layer may overwrite it
  std::vector<float> dx(x.size(), std::nanf(""));
  if (grads) std::fill(grads->begin(), grads->end(), 0.0f);
  layer.backward(x.data(), y.data(), dy.data(), dx.data(), n, ctx);

  auto numericAt = [&](float& v) {
    const float orig = v, up = static_cast<float>(orig + kH), down = static_cast<float>(orig - kH);
    v = up;
    const double lp = value();
    v = down;
    const double lm = value();
    v = orig;
    return (lp - lm) / (static_cast<double>(up) - static_cast<double>(down));
  };
  int nonZero = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double numeric = numericAt(x[i]);
    if (std::fabs(numeric) > 1e-4) ++nonZero;
    EXPECT_LT(normalisedError(dx[i], numeric, kFloor), kTol)
        << label << ": dx[" << i << "] analytic " << dx[i] << " numeric " << numeric;
  }
  EXPECT_GT(nonZero, 0) << label;
  if (params && grads) {
    for (size_t i = 0; i < params->size(); ++i) {
      const double numeric = numericAt((*params)[i]);
      EXPECT_LT(normalisedError((*grads)[i], numeric, kFloor), kTol)
          << label << ": dparam[" << i << "] analytic " << (*grads)[i] << " numeric " << numeric;
    }
  }
}

// Moves values away from 0 so that no relu sits near its kink.
std::vector<float> awayFromZero(std::vector<float> v) {
  for (auto& x : v)
    if (std::fabs(x) < 0.1f) x += x < 0 ? -0.2f : 0.2f;
  return v;
}

class LayerInputGradient : public ::testing::TestWithParam<const char*> {};

TEST_P(LayerInputGradient, DenseDx) {
  const Act act = parseActivation(GetParam(), "test");
  for (bool bias : {true, false}) {
    Dense d(3, act, bias);
    d.name = "d";
    d.build({4});
    std::vector<float> params, grads(static_cast<size_t>(d.paramCount()));
    std::vector<float> x;
    // Keep every pre-activation away from the relu kink.
    for (uint64_t seed = 1;; ++seed) {
      ASSERT_LT(seed, 200u);
      params = randomVector(grads.size(), 1000 + seed);
      x = randomVector(2 * 4, seed);
      double margin = 1e30;
      for (int r = 0; r < 2; ++r)
        for (int j = 0; j < 3; ++j) {
          double z = bias ? params[static_cast<size_t>(12 + j)] : 0.0;
          for (int i = 0; i < 4; ++i)
            z += static_cast<double>(x[static_cast<size_t>(r * 4 + i)]) * params[static_cast<size_t>(i * 3 + j)];
          margin = std::min(margin, std::fabs(z));
        }
      if (margin > kKinkMargin) break;
    }
    d.bind(params.data(), grads.data());
    checkLayerGradients(d, x, StepContext{}, std::string("Dense ") + GetParam() + (bias ? "" : " no bias"), &params, &grads);
  }
}

TEST_P(LayerInputGradient, ActivationLayerDx) {
  ActivationLayer a(parseActivation(GetParam(), "test"));
  a.name = "a";
  a.build({5});
  checkLayerGradients(a, awayFromZero(randomVector(3 * 5, 8, -2.0, 2.0)), StepContext{}, std::string("Activation ") + GetParam());
}

INSTANTIATE_TEST_SUITE_P(Activations, LayerInputGradient, ::testing::Values("linear", "relu", "sigmoid", "tanh", "softmax"));

TEST(LayerInputGradientOther, DropoutTrainingDx) {
  Dropout d(0.5, 1234);
  d.name = "dropout";
  d.build({6});
  const std::vector<int64_t> ids = {3, 9, 27};
  StepContext ctx;
  ctx.training = true;
  ctx.seed = 5;
  ctx.step = 2;
  ctx.sampleIds = ids.data();
  checkLayerGradients(d, randomVector(3 * 6, 4), ctx, "Dropout training");
}

TEST(LayerInputGradientOther, DropoutInferenceDx) {
  Dropout d(0.5, 1234);
  d.name = "dropout";
  d.build({6});
  checkLayerGradients(d, randomVector(3 * 6, 4), StepContext{}, "Dropout inference");
}

TEST(LayerInputGradientOther, FlattenDx) {
  Flatten f;
  f.name = "flatten";
  f.build({2, 3});
  checkLayerGradients(f, randomVector(2 * 6, 4), StepContext{}, "Flatten");
}

TEST(LayerInputGradientOther, LeakyReLUDx) {
  const LayerSpec spec = layerSpec("LeakyReLU", {{"negative_slope", 0.2}});
  const auto l = makeLayer(spec, 0);
  l->name = "leaky_re_lu";
  l->build({6});
  checkLayerGradients(*l, awayFromZero(randomVector(3 * 6, 4, -2.0, 2.0)), StepContext{}, "LeakyReLU");
}

// The fused softmax output: Loss::compute writes p - y and Dense backward must skip the Jacobian.
// The gradient w.r.t. the logits is checked against differences of the loss over the logits.
TEST(FusedSoftmax, LossGradientIsWithRespectToLogits) {
  const int64_t n = 3, k = 4;
  std::vector<float> logits = randomVector(static_cast<size_t>(n * k), 21, -2.0, 2.0);
  const std::vector<float> t = {0, 3, 1};
  Loss fused = Loss::make(LossKind::SparseCategoricalCrossentropy, false);
  fused.setFusedSoftmax(true);
  Loss fromLogits = Loss::make(LossKind::SparseCategoricalCrossentropy, true);
  auto probs = [&] {
    std::vector<float> p = logits;
    activationForward(Act::Softmax, p.data(), n, k);
    return p;
  };
  std::vector<float> g(static_cast<size_t>(n * k)), gl(static_cast<size_t>(n * k));
  const auto p = probs();
  const double l = fused.compute(p.data(), t.data(), n, k, g.data());
  const double ll = fromLogits.compute(logits.data(), t.data(), n, k, gl.data());
  EXPECT_NEAR(l, ll, 1e-5);
  for (size_t i = 0; i < g.size(); ++i) {
    const float orig = logits[i];
    logits[i] = static_cast<float>(orig + kH);
    const double lp = fused.compute(probs().data(), t.data(), n, k, nullptr);
    logits[i] = static_cast<float>(orig - kH);
    const double lm = fused.compute(probs().data(), t.data(), n, k, nullptr);
    logits[i] = orig;
    const double numeric = (lp - lm) / (2 * kH);
    EXPECT_LT(normalisedError(g[i], numeric), kTol) << i;
    EXPECT_NEAR(g[i], gl[i], 1e-6) << i;
  }
}

}  // namespace
}  // namespace ml
