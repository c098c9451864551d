// The convolutional layers' kernels against the CPU layers (core/nn on the same random inputs):
// Conv2D on cuDNN (valid and same padding, TensorFlow's asymmetric "same" included, strides 1 and 2,
// one and three channels, with and without bias), max and average pooling and global average pooling
// bit for bit (max pooling's argmax included, ties at zero as after a ReLU), BatchNormalization in
// training and evaluation (bit for bit where the GPU gets the CPU's sums), binary cross-entropy and
// binary accuracy (Dense's backward fused with a sigmoid: test_gpu_kernels.cpp's
// DenseBackwardMatchesCpu). Skips with the reason where there is no usable GPU, as
// test_gpu_kernels.cpp does.
#include "GpuKernelTest.h"
#include "nn/BatchNorm.h"
#include "nn/Conv2D.h"
#include "nn/Pooling.h"

namespace ml {
namespace {

// cuDNN's algorithms (implicit GEMM, Winograd, ...) add in other orders than oneDNN or OpenBLAS:
// float rounding, relative to the tensor's scale.
constexpr double kConvTol = 1e-4;

// The plugin's geometry of a CPU layer's: TensorFlow's "same" puts the odd padding row or column
// after (bottom, right).
mlcuda_conv_geometry gpuGeometry(const Geometry& g, const Window& w, int64_t filters) {
  mlcuda_conv_geometry r{};
  r.h = g.h;
  r.w = g.w;
  r.c = g.c;
  r.oh = g.oh;
  r.ow = g.ow;
  r.filters = filters;
  r.kh = w.kh;
  r.kw = w.kw;
  r.sh = w.sh;
  r.sw = w.sw;
  r.pad_top = g.padTop;
  r.pad_left = g.padLeft;
  r.pad_bottom = w.same ? std::max<int64_t>((g.oh - 1) * w.sh + w.kh - g.h, 0) - g.padTop : 0;
  r.pad_right = w.same ? std::max<int64_t>((g.ow - 1) * w.sw + w.kw - g.w, 0) - g.padLeft : 0;
  return r;
}

struct ConvCase {
  int64_t h, w, c, kh, kw, s, filters;
  bool same;
};

std::string describe(const ConvCase& k) {
  std::ostringstream o;
  o << k.h << "x" << k.w << "x" << k.c << " kernel " << k.kh << "x" << k.kw << " stride " << k.s << " "
    << (k.same ? "same" : "valid") << " filters " << k.filters;
  return o.str();
}

template <class T>
std::vector<T> slice(const std::vector<T>& v, size_t from, size_t to) {
  return std::vector<T>(v.begin() + static_cast<long>(from), v.begin() + static_cast<long>(to));
}

// ---- Conv2D -----------------------------------------------------------------------------------------

// Forward, then backward with and without dx into non-zero gradients (dw and db accumulate), held
// against ml::Conv2D; the backward again from the same gradients gives the same bits (cuDNN's
// deterministic algorithms, the deterministic bias sum).
TEST_F(Gpu, Conv2DForwardAndBackwardMatchCpu) {
  const ConvCase cases[] = {
      {9, 7, 1, 3, 3, 1, 4, false},   // valid, one channel
      {9, 7, 3, 3, 3, 1, 5, true},    // same, symmetric padding
      {10, 9, 3, 3, 3, 2, 8, true},   // same, stride 2: one more row and column after (asymmetric)
      {8, 8, 3, 2, 2, 1, 6, true},    // a 2x2 kernel, same: asymmetric
      {11, 9, 1, 5, 3, 2, 3, false},  // valid, stride 2, rows left over
      {7, 7, 3, 3, 3, 2, 4, true},    // same, stride 2, symmetric
  };
  const int64_t n = 3;
  uint64_t seed = 1000;
  for (const ConvCase& k : cases)
    for (const Act act : {Act::Relu, Act::Linear})
      for (const bool bias : {true, false}) {
        const std::string what = describe(k) + " " + toString(act) + (bias ? " bias" : " no-bias");
        const Window win{k.kh, k.kw, k.s, k.s, k.same};
        Conv2D conv(k.filters, win, act, bias, "glorot_uniform", "zeros");
        conv.name = "conv";
        conv.build({k.h, k.w, k.c});
        const mlcuda_conv_geometry g = gpuGeometry(conv.geometry(), win, k.filters);
        const std::vector<float> params = random(static_cast<size_t>(conv.paramCount()), ++seed, -0.5, 0.5);
        const std::vector<float> grads0 = random(params.size(), ++seed);  // non-zero: gradients accumulate
        std::vector<float> p = params, grads = grads0;
        conv.bind(p.data(), grads.data());
        const std::vector<float> x = random(static_cast<size_t>(n * conv.inFeatures()), ++seed);
        std::vector<float> y(static_cast<size_t>(n * conv.outFeatures()));
        conv.forward(x.data(), y.data(), n, StepContext{});
        const std::vector<float> dy0 = random(y.size(), ++seed);
        std::vector<float> dy = dy0, dx(x.size());
        conv.backward(x.data(), y.data(), dy.data(), dx.data(), n, StepContext{});

        const size_t kernel = static_cast<size_t>(k.kh * k.kw * k.c * k.filters);
        Dev<float> gx(x), gp(params), gy(y.size());
        const float* gb = bias ? gp.data() + kernel : nullptr;
        ok(P().conv2dForward(C(), &g, gx.data(), gp.data(), gb, gy.data(), n, static_cast<int>(act)));
        const std::vector<float> forward = gy.get();
        ASSERT_TRUE(close(forward, y, kConvTol, what + " y"));

        for (const bool withDx : {true, false}) {
          const std::string pass = what + (withDx ? " dx" : " no-dx");
          Dev<float> gyc(forward), gdy(dy0), gg(grads0), gdx(dx.size());
          auto backward = [&] {
            gdy.put(dy0);
            gg.put(grads0);
            ok(P().conv2dBackward(C(), &g, gx.data(), gp.data(), gyc.data(), gdy.data(), withDx ? gdx.data() : nullptr, gg.data(),
                                  bias ? gg.data() + kernel : nullptr, n, static_cast<int>(act)));
            return gg.get();
          };
          const std::vector<float> got = backward();
          EXPECT_TRUE(close(slice(got, 0, kernel), slice(grads, 0, kernel), kConvTol, pass + " dw"));
          if (bias) {
            EXPECT_TRUE(close(slice(got, kernel, got.size()), slice(grads, kernel, grads.size()), kConvTol, pass + " db"));
          }
          if (withDx) {
            EXPECT_TRUE(close(gdx.get(), dx, kConvTol, pass + " dx"));
          }
          EXPECT_TRUE(sameBits(backward(), got, pass + ", gradients again"));
        }
      }
}

// The other activations, a wider layer, and a batch of one (another cached plan).
TEST_F(Gpu, Conv2DSigmoidTanhAndBatchOfOneMatchCpu) {
  uint64_t seed = 1100;
  for (const Act act : {Act::Sigmoid, Act::Tanh})
    for (const int64_t n : {int64_t{1}, int64_t{4}}) {
      const std::string what = std::string(toString(act)) + " n=" + std::to_string(n);
      const Window win{3, 3, 1, 1, true};
      Conv2D conv(16, win, act, true, "glorot_uniform", "zeros");
      conv.name = "conv";
      conv.build({12, 12, 8});
      const mlcuda_conv_geometry g = gpuGeometry(conv.geometry(), win, 16);
      std::vector<float> params = random(static_cast<size_t>(conv.paramCount()), ++seed, -0.3, 0.3);
      const std::vector<float> grads0(params.size(), 0.0f);
      std::vector<float> grads = grads0;
      conv.bind(params.data(), grads.data());
      const std::vector<float> x = random(static_cast<size_t>(n * conv.inFeatures()), ++seed);
      std::vector<float> y(static_cast<size_t>(n * conv.outFeatures()));
      conv.forward(x.data(), y.data(), n, StepContext{});
      const std::vector<float> dy0 = random(y.size(), ++seed);
      std::vector<float> dy = dy0, dx(x.size());
      conv.backward(x.data(), y.data(), dy.data(), dx.data(), n, StepContext{});

      Dev<float> gx(x), gp(params), gy(y.size()), gdy(dy0), gg(grads0), gdx(dx.size());
      const size_t kernel = static_cast<size_t>(3 * 3 * 8 * 16);
      ok(P().conv2dForward(C(), &g, gx.data(), gp.data(), gp.data() + kernel, gy.data(), n, static_cast<int>(act)));
      EXPECT_TRUE(close(gy.get(), y, kConvTol, what + " y"));
      ok(P().conv2dBackward(C(), &g, gx.data(), gp.data(), gy.data(), gdy.data(), gdx.data(), gg.data(), gg.data() + kernel, n,
                            static_cast<int>(act)));
      EXPECT_TRUE(close(gg.get(), grads, kConvTol, what + " dw and db"));
      EXPECT_TRUE(close(gdx.get(), dx, kConvTol, what + " dx"));
    }
}

// allow_tf32 = 1 lets cuDNN use TF32 tensor cores: ~1e-3 relative, as the GEMMs.
TEST_F(Gpu, Conv2DOnATf32ContextStaysCloseToCpu) {
  const Window win{3, 3, 1, 1, true};
  Conv2D conv(32, win, Act::Linear, true, "glorot_uniform", "zeros");
  conv.name = "conv";
  conv.build({16, 16, 16});
  const int64_t n = 8;
  const mlcuda_conv_geometry g = gpuGeometry(conv.geometry(), win, 32);
  std::vector<float> params = random(static_cast<size_t>(conv.paramCount()), 1200, -0.3, 0.3), grads(params.size());
  conv.bind(params.data(), grads.data());
  const std::vector<float> x = random(static_cast<size_t>(n * conv.inFeatures()), 1201);
  std::vector<float> y(static_cast<size_t>(n * conv.outFeatures()));
  conv.forward(x.data(), y.data(), n, StepContext{});
  mlcuda_context* tf32 = nullptr;
  ok(P().contextCreate(0, "gpu:0 (tf32)", 1, &tf32));
  {
    Dev<float> gx(x, tf32), gp(params, tf32), gy(y.size(), tf32);
    ok(P().conv2dForward(tf32, &g, gx.data(), gp.data(), gp.data() + 3 * 3 * 16 * 32, gy.data(), n, MLCUDA_ACT_LINEAR));
    EXPECT_TRUE(close(gy.get(), y, 1e-2, "TF32 conv"));
  }
  P().contextDestroy(tf32);
}

TEST_F(Gpu, Conv2DChecksItsArgumentsAndDoesNothingForAnEmptyBatch) {
  Conv2D conv(4, Window{3, 3, 1, 1, false}, Act::Relu, true, "glorot_uniform", "zeros");
  conv.name = "conv";
  conv.build({8, 8, 2});
  mlcuda_conv_geometry g = gpuGeometry(conv.geometry(), Window{3, 3, 1, 1, false}, 4);
  ok(P().conv2dForward(C(), &g, nullptr, nullptr, nullptr, nullptr, 0, MLCUDA_ACT_RELU));
  ok(P().conv2dBackward(C(), &g, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0, MLCUDA_ACT_RELU));
  const mlcuda_status softmax = P().conv2dForward(C(), &g, nullptr, nullptr, nullptr, nullptr, 0, MLCUDA_ACT_SOFTMAX);
  EXPECT_EQ(softmax.code, MLCUDA_ERR_INVALID_ARGUMENT) << softmax.message;
  g.oh += 1;  // (8 - 3) / 1 + 1 is 6, not 7
  const mlcuda_status bad = P().conv2dForward(C(), &g, nullptr, nullptr, nullptr, nullptr, 1, MLCUDA_ACT_RELU);
  EXPECT_EQ(bad.code, MLCUDA_ERR_INVALID_ARGUMENT) << bad.message;
  EXPECT_NE(std::string(bad.message).find("height"), std::string::npos) << bad.message;
}

// ---- pooling ----------------------------------------------------------------------------------------

// Inputs after a ReLU: about half zeros, so many windows tie (some are all zeros), plus a few
// negative values where no ReLU came before.
std::vector<float> reluInput(size_t count, uint64_t seed) {
  std::vector<float> v = random(count, seed, -1.0, 1.0);
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] < 0.0f && i % 17 != 0) v[i] = 0.0f;
  for (size_t i = 0; i < std::min<size_t>(v.size(), 64); ++i) v[i] = 0.0f;  // whole windows of zeros
  return v;
}

