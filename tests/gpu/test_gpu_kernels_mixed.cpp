// Mixed precision's kernels against the CPU layers in the same policy (nn/Dense.cpp and
// nn/Conv2D.cpp round their inputs, kernels, outputs and gradients where a GPU computing in the low
// format does): Dense and Conv2D (over its windows) through cublasGemmEx with bfloat16 and float16
// operands, and the loss scale. The sums are float32 on both sides but in other orders,
// so a value near a rounding boundary of the low format may round the other way: each output is
// held to one unit in the last place of its format (2^-8 relative for bfloat16, 2^-11 for float16),
// and float16's overflow to inf and underflow to 0 must happen where the CPU's do. Skips with the
// reason where there is no usable GPU.
#include "GpuKernelTest.h"
#include "nn/Conv2D.h"
#include "nn/Precision.h"

namespace ml {
namespace {

int gpuPrecision(Precision p) { return p == Precision::MixedBfloat16 ? MLCUDA_PRECISION_BFLOAT16 : MLCUDA_PRECISION_FLOAT16; }
double ulp(Precision p) { return p == Precision::MixedBfloat16 ? 1.0 / 256 : 1.0 / 2048; }

// Every element within one unit in the last place of the low format of the CPU's value (or of the
// tensor's scale, for values near zero), inf where the CPU has inf, and zero where it has zero
// within the same tolerance.
::testing::AssertionResult lowClose(const std::vector<float>& got, const std::vector<float>& want, Precision p,
                                    const std::string& what) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << what << ": sizes differ";
  double scale = 0;
  for (float v : want)
    if (std::isfinite(v)) scale = std::max(scale, std::fabs(static_cast<double>(v)));
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i]) || std::isinf(got[i])) {
      if (got[i] != want[i])
        return ::testing::AssertionFailure() << what << ": [" << i << "] gpu " << got[i] << ", cpu " << want[i];
      continue;
    }
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double allowed = 2 * ulp(p) * std::max(std::fabs(static_cast<double>(want[i])), 1e-3 * scale) + 1e-30;
    if (!(d <= allowed))
      return ::testing::AssertionFailure() << what << ": [" << i << "] gpu " << got[i] << ", cpu " << want[i] << " (allowed "
                                           << allowed << ")";
  }
  return ::testing::AssertionSuccess();
}

TEST_F(Gpu, DenseInEachLowPrecisionMatchesTheCpuLayer) {
  uint64_t seed = 7000;
  for (Precision p : {Precision::MixedBfloat16, Precision::MixedFloat16})
    for (const Shape3& s : {Shape3{37, 53, 29}, Shape3{64, 128, 10}})
      for (Act act : {Act::Relu, Act::Tanh, Act::Softmax})
        for (bool bias : {true, false}) {
          const std::string what = std::string(toString(p)) + " " + describe(act, s, bias);
          Dense d(s.out, act, bias, "glorot_uniform", "zeros");
          d.name = "dense";
          d.build({s.in});
          d.setPrecision(p);
          std::vector<float> params = random(static_cast<size_t>(d.paramCount()), ++seed, -0.3, 0.3);
          const std::vector<float> grads0 = random(params.size(), ++seed, -0.1, 0.1);
          std::vector<float> grads = grads0;
          d.bind(params.data(), grads.data());
          const std::vector<float> x = random(static_cast<size_t>(s.n * s.in), ++seed);
          std::vector<float> y(static_cast<size_t>(s.n * s.out));
          d.forward(x.data(), y.data(), s.n, StepContext{});
          const std::vector<float> dy0 = random(y.size(), ++seed);
          std::vector<float> dy = dy0, dx(x.size());
          d.backward(x.data(), y.data(), dy.data(), dx.data(), s.n, StepContext{});

          const size_t W = static_cast<size_t>(s.in * s.out);
          Dev<float> gx(x), gp(params), gy(y.size()), gdy(dy0), gg(grads0), gdx(dx.size());
          ok(P().denseForwardLow(C(), gpuPrecision(p), gx.data(), gp.data(), bias ? gp.data() + W : nullptr, gy.data(), s.n, s.in,
                                 s.out, static_cast<int>(act)));
          const std::vector<float> forward = gy.get();
          EXPECT_TRUE(lowClose(forward, y, p, what + " y"));
          Dev<float> gyc(y);  // the CPU's outputs: the backward's inputs are then the same
          ok(P().denseBackwardLow(C(), gpuPrecision(p), gx.data(), gp.data(), gyc.data(), gdy.data(), gdx.data(), gg.data(),
                                  bias ? gg.data() + W : nullptr, s.n, s.in, s.out, static_cast<int>(act), 0));
          EXPECT_TRUE(lowClose(gg.get(), grads, p, what + " dw, db"));
          EXPECT_TRUE(lowClose(gdx.get(), dx, p, what + " dx"));
        }
}

