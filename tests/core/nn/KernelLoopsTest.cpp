// The element-wise loops rewritten so the portable (baseline x86-64) build vectorises them give the
// values of the plain definitions: the finiteness check on every kind of float, the relu gradient
// in place and out of place.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <vector>

#include "nn/Activations.h"
#include "nn/Optimizer.h"
#include "tensor/Denormals.h"
#include "tensor/Finite.h"

namespace ml {
namespace {

bool plainAllFinite(const std::vector<float>& v) {
  for (float x : v)
    if (!std::isfinite(x)) return false;
  return true;
}

TEST(KernelLoops, AllFiniteAgreesWithIsfiniteOnEveryKindOfFloat) {
  const float inf = std::numeric_limits<float>::infinity();
  const float specials[] = {0.0f,
                            -0.0f,
                            1.0f,
                            -1.0f,
                            std::numeric_limits<float>::max(),
                            -std::numeric_limits<float>::max(),
                            std::numeric_limits<float>::min(),
                            std::numeric_limits<float>::denorm_min(),
                            -std::numeric_limits<float>::denorm_min(),
                            inf,
                            -inf,
                            std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::signaling_NaN()};
  // Each special value at each position of buffers of several lengths (the vector body and the
  // scalar tail), among ordinary values.
  for (size_t n : {1u, 3u, 4u, 7u, 16u, 33u}) {
    for (float s : specials) {
      for (size_t at = 0; at < n; ++at) {
        std::vector<float> v(n, 0.25f);
        v[at] = s;
        ASSERT_EQ(allFinite(v.data(), v.size()), plainAllFinite(v)) << "n " << n << " at " << at << " value " << s;
      }
    }
  }
  EXPECT_TRUE(allFinite(nullptr, 0));
  // Random bit patterns: about 1 in 256 has the all-ones exponent.
  std::mt19937 rng(7);
  for (int t = 0; t < 2000; ++t) {
    std::vector<float> v(9);
    for (float& x : v) {
      const uint32_t b = rng();
      std::memcpy(&x, &b, sizeof x);
    }
    ASSERT_EQ(allFinite(v.data(), v.size()), plainAllFinite(v)) << "try " << t;
  }
}

TEST(KernelLoops, ReluGradientPassesDyWhereTheOutputIsPositive) {
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 1.0f);
  const int64_t n = 5, k = 37;
  std::vector<float> y(n * k), dy(n * k);
  for (auto& x : y) x = std::max(0.0f, d(rng));  // relu outputs: about half are 0
  y[3] = -0.0f;
  for (auto& x : dy) x = d(rng);
  std::vector<float> expect(n * k);
  for (size_t i = 0; i < y.size(); ++i) expect[i] = y[i] > 0.0f ? dy[i] : 0.0f;
  std::vector<float> out(n * k, 99.0f);
  activationBackward(Act::Relu, y.data(), dy.data(), out.data(), n, k);
  EXPECT_EQ(out, expect);
  activationBackward(Act::Relu, y.data(), dy.data(), dy.data(), n, k);  // in place, as Dense does
  EXPECT_EQ(dy, expect);
}

TEST(KernelLoops, FlushDenormalsFlushesInsideTheGuardAndRestoresTheCaller) {
  volatile float tiny = 1e-38f, half = 0.5f;  // volatile: computed at run time, not folded
  const float before = tiny * half;
  EXPECT_GT(before, 0.0f) << "without the guard the product is a subnormal";
  {
    const FlushDenormals flush;
#if defined(__x86_64__)
    EXPECT_TRUE(FlushDenormals::active());
    EXPECT_EQ(tiny * half, 0.0f) << "a subnormal result is flushed to zero";
    volatile float sub = 5e-39f;
    EXPECT_EQ(sub * 1.0f, 0.0f) << "a subnormal input is read as zero";
#endif
  }
  EXPECT_FALSE(FlushDenormals::active());
  EXPECT_EQ(tiny * half, before);
}

// Adam's first moment of a weight whose gradient stays zero decays by 0.9 a step: after 850 steps
// it is 0.1 * 0.9^850, about 1e-40, a subnormal. Under the guard it is exactly zero instead.
float adamMomentAfterIdleSteps(bool flush) {
  OptimizerSpec spec;
  spec.kind = ml::OptimizerKind::Adam;
  auto opt = Optimizer::make(spec, 1);
  std::vector<float> p{1.0f}, g{1.0f}, zero{0.0f};
  std::optional<FlushDenormals> guard;
  if (flush) guard.emplace();
  opt->beginStep(0.001f);
  opt->update(0, p, g, 1.0f);
  for (int step = 0; step < 850; ++step) {
    opt->beginStep(0.001f);
    opt->update(0, p, zero, 1.0f);
  }
  return opt->stateBuffers()[0][0];
}

TEST(KernelLoops, AdamMomentOfAnIdleWeightIsFlushedUnderTheGuard) {
  const float slow = adamMomentAfterIdleSteps(false);
  EXPECT_GT(slow, 0.0f);
  EXPECT_LT(slow, std::numeric_limits<float>::min()) << "a subnormal without the guard";
#if defined(__x86_64__)
  EXPECT_EQ(adamMomentAfterIdleSteps(true), 0.0f);
#endif
}

}  // namespace
}  // namespace ml