TEST_F(Gpu, PoolingMatchesCpuBitForBitArgmaxIncluded) {
  struct Case {
    int64_t h, w, c, k, s;
    bool same;
  };
  const Case cases[] = {{8, 8, 1, 2, 2, false}, {9, 7, 3, 2, 2, false}, {9, 7, 3, 2, 2, true}, {10, 9, 3, 3, 2, true},
                        {7, 7, 1, 3, 1, true},  {6, 5, 3, 3, 3, false}, {5, 8, 2, 3, 1, false}};
  const int64_t n = 4;
  uint64_t seed = 1300;
  for (const Case& k : cases)
    for (const bool isMax : {true, false}) {
      std::ostringstream o;
      o << (isMax ? "max " : "average ") << k.h << "x" << k.w << "x" << k.c << " pool " << k.k << " stride " << k.s
        << (k.same ? " same" : " valid");
      const std::string what = o.str();
      const Window win{k.k, k.k, k.s, k.s, k.same};
      Pool2D pool(isMax, win);
      pool.name = "pool";
      pool.build({k.h, k.w, k.c});
      const mlcuda_conv_geometry g = gpuGeometry(pool.geometry(), win, k.c);
      const std::vector<float> x = reluInput(static_cast<size_t>(n * pool.inFeatures()), ++seed);
      std::vector<float> y(static_cast<size_t>(n * pool.outFeatures()));
      pool.forward(x.data(), y.data(), n, StepContext{});
      const std::vector<float> dy0 = random(y.size(), ++seed);
      std::vector<float> dy = dy0, dx(x.size());
      pool.backward(x.data(), y.data(), dy.data(), dx.data(), n, StepContext{});

      Dev<float> gx(x), gy(y.size()), gdy(dy0), gdx(x.size());
      Dev<int32_t> argmax(y.size());
      ok(P().pool2dForward(C(), &g, isMax ? 1 : 0, gx.data(), gy.data(), isMax ? argmax.data() : nullptr, n));
      EXPECT_TRUE(sameBits(gy.get(), y, what + " y"));
      if (isMax) {
        const std::vector<int32_t> got = argmax.get(), want = pool.argmax();
        ASSERT_EQ(got.size(), want.size()) << what;
        for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << what << ": argmax of output " << i;
      }
      ok(P().pool2dBackward(C(), &g, isMax ? 1 : 0, gdy.data(), isMax ? argmax.data() : nullptr, gdx.data(), n));
      EXPECT_TRUE(sameBits(gdx.get(), dx, what + " dx"));
    }
}

