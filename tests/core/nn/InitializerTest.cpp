// Keras initialisers: ranges, variances, determinism by seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "Error.h"
#include "nn/Initializers.h"

namespace ml {
namespace {

struct Stats {
  double mean = 0, var = 0, minV = 1e30, maxV = -1e30;
};

Stats stats(const std::vector<float>& w) {
  Stats s;
  for (float v : w) {
    s.mean += v;
    s.minV = std::min(s.minV, static_cast<double>(v));
    s.maxV = std::max(s.maxV, static_cast<double>(v));
  }
  s.mean /= static_cast<double>(w.size());
  for (float v : w) s.var += (v - s.mean) * (v - s.mean);
  s.var /= static_cast<double>(w.size());
  return s;
}

constexpr int64_t kFanIn = 200, kFanOut = 300;

std::vector<float> init(const std::string& name, uint64_t seed, int64_t fanIn = kFanIn, int64_t fanOut = kFanOut) {
  std::vector<float> w(static_cast<size_t>(fanIn * fanOut), -99.0f);
  initialize(name, w.data(), static_cast<int64_t>(w.size()), fanIn, fanOut, seed);
  return w;
}

TEST(Initializers, GlorotUniformRangeAndVariance) {
  const auto w = init("glorot_uniform", 1);
  const double limit = std::sqrt(6.0 / (kFanIn + kFanOut));
  const Stats s = stats(w);
  EXPECT_GE(s.minV, -limit);
  EXPECT_LE(s.maxV, limit);
  // It fills the range: the extremes are near the limits.
  EXPECT_LT(s.minV, -0.99 * limit);
  EXPECT_GT(s.maxV, 0.99 * limit);
  EXPECT_NEAR(s.mean, 0.0, 0.01 * limit);
  // Var of U(-l, l) = l^2 / 3 = 2 / (fan_in + fan_out).
  EXPECT_NEAR(s.var, 2.0 / (kFanIn + kFanOut), 0.03 * 2.0 / (kFanIn + kFanOut));
}

TEST(Initializers, GlorotNormalVarianceAndTruncation) {
  const auto w = init("glorot_normal", 2);
  const Stats s = stats(w);
  const double var = 2.0 / (kFanIn + kFanOut);
  EXPECT_NEAR(s.var, var, 0.05 * var);
  const double cut = 2.0 * std::sqrt(var) / 0.87962566103423978;
  EXPECT_GE(s.minV, -cut - 1e-6);
  EXPECT_LE(s.maxV, cut + 1e-6);
}

TEST(Initializers, HeNormalVariance) {
  const auto w = init("he_normal", 3);
  const Stats s = stats(w);
  const double var = 2.0 / kFanIn;
  EXPECT_NEAR(s.mean, 0.0, 0.01 * std::sqrt(var));
  EXPECT_NEAR(s.var, var, 0.05 * var);
  // Truncated at 2 std of the underlying normal (std = sqrt(2 / fan_in) / .8796).
  const double cut = 2.0 * std::sqrt(var) / 0.87962566103423978;
  EXPECT_GE(s.minV, -cut - 1e-6);
  EXPECT_LE(s.maxV, cut + 1e-6);
  EXPECT_LT(s.minV, -0.95 * cut);
}

TEST(Initializers, HeUniformRangeAndVariance) {
  const auto w = init("he_uniform", 4);
  const Stats s = stats(w);
  const double limit = std::sqrt(6.0 / kFanIn);
  EXPECT_GE(s.minV, -limit);
  EXPECT_LE(s.maxV, limit);
  EXPECT_NEAR(s.var, 2.0 / kFanIn, 0.03 * 2.0 / kFanIn);
}

TEST(Initializers, RandomNormalAndUniformTakeKerasDefaults) {
  const Stats n = stats(init("random_normal", 5));
  EXPECT_NEAR(n.mean, 0.0, 0.002);
  EXPECT_NEAR(n.var, 0.05 * 0.05, 0.05 * 0.05 * 0.05);
  EXPECT_GT(n.maxV, 3 * 0.05) << "not truncated at 2 std";
  const Stats u = stats(init("random_uniform", 6));
  EXPECT_GE(u.minV, -0.05);
  EXPECT_LE(u.maxV, 0.05);
  EXPECT_GT(u.maxV, 0.049);
  EXPECT_NEAR(u.var, 0.05 * 0.05 / 3, 0.03 * 0.05 * 0.05 / 3);
}

TEST(Initializers, ZerosAndOnes) {
  for (float v : init("zeros", 1, 3, 4)) EXPECT_EQ(v, 0.0f);
  for (float v : init("ones", 1, 3, 4)) EXPECT_EQ(v, 1.0f);
}

TEST(Initializers, DeterministicBySeed) {
  for (const char* name : {"glorot_uniform", "glorot_normal", "he_uniform", "he_normal"}) {
    EXPECT_EQ(init(name, 7, 20, 30), init(name, 7, 20, 30)) << name;
    EXPECT_NE(init(name, 7, 20, 30), init(name, 8, 20, 30)) << name;
  }
}

TEST(Initializers, UnknownNameThrowsListingTheAllowed) {
  try {
    validateInitializer("lecun_normal", "layer 2 'dense'");
    FAIL();
  } catch (const UserError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("layer 2 'dense'"), std::string::npos) << m;
    EXPECT_NE(m.find("lecun_normal"), std::string::npos) << m;
    EXPECT_NE(m.find("glorot_uniform"), std::string::npos) << m;
  }
  std::vector<float> w(4);
  EXPECT_THROW(initialize("orthogonal", w.data(), 4, 2, 2, 1), UserError);
  EXPECT_NO_THROW(validateInitializer("he_normal", "x"));
}

}  // namespace
}  // namespace ml