// Float16's range where a GPU has it: inputs below 2^-25 become 0, products beyond 65504 become inf
// in the rounded output, exactly where the CPU's float16 path has them.
TEST_F(Gpu, DenseInFloat16UnderflowsAndOverflowsWhereTheCpuDoes) {
  const int64_t n = 4, in = 3, out = 2;
  Dense d(out, Act::Linear, false, "glorot_uniform", "zeros");
  d.name = "dense";
  d.build({in});
  d.setPrecision(Precision::MixedFloat16);
  std::vector<float> params = {1.0f, 2.0f, 300.0f, 1.0f, 1.0f, 1.0f}, grads(6, 0.0f);
  d.bind(params.data(), grads.data());
  const std::vector<float> x = {1e-8f,  0.0f,   0.0f,   // below half of 2^-24: rounds to 0
                                250.0f, 0.0f,   0.0f,   // 250 and 500: fine
                                0.0f,   250.0f, 0.0f,   // 250 x 300 = 75000 > 65504: inf
                                3e-5f,  6e-8f,  1.0f};  // subnormal inputs, kept in float16's steps of 2^-24
  std::vector<float> y(static_cast<size_t>(n * out));
  d.forward(x.data(), y.data(), n, StepContext{});
  ASSERT_EQ(y[0], 0.0f);
  ASSERT_TRUE(std::isinf(y[4]) || std::isinf(y[5])) << "the CPU's reference should overflow";
  Dev<float> gx(x), gp(params), gy(y.size());
  ok(P().denseForwardLow(C(), MLCUDA_PRECISION_FLOAT16, gx.data(), gp.data(), nullptr, gy.data(), n, in, out, 0));
  EXPECT_TRUE(sameBits(gy.get(), y, "float16 range"));
}

// The windows' packing (im2col) and the gather back (col2im) over "same" padding that is one
// larger after than before, a stride of 2 and a valid window that leaves rows over.
TEST_F(Gpu, Conv2DInEachLowPrecisionMatchesTheCpuLayer) {
  uint64_t seed = 8000;
  const Window windows[] = {{2, 2, 1, 1, true}, {3, 3, 2, 2, true}, {3, 3, 2, 2, false}};
  for (Precision p : {Precision::MixedBfloat16, Precision::MixedFloat16})
    for (const Window& win : windows) {
      const std::string what = std::string(toString(p)) + " " + std::to_string(win.kh) + "x" + std::to_string(win.kw) +
                               " stride " + std::to_string(win.sh) + (win.same ? " same" : " valid");
      Conv2D conv(5, win, Act::Relu, true, "glorot_uniform", "zeros");
      conv.name = "conv";
      conv.build({6, 5, 3});
      conv.setPrecision(p);
      const Geometry& geo = conv.geometry();
      mlcuda_conv_geometry g{geo.h,  geo.w,  geo.c,  geo.oh,     geo.ow,      5, win.kh,
                             win.kw, win.sh, win.sw, geo.padTop, geo.padLeft, 0, 0};
      g.pad_bottom = std::max<int64_t>((geo.oh - 1) * win.sh + win.kh - geo.h - geo.padTop, 0);
      g.pad_right = std::max<int64_t>((geo.ow - 1) * win.sw + win.kw - geo.w - geo.padLeft, 0);
      std::vector<float> params = random(static_cast<size_t>(conv.paramCount()), ++seed, -0.5, 0.5);
      const std::vector<float> grads0 = random(params.size(), ++seed, -0.1, 0.1);
      std::vector<float> grads = grads0;
      conv.bind(params.data(), grads.data());
      const int64_t n = 3;
      const std::vector<float> x = random(static_cast<size_t>(n * conv.inFeatures()), ++seed);
      std::vector<float> y(static_cast<size_t>(n * conv.outFeatures()));
      conv.forward(x.data(), y.data(), n, StepContext{});
      const std::vector<float> dy0 = random(y.size(), ++seed);
      std::vector<float> dy = dy0, dx(x.size());
      conv.backward(x.data(), y.data(), dy.data(), dx.data(), n, StepContext{});

      const size_t K = static_cast<size_t>(win.kh * win.kw * 3 * 5);
      Dev<float> gx(x), gp(params), gy(y.size()), gdy(dy0), gg(grads0), gdx(dx.size());
      ok(P().conv2dForwardLow(C(), gpuPrecision(p), &g, gx.data(), gp.data(), gp.data() + K, gy.data(), n,
                              static_cast<int>(Act::Relu)));
      EXPECT_TRUE(lowClose(gy.get(), y, p, what + " y"));
      Dev<float> gyc(y);
      ok(P().conv2dBackwardLow(C(), gpuPrecision(p), &g, gx.data(), gp.data(), gyc.data(), gdy.data(), gdx.data(), gg.data(),
                               gg.data() + K, n, static_cast<int>(Act::Relu)));
      EXPECT_TRUE(lowClose(gg.get(), grads, p, what + " dw, db"));
      EXPECT_TRUE(lowClose(gdx.get(), dx, p, what + " dx"));
    }
}