TEST_F(Gpu, GlobalAveragePoolingMatchesCpuBitForBit) {
  uint64_t seed = 1400;
  for (const Shape& shape : {Shape{7, 7, 32}, Shape{1, 1, 3}, Shape{5, 3, 1}}) {
    const std::string what = "global average " + shapeToString(shape);
    GlobalAveragePooling2D gap;
    gap.name = "gap";
    gap.build(shape);
    const int64_t n = 6, hw = shape[0] * shape[1], c = shape[2];
    const std::vector<float> x = random(static_cast<size_t>(n * gap.inFeatures()), ++seed);
    std::vector<float> y(static_cast<size_t>(n * c));
    gap.forward(x.data(), y.data(), n, StepContext{});
    const std::vector<float> dy0 = random(y.size(), ++seed);
    std::vector<float> dy = dy0, dx(x.size());
    gap.backward(x.data(), y.data(), dy.data(), dx.data(), n, StepContext{});

    Dev<float> gx(x), gy(y.size()), gdy(dy0), gdx(x.size());
    ok(P().globalAvgPoolForward(C(), gx.data(), gy.data(), n, hw, c));
    EXPECT_TRUE(sameBits(gy.get(), y, what + " y"));
    ok(P().globalAvgPoolBackward(C(), gdy.data(), gdx.data(), n, hw, c));
    EXPECT_TRUE(sameBits(gdx.get(), dx, what + " dx"));
  }
}

