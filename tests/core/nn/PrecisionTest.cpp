// Mixed precision's one rounding place (float16 and bfloat16, round to nearest even, subnormals,
// overflow, NaN) and what a policy changes in a Dense layer: only the compute format of its
// inputs, weights, outputs and gradients; the float32 master weights and float32 path stay as they were.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "nn/Conv2D.h"
#include "nn/Dense.h"
#include "nn/Precision.h"
#include "random/Rng.h"

namespace ml {
namespace {

const float kInf = std::numeric_limits<float>::infinity();

TEST(Float16Rounding, SubnormalsUnderflowAndOverflowAsOnAGpu) {
  EXPECT_EQ(roundToFloat16(0x1p-24f), 0x1p-24f);    // the smallest subnormal stays
  EXPECT_EQ(roundToFloat16(0x1p-25f), 0.0f);        // half of it: the tie goes to even (0)
  EXPECT_EQ(roundToFloat16(0x1.8p-25f), 0x1p-24f);  // above half rounds up
  EXPECT_EQ(roundToFloat16(0x1.fp-26f), 0.0f);      // below half: lost
  EXPECT_EQ(roundToFloat16(1e-9f), 0.0f);           // far below 2^-24
  EXPECT_EQ(roundToFloat16(-1e-9f), -0.0f);
  EXPECT_TRUE(std::signbit(roundToFloat16(-1e-9f)));         // the sign survives underflow
  EXPECT_EQ(roundToFloat16(0x3p-25f), 0x2p-24f);             // 1.5 quanta: tie to even (2)
  EXPECT_EQ(roundToFloat16(0x5p-25f), 0x2p-24f);             // 2.5 quanta: tie to even (2)
  EXPECT_EQ(roundToFloat16(0x1p-14f - 0x1p-25f), 0x1p-14f);  // 1023.5 quanta: up to the smallest normal
  EXPECT_EQ(roundToFloat16(0x1p-14f), 0x1p-14f);
  EXPECT_EQ(roundToFloat16(65504.0f), 65504.0f);  // the largest float16
  EXPECT_EQ(roundToFloat16(65519.0f), 65504.0f);  // below the halfway point
  EXPECT_EQ(roundToFloat16(65520.0f), kInf);      // halfway: ties to the even 2^16 = inf
  EXPECT_EQ(roundToFloat16(-65520.0f), -kInf);
  EXPECT_EQ(roundToFloat16(1e6f), kInf);
  EXPECT_EQ(roundToFloat16(kInf), kInf);
  EXPECT_TRUE(std::isnan(roundToFloat16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(roundToFloat16(1.0f + 0x1p-11f), 1.0f);            // tie between 1 and 1 + 2^-10: even
  EXPECT_EQ(roundToFloat16(1.0f + 0x3p-11f), 1.0f + 0x1p-9f);  // tie between odd and even: even
  EXPECT_EQ(roundToFloat16(1.0f + 0x1.1p-11f), 1.0f + 0x1p-10f);
}

#ifdef __FLT16_MAX__
// The compiler's own float -> _Float16 conversion (IEEE, round to nearest even) on random bit
// patterns of every magnitude, normals, subnormals, overflow and NaN included.
TEST(Float16Rounding, AgreesWithTheCompilersFloat16OnRandomBits) {
  Rng rng(7);
  int checked = 0;
  for (int i = 0; i < 200000; ++i) {
    // Exponents around float16's range (2^-30 .. 2^17), random mantissa and sign.
    const uint32_t mant = static_cast<uint32_t>(rng.next()) & 0x7fffffu;
    const uint32_t exp = 97u + static_cast<uint32_t>(rng.next() % 48u);
    const uint32_t bits = (static_cast<uint32_t>(rng.next()) & 0x80000000u) | (exp << 23) | mant;
    const float x = std::bit_cast<float>(bits);
    const float want = static_cast<float>(static_cast<_Float16>(x));
    ASSERT_EQ(std::bit_cast<uint32_t>(roundToFloat16(x)), std::bit_cast<uint32_t>(want)) << x;
    ++checked;
  }
  EXPECT_EQ(checked, 200000);
}
#endif

TEST(Bfloat16Rounding, NearestEvenWithFloat32sRange) {
  EXPECT_EQ(roundToBfloat16(1.0f + 0x1p-8f), 1.0f);            // tie: even
  EXPECT_EQ(roundToBfloat16(1.0f + 0x3p-8f), 1.0f + 0x1p-6f);  // tie between odd and even: even
  EXPECT_EQ(roundToBfloat16(1.0f + 0x1.1p-8f), 1.0f + 0x1p-7f);
  EXPECT_EQ(roundToBfloat16(0x1p-24f), 0x1p-24f);             // no float16-style underflow
  EXPECT_NEAR(roundToBfloat16(1e-30f), 1e-30f, 1e-30 / 256);  // tiny values keep 8 significant bits
  EXPECT_EQ(roundToBfloat16(65520.0f), 65536.0f);             // no float16-style overflow
  EXPECT_EQ(roundToBfloat16(std::numeric_limits<float>::max()), kInf);
  EXPECT_TRUE(std::isnan(roundToBfloat16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(roundToBfloat16(-kInf), -kInf);
  EXPECT_EQ(parsePrecision("mixed_bfloat16"), Precision::MixedBfloat16);
  EXPECT_FALSE(parsePrecision("bf16").has_value());
}

// One Dense (5 -> 4, tanh) forward and backward under a policy, from the same weights.
struct DenseRun {
  std::vector<float> params, grads, y, dx;
};
DenseRun runDense(Precision p, float inputScale = 1.0f, Act act = Act::Tanh) {
  Dense d(4, act);
  d.name = "dense";
  d.build({5});
  DenseRun r;
  r.params.assign(static_cast<size_t>(d.paramCount()), 0.0f);
  r.grads.assign(r.params.size(), 0.0f);
  d.bind(r.params.data(), r.grads.data());
  d.initialize(5);
  d.setPrecision(p);
  Rng rng(9);
  std::vector<float> x(6 * 5), dy(6 * 4);
  for (float& v : x) v = static_cast<float>(rng.uniform(-1, 1)) * inputScale;
  for (float& v : dy) v = static_cast<float>(rng.uniform(-1, 1));
  r.y.assign(dy.size(), 0.0f);
  r.dx.assign(x.size(), 0.0f);
  StepContext ctx;
  ctx.training = true;
  d.forward(x.data(), r.y.data(), 6, ctx);
  d.backward(x.data(), r.y.data(), dy.data(), r.dx.data(), 6, ctx);
  return r;
}

bool representable(Precision p, const std::vector<float>& v) {
  for (float f : v)
    if (std::bit_cast<uint32_t>(roundOne(p, f)) != std::bit_cast<uint32_t>(f)) return false;
  return true;
}

double maxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

TEST(DensePrecision, LowPrecisionRoundsComputeButKeepsFloat32Weights) {
  const DenseRun f32 = runDense(Precision::Float32);
  EXPECT_FALSE(representable(Precision::MixedBfloat16, f32.y));  // float32 really computes in float32
  for (Precision p : {Precision::MixedBfloat16, Precision::MixedFloat16}) {
    const DenseRun low = runDense(p);
    SCOPED_TRACE(toString(p));
    EXPECT_EQ(low.params, f32.params);  // the master weights are untouched float32
    EXPECT_FALSE(representable(p, low.params));
    EXPECT_TRUE(representable(p, low.y));   // outputs, input gradients and the step's weight
    EXPECT_TRUE(representable(p, low.dx));  // gradients come out in the low format
    EXPECT_TRUE(representable(p, low.grads));
    // ... and agree with float32 to the format's precision (8 or 11 significant bits).
    const double tol = p == Precision::MixedBfloat16 ? 0.05 : 0.006;
    EXPECT_LT(maxAbsDiff(low.y, f32.y), tol);
    EXPECT_LT(maxAbsDiff(low.dx, f32.dx), 2 * tol);
    EXPECT_LT(maxAbsDiff(low.grads, f32.grads), 4 * tol);
    EXPECT_GT(maxAbsDiff(low.grads, f32.grads), 0.0);
  }
}

TEST(DensePrecision, Float16OverflowsWhereBfloat16AndFloat32DoNot) {
  // Inputs up to 6e4 (float16 holds them) make some linear outputs beyond 65504, which float16
  // turns into inf, and the kernel gradient x^T dz (about 6e4 x |dz| summed over 6 rows) overflows
  // too; bfloat16 holds both.
  const DenseRun f16 = runDense(Precision::MixedFloat16, 6e4f, Act::Linear);
  const DenseRun bf16 = runDense(Precision::MixedBfloat16, 6e4f, Act::Linear);
  const DenseRun f32 = runDense(Precision::Float32, 6e4f, Act::Linear);
  auto infs = [](const std::vector<float>& v) {
    int n = 0;
    for (float f : v) n += std::isinf(f) ? 1 : 0;
    return n;
  };
  EXPECT_GT(infs(f16.y), 0);
  EXPECT_GT(infs(f16.grads), 0);
  EXPECT_EQ(infs(bf16.y) + infs(bf16.grads), 0);
  EXPECT_EQ(infs(f32.y) + infs(f32.grads), 0);
  int beyond = 0;
  for (size_t i = 0; i < f32.y.size(); ++i) {  // exactly the values beyond float16's range became inf
    beyond += std::fabs(f32.y[i]) > 66000.0f ? 1 : 0;
    if (std::fabs(f32.y[i]) > 66000.0f) {
      EXPECT_TRUE(std::isinf(f16.y[i])) << f32.y[i];
    }
    if (std::fabs(f32.y[i]) < 65000.0f) {
      EXPECT_FALSE(std::isinf(f16.y[i])) << f32.y[i];
    }
  }
  EXPECT_GT(beyond, 0);
  EXPECT_LT(beyond, static_cast<int>(f32.y.size()));
}

// Conv2D (3x3, same padding, 2 filters on 5x5x2) forward and backward under each policy.
TEST(Conv2DPrecision, LowPrecisionRoundsComputeButKeepsFloat32Weights) {
  auto run = [](Precision p) {
    Conv2D c(2, Window{3, 3, 1, 1, true}, Act::Relu, true, "glorot_uniform", "ones");
    c.name = "conv2d";
    c.build({5, 5, 2});
    DenseRun r;
    r.params.assign(static_cast<size_t>(c.paramCount()), 0.0f);
    r.grads.assign(r.params.size(), 0.0f);
    c.bind(r.params.data(), r.grads.data());
    c.initialize(3);
    c.setPrecision(p);
    Rng rng(4);
    std::vector<float> x(static_cast<size_t>(3 * c.inFeatures())), dy(static_cast<size_t>(3 * c.outFeatures()));
    for (float& v : x) v = static_cast<float>(rng.uniform(-1, 1));
    for (float& v : dy) v = static_cast<float>(rng.uniform(-1, 1));
    r.y.assign(dy.size(), 0.0f);
    r.dx.assign(x.size(), 0.0f);
    StepContext ctx;
    ctx.training = true;
    c.forward(x.data(), r.y.data(), 3, ctx);
    c.backward(x.data(), r.y.data(), dy.data(), r.dx.data(), 3, ctx);
    return r;
  };
  const DenseRun f32 = run(Precision::Float32);
  EXPECT_FALSE(representable(Precision::MixedBfloat16, f32.y));
  EXPECT_FALSE(representable(Precision::MixedBfloat16, f32.grads));
  for (Precision p : {Precision::MixedBfloat16, Precision::MixedFloat16}) {
    SCOPED_TRACE(toString(p));
    const DenseRun low = run(p);
    EXPECT_EQ(low.params, f32.params);
    EXPECT_TRUE(representable(p, low.y));
    EXPECT_TRUE(representable(p, low.dx));
    EXPECT_TRUE(representable(p, low.grads));
    const double tol = p == Precision::MixedBfloat16 ? 0.05 : 0.006;
    EXPECT_LT(maxAbsDiff(low.y, f32.y), 2 * tol);
    EXPECT_LT(maxAbsDiff(low.dx, f32.dx), 4 * tol);
    EXPECT_LT(maxAbsDiff(low.grads, f32.grads), 8 * tol);
  }
}

// The memory a mixed policy adds, as the live summary shows it, is what the layers hold after a
// forward and backward at that batch: Dense and Conv2D (with two im2col chunks), both policies;
// nothing under float32.
TEST(PrecisionMemory, PredictedWorkingCopiesAreWhatTheLayersHoldAfterAStep) {
  for (Precision p : {Precision::Float32, Precision::MixedBfloat16, Precision::MixedFloat16}) {
    SCOPED_TRACE(toString(p));
    Dense d(24, Act::Relu);
    d.name = "dense";
    d.build({40});
    Conv2D c(16, Window{3, 3, 1, 1, true}, Act::Relu, true, "glorot_uniform", "zeros");
    c.name = "conv2d";
    c.build({64, 64, 8});  // 64*64 positions x 72 values: 294,912 floats per sample, chunks of 7 samples
    for (Layer* l : {static_cast<Layer*>(&d), static_cast<Layer*>(&c)}) {
      const int64_t n = 10;  // two im2col chunks (7 + 3)
      std::vector<float> params(static_cast<size_t>(l->paramCount())), grads(params.size(), 0.0f);
      l->bind(params.data(), grads.data());
      l->initialize(1);
      if (auto* dd = dynamic_cast<Dense*>(l)) dd->setPrecision(p);
      if (auto* cc = dynamic_cast<Conv2D*>(l)) cc->setPrecision(p);
      std::vector<float> x(static_cast<size_t>(n * l->inFeatures()), 0.5f), y(static_cast<size_t>(n * l->outFeatures()));
      std::vector<float> dy(y.size(), 0.1f), dx(x.size());
      StepContext ctx;
      ctx.training = true;
      EXPECT_EQ(l->lowPrecisionBytesInUse(), 0) << l->type();
      l->forward(x.data(), y.data(), n, ctx);
      l->backward(x.data(), y.data(), dy.data(), dx.data(), n, ctx);
      EXPECT_EQ(l->lowPrecisionBytes(n), l->lowPrecisionBytesInUse()) << l->type();
      if (p == Precision::Float32) {
        EXPECT_EQ(l->lowPrecisionBytes(n), 0) << l->type();
      } else {
        EXPECT_GT(l->lowPrecisionBytes(n), 0) << l->type();
      }
    }
  }
}

}  // namespace
}  // namespace ml