TEST_F(Gpu, ScaleMultipliesInFloat32) {
  const std::vector<float> v = random(1000, 91);
  Dev<float> g(v);
  ok(P().scale(C(), g.data(), static_cast<int64_t>(v.size()), 32768.0f));
  std::vector<float> want = v;
  for (float& x : want) x *= 32768.0f;
  EXPECT_TRUE(sameBits(g.get(), want, "scale"));
  ok(P().scale(C(), g.data(), 0, 2.0f));  // nothing to do
}

}  // namespace
}  // namespace ml

namespace ml {
namespace {

// bfloat16 on the wire in the logical-GPU all-reduce: each value rounded before it joins, the
// running sum rounded after each addition (nn/Precision.h's rounding on the host), the same bits
// in every buffer.
TEST_F(Gpu, LocalAllReduceWithBfloat16OnTheWireRoundsAsTheHostRing) {
  const int64_t elements = 4099;
  std::vector<std::vector<float>> host;
  for (int r = 0; r < 3; ++r) host.push_back(random(static_cast<size_t>(elements), 900 + static_cast<uint64_t>(r)));
  Dev<float> b0(host[0]), b1(host[1]), b2(host[2]);
  float* buffers[] = {b0.data(), b1.data(), b2.data()};
  // On the comm stream, after the buffers' uploads (ready) and before the reads back (done).
  mlcuda_event *ready = nullptr, *done = nullptr;
  ok(P().eventCreate(C(), &ready));
  ok(P().eventCreate(C(), &done));
  ok(P().eventRecord(C(), MLCUDA_STREAM_COMPUTE, ready));
  ok(P().localAllReduceBf16(C(), buffers, 3, elements, &ready, 1, done));
  ok(P().streamWaitEvent(C(), MLCUDA_STREAM_COMPUTE, done));
  std::vector<float> want(static_cast<size_t>(elements));
  for (size_t i = 0; i < want.size(); ++i) {
    float s = roundToBfloat16(host[0][i]);
    for (int r = 1; r < 3; ++r) s = roundToBfloat16(s + roundToBfloat16(host[static_cast<size_t>(r)][i]));
    want[i] = s;
  }
  EXPECT_TRUE(sameBits(b0.get(), want, "replica 0"));
  EXPECT_TRUE(sameBits(b1.get(), want, "replica 1"));
  EXPECT_TRUE(sameBits(b2.get(), want, "replica 2"));
  ok(P().synchronize(C()));
  P().eventDestroy(ready);
  P().eventDestroy(done);
}

// bfloat16 over NCCL on one rank (gpu:0), twice: the second call's 2 MiB of bfloat16 outgrow the
// comm scratch's first 1 MiB, so it grows while its context is linked to the communicator; growing
// waits for the comm stream, and that wait tries the communicator's lock. The all-reduce grows it
// before taking the lock: under it, the lock (an OwnedMutex) refuses the wait and the call fails.
// The sum over one rank is its values rounded to bfloat16. Also run against the fake plugin.
TEST_F(Gpu, NcclBfloat16OnTheWireOnOneRankGrowsItsScratchOutsideTheLock) {
  const int one[] = {0};
  mlcuda_nccl* comm = nullptr;
  const mlcuda_status created = P().ncclCreate(one, 1, &comm);
  if (created.code == MLCUDA_ERR_NCCL && std::string(created.message).find("cannot be loaded") != std::string::npos)
    GTEST_SKIP() << created.message;
  ok(created);
  for (const size_t n : {size_t{1000}, size_t{1} << 20}) {
    const std::vector<float> v = random(n, 905 + n);
    Dev<float> b(v);
    mlcuda_context* contexts[] = {C()};
    float* buffers[] = {b.data()};
    ok(P().ncclAllReduceBf16(comm, contexts, buffers, static_cast<int64_t>(n)));
    ok(P().synchronize(C()));
    std::vector<float> want(n);
    for (size_t i = 0; i < n; ++i) want[i] = roundToBfloat16(v[i]);
    EXPECT_TRUE(sameBits(b.get(), want, "one rank, " + std::to_string(n) + " values"));
  }
  P().ncclDestroy(comm);
}

}  // namespace
}  // namespace ml