// ---- BatchNormalization -------------------------------------------------------------------------------

// The CPU's statistics from sums taken in the CPU's order: [mean (C), invstd (C)] as floats, and the
// global batch's [mean, variance] for the moving statistics.
struct HostStats {
  std::vector<double> sums;    // [sum x, sum x^2]
  std::vector<float> stats;    // [mean, invstd]
  std::vector<double> moving;  // [mean, variance]
};

HostStats hostStats(const std::vector<float>& x, int64_t rows, int64_t C, double epsilon) {
  HostStats h;
  h.sums.assign(static_cast<size_t>(2 * C), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const double v = x[static_cast<size_t>(r * C + c)];
      h.sums[static_cast<size_t>(c)] += v;
      h.sums[static_cast<size_t>(C + c)] += v * v;
    }
  const auto count = static_cast<double>(rows);
  h.stats.resize(static_cast<size_t>(2 * C));
  h.moving.resize(static_cast<size_t>(2 * C));
  for (int64_t c = 0; c < C; ++c) {
    const auto i = static_cast<size_t>(c), j = static_cast<size_t>(C + c);
    const double m = h.sums[i] / count, var = std::max(0.0, h.sums[j] / count - m * m);
    h.stats[i] = static_cast<float>(m);
    h.stats[j] = static_cast<float>(1.0 / std::sqrt(var + epsilon));
    h.moving[i] = m;
    h.moving[j] = var;
  }
  return h;
}

