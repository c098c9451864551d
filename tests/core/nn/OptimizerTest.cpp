// Optimizers against Keras' formulas, computed here in double, and one step pinned by hand.
// Gradients are sums; gradScale (0.5 here, as for a global batch of 2) makes them means.
#include <gtest/gtest.h>

#include <cmath>

#include "Error.h"
#include "nn/Optimizer.h"

namespace ml {
namespace {

constexpr float kScale = 0.5f;
constexpr float kLr = 0.1f;
const std::vector<float> kP0 = {1.0f, -2.0f, 0.5f};
// Summed gradients of steps 1..3 (scaled by 0.5 they are [0.2, -0.5, 1.0], then ...).
const std::vector<std::vector<float>> kGrads = {{0.4f, -1.0f, 2.0f}, {-0.6f, 0.2f, 1.0f}, {0.1f, 0.3f, -3.0f}};

OptimizerSpec spec(const std::string& name) {
  OptimizerSpec s;
  s.kind = *optimizerKindNamed(name);
  s.learningRate = kLr;
  return s;
}

// Runs `steps` updates and returns the parameters after each.
std::vector<std::vector<float>> run(Optimizer& opt, size_t steps) {
  std::vector<float> p = kP0;
  std::vector<std::vector<float>> out;
  for (size_t s = 0; s < steps; ++s) {
    opt.step(p, kGrads[s], kScale, kLr);
    out.push_back(p);
  }
  return out;
}

void expectNear(const std::vector<float>& got, const std::vector<double>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << what << " [" << i << "]";
}

// ---- Keras formulas in double ---------------------------------------------------------------

std::vector<std::vector<double>> sgdReference(double momentum, bool nesterov, size_t steps) {
  std::vector<double> p(kP0.begin(), kP0.end()), v(3, 0.0);
  std::vector<std::vector<double>> out;
  for (size_t s = 0; s < steps; ++s) {
    for (size_t i = 0; i < 3; ++i) {
      const double g = kScale * static_cast<double>(kGrads[s][i]);
      v[i] = momentum * v[i] - kLr * g;
      if (momentum == 0.0)
        p[i] -= kLr * g;
      else if (nesterov)
        p[i] += momentum * v[i] - kLr * g;
      else
        p[i] += v[i];
    }
    out.push_back(p);
  }
  return out;
}

std::vector<std::vector<double>> adamReference(double b1, double b2, double eps, size_t steps) {
  std::vector<double> p(kP0.begin(), kP0.end()), m(3, 0.0), v(3, 0.0);
  std::vector<std::vector<double>> out;
  for (size_t s = 0; s < steps; ++s) {
    const double t = static_cast<double>(s + 1);
    const double alpha = kLr * std::sqrt(1.0 - std::pow(b2, t)) / (1.0 - std::pow(b1, t));
    for (size_t i = 0; i < 3; ++i) {
      const double g = kScale * static_cast<double>(kGrads[s][i]);
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      p[i] -= alpha * m[i] / (std::sqrt(v[i]) + eps);
    }
    out.push_back(p);
  }
  return out;
}

std::vector<std::vector<double>> rmspropReference(double rho, double momentum, double eps, size_t steps) {
  std::vector<double> p(kP0.begin(), kP0.end()), v(3, 0.0), mom(3, 0.0);
  std::vector<std::vector<double>> out;
  for (size_t s = 0; s < steps; ++s) {
    for (size_t i = 0; i < 3; ++i) {
      const double g = kScale * static_cast<double>(kGrads[s][i]);
      v[i] = rho * v[i] + (1 - rho) * g * g;
      const double u = kLr * g / std::sqrt(v[i] + eps);  // Keras: epsilon inside the root
      if (momentum == 0.0)
        p[i] -= u;
      else {
        mom[i] = momentum * mom[i] + u;
        p[i] -= mom[i];
      }
    }
    out.push_back(p);
  }
  return out;
}

void compareRuns(Optimizer& opt, const std::vector<std::vector<double>>& ref, const std::string& what) {
  const auto got = run(opt, ref.size());
  for (size_t s = 0; s < ref.size(); ++s) expectNear(got[s], ref[s], 2e-6, what + " step " + std::to_string(s + 1));
  EXPECT_EQ(opt.iterations(), static_cast<int64_t>(ref.size()));
}

TEST(Optimizer, SgdPlainMatchesKeras) {
  auto opt = Optimizer::make(spec("sgd"), 3);
  EXPECT_EQ(opt->name(), "sgd");
  compareRuns(*opt, sgdReference(0.0, false, 3), "sgd");
}

TEST(Optimizer, SgdMomentumMatchesKeras) {
  auto s = spec("sgd");
  s.momentum = 0.9;
  auto opt = Optimizer::make(s, 3);
  compareRuns(*opt, sgdReference(0.9, false, 3), "sgd momentum");
  ASSERT_EQ(opt->stateBuffers().size(), 1u);
  EXPECT_EQ(opt->stateBuffers()[0].size(), 3u);
}

TEST(Optimizer, SgdNesterovMatchesKeras) {
  auto s = spec("sgd");
  s.momentum = 0.9;
  s.nesterov = true;
  auto opt = Optimizer::make(s, 3);
  compareRuns(*opt, sgdReference(0.9, true, 3), "sgd nesterov");
}

TEST(Optimizer, AdamMatchesKeras) {
  auto opt = Optimizer::make(spec("adam"), 3);
  EXPECT_EQ(opt->name(), "adam");
  compareRuns(*opt, adamReference(0.9, 0.999, 1e-7, 3), "adam");
  ASSERT_EQ(opt->stateBuffers().size(), 2u);
}

TEST(Optimizer, AdamCustomBetas) {
  auto s = spec("adam");
  s.beta1 = 0.5;
  s.beta2 = 0.9;
  s.epsilon = 1e-3;
  auto opt = Optimizer::make(s, 3);
  compareRuns(*opt, adamReference(0.5, 0.9, 1e-3, 3), "adam custom");
}

TEST(Optimizer, RmspropMatchesKeras) {
  auto opt = Optimizer::make(spec("rmsprop"), 3);
  EXPECT_EQ(opt->name(), "rmsprop");
  compareRuns(*opt, rmspropReference(0.9, 0.0, 1e-7, 3), "rmsprop");
}

TEST(Optimizer, RmspropMomentumMatchesKeras) {
  auto s = spec("rmsprop");
  s.momentum = 0.5;
  auto opt = Optimizer::make(s, 3);
  compareRuns(*opt, rmspropReference(0.9, 0.5, 1e-7, 3), "rmsprop momentum");
}

// ---- Literal values worked out by hand (lr 0.1, gradScale 0.5, g = [0.4, -1, 2] -> [0.2, -0.5, 1]) --

TEST(OptimizerByHand, SgdOneStep) {
  // p - 0.1 * [0.2, -0.5, 1] = [0.98, -1.95, 0.4]
  auto opt = Optimizer::make(spec("sgd"), 3);
  expectNear(run(*opt, 1)[0], {0.98, -1.95, 0.4}, 1e-7, "sgd");
}

TEST(OptimizerByHand, SgdMomentumTwoStepsSameGradient) {
  // v1 = -0.1 g = [-0.02, 0.05, -0.1], p1 = [0.98, -1.95, 0.4];
  // v2 = 0.9 v1 - 0.1 g = [-0.038, 0.095, -0.19], p2 = [0.942, -1.855, 0.21].
  auto s = spec("sgd");
  s.momentum = 0.9;
  auto opt = Optimizer::make(s, 3);
  std::vector<float> p = kP0;
  opt->step(p, kGrads[0], kScale, kLr);
  expectNear(p, {0.98, -1.95, 0.4}, 1e-7, "momentum step 1");
  opt->step(p, kGrads[0], kScale, kLr);
  expectNear(p, {0.942, -1.855, 0.21}, 1e-6, "momentum step 2");
  expectNear(std::vector<float>(opt->stateBuffers()[0].begin(), opt->stateBuffers()[0].end()), {-0.038, 0.095, -0.19}, 1e-7,
             "velocity");
}

TEST(OptimizerByHand, SgdNesterovOneStep) {
  // v1 = [-0.02, 0.05, -0.1]; p += 0.9 v1 - 0.1 g = [-0.038, 0.095, -0.19] -> [0.962, -1.905, 0.31].
  auto s = spec("sgd");
  s.momentum = 0.9;
  s.nesterov = true;
  auto opt = Optimizer::make(s, 3);
  expectNear(run(*opt, 1)[0], {0.962, -1.905, 0.31}, 1e-6, "nesterov");
}

TEST(OptimizerByHand, AdamOneStep) {
  // t = 1: m = 0.1 g, v = 0.001 g^2, alpha = 0.1 sqrt(0.001) / 0.1 = 0.0316228, so the step is
  // 0.1 * |g| / (|g| + eps / sqrt(0.001)), i.e. 0.1 * (1 - 1e-7 / (0.0316228 |g|)):
  //   |g| = 0.2: -1.581e-5 relative; 0.5: -6.32e-6; 1.0: -3.16e-6.
  // As in Keras, 1 - beta_2 is taken in double (0.001: the moments carry no error) but the bias
  // correction in float32: 1 - 0.999f = 9.99987e-4, so alpha is 6.4e-6 smaller, and 1 - 0.9f =
  // 0.10000002 makes it 2.4e-7 smaller again: every step is 6.7e-6 smaller:
  //   p = 1 - 0.1 (1 - 2.25e-5) = 0.90000225; -2 + 0.1 (1 - 1.3e-5) = -1.9000013;
  //   0.5 - 0.1 (1 - 9.9e-6) = 0.40000099.
  // (Computed in double throughout: 0.90000158, -1.90000063, 0.40000032; with 1 - beta_2 in
  // float32 as well, as Mirrorlab did before: 0.90000094, -1.90000001, 0.39999967.)
  auto opt = Optimizer::make(spec("adam"), 3);
  expectNear(run(*opt, 1)[0], {0.90000225, -1.9000013, 0.40000099}, 2e-7, "adam");
}

// Three steps of keras.optimizers.Adam(0.1) and RMSprop(0.1) (Keras 3.15.1 with TensorFlow 2.21,
// apply_gradients on a float32 variable [1, -2, 0.5] with the mean gradients of kGrads), printed
// to float32's precision: Mirrorlab's constants are Keras' (nn/OptimizerConstants.h), so the
// updates agree to an ulp or two (1.2e-7 at 1), far inside the 1.3e-5 a float32 1 - beta_2 made.
TEST(Optimizer, AdamAndRmspropMatchKeras3) {
  const std::vector<std::vector<double>> adam = {{0.9000022411346436, -1.9000012874603271, 0.40000098943710327},
                                                 {0.9247719645500183, -1.848899483680725, 0.3067842125892639},
                                                 {0.9349571466445923, -1.8290505409240723, 0.3149818480014801}};
  const std::vector<std::vector<double>> rmsprop = {{0.6837761402130127, -1.6837728023529053, 0.18377238512039185},
                                                    {0.9510363340377808, -1.7490054368972778, 0.03633049130439758},
                                                    {0.9045926928520203, -1.8470633029937744, 0.2980424463748932}};
  for (const auto& [name, want] : {std::pair{"adam", adam}, std::pair{"rmsprop", rmsprop}}) {
    auto opt = Optimizer::make(spec(name), 3);
    const auto got = run(*opt, 3);
    for (size_t s = 0; s < 3; ++s) expectNear(got[s], want[s], 3e-7, std::string(name) + " step " + std::to_string(s + 1));
  }
}

TEST(OptimizerByHand, RmspropOneStep) {
  // v = 0.1 g^2, step = 0.1 g / sqrt(0.1 g^2 + 1e-7): 0.1 / sqrt(0.1) = 0.3162278 were eps 0; with it
  // the smallest gradient (0.2, v = 0.004) moves 4e-6 less: 0.02 / sqrt(0.0040001) = 0.3162238.
  auto opt = Optimizer::make(spec("rmsprop"), 3);
  expectNear(run(*opt, 1)[0], {0.6837762, -1.6837729, 0.1837724}, 5e-7, "rmsprop");
}

TEST(OptimizerByHand, RmspropEpsilonSitsInsideTheRoot) {
  // Keras divides by sqrt(v + eps), not sqrt(v) + eps; a large eps (0.1) shows which:
  //   v = 0.1 g^2 = [0.004, 0.025, 0.1]; sqrt(v + 0.1) = [0.3224903, 0.3535534, 0.4472136];
  //   p = [1 - 0.02 / 0.3224903, -2 + 0.05 / 0.3535534, 0.5 - 0.1 / 0.4472136].
  // (sqrt(v) + eps would give [0.8774852, -1.8062871, 0.2597469].)
  auto s = spec("rmsprop");
  s.epsilon = 0.1;
  auto opt = Optimizer::make(s, 3);
  expectNear(run(*opt, 1)[0], {0.9379826, -1.8585786, 0.2763932}, 2e-6, "rmsprop eps 0.1");
  // With momentum the same increment enters the momentum buffer.
  s.momentum = 0.5;
  auto withMomentum = Optimizer::make(s, 3);
  expectNear(run(*withMomentum, 1)[0], {0.9379826, -1.8585786, 0.2763932}, 2e-6, "rmsprop eps 0.1 momentum");
  compareRuns(*Optimizer::make(s, 3), rmspropReference(0.9, 0.5, 0.1, 3), "rmsprop eps 0.1 momentum, 3 steps");
}

TEST(Optimizer, GradScaleIsFoldedIn) {
  // Sum gradients with scale 1/B equal mean gradients with scale 1.
  for (const char* name : {"sgd", "adam", "rmsprop"}) {
    auto a = Optimizer::make(spec(name), 3), b = Optimizer::make(spec(name), 3);
    std::vector<float> pa = kP0, pb = kP0;
    const std::vector<float> sum = {4.0f, -8.0f, 2.0f}, mean = {1.0f, -2.0f, 0.5f};
    a->step(pa, sum, 0.25f, kLr);
    b->step(pb, mean, 1.0f, kLr);
    for (size_t i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(pa[i], pb[i]) << name << " " << i;
  }
}

// The names are Keras'; an unknown one is no kind at all (the project reader refuses it by field).
TEST(Optimizer, NamesAreKerasAndAnUnknownOneIsNoKind) {
  for (const char* name : {"sgd", "adam", "rmsprop"}) {
    ASSERT_TRUE(optimizerKindNamed(name).has_value()) << name;
    EXPECT_STREQ(toString(*optimizerKindNamed(name)), name);
    EXPECT_EQ(Optimizer::make(spec(name), 3)->name(), name);
  }
  EXPECT_FALSE(optimizerKindNamed("adagrad").has_value());
  EXPECT_FALSE(optimizerKindNamed("Adam").has_value());
}

}  // namespace
}  // namespace ml