// The backward sums [sum dy, sum dy xhat] in the CPU's order.
std::vector<double> hostBackwardSums(const std::vector<float>& x, const std::vector<float>& dy, const std::vector<float>& stats,
                                     int64_t rows, int64_t C) {
  std::vector<double> s(static_cast<size_t>(2 * C), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const auto i = static_cast<size_t>(r * C + c);
      const double g = dy[i], xh = (x[i] - stats[static_cast<size_t>(c)]) * stats[static_cast<size_t>(C + c)];
      s[static_cast<size_t>(c)] += g;
      s[static_cast<size_t>(C + c)] += g * xh;
    }
  return s;
}

::testing::AssertionResult closeSums(const std::vector<double>& got, const std::vector<double>& want, double magnitude,
                                     const std::string& what) {
  for (size_t i = 0; i < want.size(); ++i)
    if (std::fabs(got[i] - want[i]) > 1e-12 * magnitude)
      return ::testing::AssertionFailure() << what << " [" << i << "]: gpu " << got[i] << ", cpu " << want[i];
  return ::testing::AssertionSuccess();
}

TEST_F(Gpu, BatchNormMatchesCpuInTrainingAndEvaluation) {
  struct Case {
    int64_t n;
    Shape shape;
    bool center, scale;
  };
  // Rows n * values / C: 120 (one chunk), 300 (two), 2520 with 40 channels (two channel tiles).
  const Case cases[] = {{6, {5, 4, 3}, true, true}, {300, {16}, false, false}, {70, {6, 6, 40}, true, false}};
  const double momentum = 0.9, epsilon = 1e-3;
  uint64_t seed = 1500;
  for (const Case& k : cases)
    for (const bool training : {true, false}) {
      const std::string what = shapeToString(k.shape) + " n=" + std::to_string(k.n) + (training ? " training" : " evaluation") +
                               (k.center ? " center" : "") + (k.scale ? " scale" : "");
      BatchNorm bn(momentum, epsilon, k.center, k.scale, false);
      bn.name = "bn";
      bn.build(k.shape);
      const int64_t nc = bn.channels(), rows = k.n * bn.inFeatures() / nc;
      std::vector<float> params = random(static_cast<size_t>(bn.paramCount()), ++seed, 0.5, 1.5);  // variances > 0
      const std::vector<float> params0 = params;
      const std::vector<float> grads0 = random(params.size(), ++seed);
      std::vector<float> grads = grads0;
      bn.bind(params.data(), grads.data());
      const size_t gammaAt = 0, betaAt = k.scale ? static_cast<size_t>(nc) : 0;
      const size_t movingAt = static_cast<size_t>(nc) * ((k.scale ? 1 : 0) + (k.center ? 1 : 0));
      const std::vector<float> x = random(static_cast<size_t>(rows * nc), ++seed, -2.0, 3.0);
      StepContext ctx;
      ctx.training = training;
      std::vector<float> y(x.size());
      bn.forward(x.data(), y.data(), k.n, ctx);
      const std::vector<float> dy0 = random(x.size(), ++seed);
      std::vector<float> dy = dy0, dx(x.size());
      bn.backward(x.data(), y.data(), dy.data(), dx.data(), k.n, ctx);

      Dev<float> gx(x), gp(params0), gy(x.size()), gdy(dy0), gdx(x.size()), gg(grads0), gstats(static_cast<size_t>(2 * nc));
      Dev<double> gsums(static_cast<size_t>(2 * nc));
      const float* gamma = k.scale ? gp.data() + gammaAt : nullptr;
      const float* beta = k.center ? gp.data() + betaAt : nullptr;
      std::vector<float> stats;
      HostStats host = hostStats(x, rows, nc, epsilon);
      double magnitude = 0;
      for (const float v : x) magnitude += static_cast<double>(v) * v + std::fabs(v);
      if (training) {
        ok(P().batchnormMoments(C(), gx.data(), rows, nc, gsums.data()));
        EXPECT_TRUE(closeSums(gsums.get(), host.sums, magnitude, what + " moments"));
        stats = host.stats;  // the CPU's bits: the forward must then match to the bit
        gstats.put(stats);
        Dev<double> global(host.moving);
        ok(P().batchnormUpdateMoving(C(), gp.data() + movingAt, gp.data() + movingAt + nc, global.data(), nc, momentum));
        const std::vector<float> moved = gp.get();
        EXPECT_TRUE(sameBits(slice(moved, movingAt, moved.size()), slice(params, movingAt, params.size()), what + " moving"));
        gp.put(params0);
      } else {
        ok(P().batchnormEvalStats(C(), gp.data() + movingAt, gp.data() + movingAt + nc, nc, epsilon, gstats.data()));
        stats = gstats.get();
        for (int64_t c = 0; c < nc; ++c)
          ASSERT_EQ(
              stats[static_cast<size_t>(nc + c)],
              static_cast<float>(1.0 / std::sqrt(static_cast<double>(params0[movingAt + static_cast<size_t>(nc + c)]) + epsilon)))
              << what << ": invstd of channel " << c;
      }
      ok(P().batchnormForward(C(), gx.data(), gy.data(), rows, nc, gstats.data(), gamma, beta));
      EXPECT_TRUE(sameBits(gy.get(), y, what + " y"));

      // dgamma and dbeta from the GPU's sums (float of a double sum: to a rounding of the CPU's).
      ok(P().batchnormBackwardSums(C(), gx.data(), gdy.data(), rows, nc, gstats.data(), gsums.data(),
                                   k.scale ? gg.data() + gammaAt : nullptr, k.center ? gg.data() + betaAt : nullptr));
      const std::vector<double> backSums = hostBackwardSums(x, dy0, stats, rows, nc);
      double dyMagnitude = 0;
      for (size_t i = 0; i < x.size(); ++i) dyMagnitude += std::fabs(dy0[i]) * (1.0 + std::fabs(x[i]) * 4);
      EXPECT_TRUE(closeSums(gsums.get(), backSums, dyMagnitude, what + " backward sums"));
      EXPECT_TRUE(close(gg.get(), grads, 1e-6, what + " dgamma and dbeta"));
      // dx from the CPU's sums: to the bit; from the GPU's own: to rounding.
      Dev<double> cpuSums(backSums);
      ok(P().batchnormBackwardData(C(), gx.data(), gdy.data(), gdx.data(), rows, nc, gstats.data(), gamma,
                                   training ? cpuSums.data() : nullptr, static_cast<double>(rows), training ? 1 : 0));
      EXPECT_TRUE(sameBits(gdx.get(), dx, what + " dx"));
      if (training) {
        ok(P().batchnormBackwardData(C(), gx.data(), gdy.data(), gdx.data(), rows, nc, gstats.data(), gamma, gsums.data(),
                                     static_cast<double>(rows), 1));
        EXPECT_TRUE(close(gdx.get(), dx, 1e-5, what + " dx from the GPU's sums"));
      }
    }
}

// An empty shard still joins the sums across replicas: its sums are zeros.
TEST_F(Gpu, BatchNormSumsOfNoRowsAreZeros) {
  const int64_t nc = 5;
  Dev<double> sums(std::vector<double>(2 * nc, 7.0));
  ok(P().batchnormMoments(C(), nullptr, 0, nc, sums.data()));
  EXPECT_EQ(sums.get(), std::vector<double>(2 * nc, 0.0));
  sums.put(std::vector<double>(2 * nc, 7.0));
  ok(P().batchnormBackwardSums(C(), nullptr, nullptr, 0, nc, nullptr, sums.data(), nullptr, nullptr));
  EXPECT_EQ(sums.get(), std::vector<double>(2 * nc, 0.0));
  ok(P().batchnormForward(C(), nullptr, nullptr, 0, nc, nullptr, nullptr, nullptr));
  ok(P().batchnormBackwardData(C(), nullptr, nullptr, nullptr, 0, nc, nullptr, nullptr, nullptr, 0.0, 1));
}

// ---- binary cross-entropy, binary accuracy, Dense fused with a sigmoid ---------------------------------

std::vector<float> sigmoidOf(std::vector<float> v) {
  activationForward(Act::Sigmoid, v.data(), static_cast<int64_t>(v.size()), 1);
  return v;
}

TEST_F(Gpu, BinaryCrossentropyMatchesCpu) {
  const int64_t n = 300;
  uint64_t seed = 1600;
  for (const int64_t k : {int64_t{1}, int64_t{3}})
    for (const int mode : {0, 1, 2}) {  // from logits; probabilities; probabilities, fused sigmoid
      const bool fromLogits = mode == 0, fused = mode == 2;
      const std::string what = "binary_crossentropy k=" + std::to_string(k) +
                               (fromLogits ? " from logits"
                                : fused    ? " fused sigmoid"
                                           : " probabilities");
      Loss loss = Loss::make(LossKind::BinaryCrossentropy, fromLogits);
      loss.setFusedSoftmax(fused);
      const std::vector<float> logits = random(static_cast<size_t>(n * k), ++seed, -6, 6);
      std::vector<float> pred = fromLogits ? logits : sigmoidOf(logits);
      if (!fromLogits)  // below and above the clip, to take the clipped branches too
        for (int64_t r = 0; r < n * k; r += 11) pred[static_cast<size_t>(r)] = r % 2 ? 1e-9f : 1.0f;
      Rng rng(++seed);
      std::vector<float> targets;
      for (int64_t i = 0; i < n * k; ++i) targets.push_back(i % 7 == 0 ? 0.3f : static_cast<float>(rng.below(2)));
      std::vector<float> grad(pred.size());
      const double sum = loss.compute(pred.data(), targets.data(), n, k, grad.data());

      Dev<float> gp(pred), gt(targets), gg(grad.size());
      Dev<double> gsum(1);
      ok(P().loss(C(), MLCUDA_LOSS_BINARY_CROSSENTROPY, fromLogits, fused, gp.data(), gt.data(), n, k, gg.data(), gsum.data()));
      EXPECT_TRUE(closeScalar(gsum.get()[0], sum, 1e-6, what + " loss sum"));
      EXPECT_TRUE(close(gg.get(), grad, kElementwiseTol, what + " gradient"));
      ok(P().loss(C(), MLCUDA_LOSS_BINARY_CROSSENTROPY, fromLogits, fused, gp.data(), gt.data(), n, k, nullptr, gsum.data()));
      EXPECT_TRUE(closeScalar(gsum.get()[0], sum, 1e-6, what + " loss sum without gradient"));
    }
}

TEST_F(Gpu, BinaryAccuracyMatchesCpu) {
  const int64_t n = 300;
  uint64_t seed = 1700;
  for (const int64_t k : {int64_t{1}, int64_t{3}, int64_t{4}})
    for (const bool logits : {false, true}) {
      const std::string what = std::string(logits ? "binary accuracy on logits" : "binary accuracy") + " k=" + std::to_string(k);
      std::vector<float> pred = random(static_cast<size_t>(n * k), ++seed, logits ? -2.0 : 0.0, logits ? 2.0 : 1.0);
      for (int64_t i = 0; i < n * k; i += 9) pred[static_cast<size_t>(i)] = logits ? 0.0f : 0.5f;  // on the threshold
      Rng rng(++seed);
      std::vector<float> targets;
      for (int64_t i = 0; i < n * k; ++i) targets.push_back(static_cast<float>(rng.below(2)));
      const MetricKind kind = logits ? MetricKind::BinaryAccuracyLogits : MetricKind::BinaryAccuracy;
      const double want = metricSum(kind, pred.data(), targets.data(), n, k, k);
      Dev<float> gp(pred), gt(targets);
      Dev<double> out(1);
      ok(P().metricSum(C(), static_cast<int>(kind), gp.data(), gt.data(), n, k, k, out.data()));
      EXPECT_TRUE(closeScalar(out.get()[0], want, 1e-12, what));
      EXPECT_GT(want, 0.2 * static_cast<double>(n)) << what;
      EXPECT_LT(want, 0.8 * static_cast<double>(n)) << what;
    }
}

}  // namespace
}  // namespace ml
