// ReLU convolutions under max pooling, the pairs Sequential speeds up: the first one runs fused
// (nn/ConvPool.h: the convolution's output is never written), a later one lets the pooling apply
// ReLU's gradient (the convolution skips its own pass), and the pooling's windows that tile the
// image run their own loops. Each is held against a naive reference written here in double:
// convolution, ReLU and max pooling as loops, and their chain rule, with the first of equal maxima
// winning. float32 agrees to float rounding; mixed_bfloat16 to its format, with every output a
// bfloat16 value; a team of threads gives the serial values to rounding and the same bits twice.
// The fused kernels are also held alone (nn/ConvPool.h) on a strided convolution under 3x3 windows,
// against the reference and against finite differences of their own forward.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "NnTestUtil.h"
#include "nn/Conv2D.h"
#include "nn/ConvPool.h"
#include "nn/Pooling.h"
#include "nn/Precision.h"
#include "nn/Sequential.h"
#include "nn/ThreadTeam.h"

namespace ml {
namespace {

using test::layerSpec;
using test::modelSpec;
using test::randomVector;

double roundBf16(double v) { return roundToBfloat16(static_cast<float>(v)); }

// One valid ReLU convolution (strides st) under a pool x pool max pooling with strides = pool.
struct Stage {
  int64_t h, w, c, f, k, pool, st = 1;
  int64_t oh() const { return (h - k) / st + 1; }
  int64_t ow() const { return (w - k) / st + 1; }
  int64_t ph() const { return oh() / pool; }
  int64_t pw() const { return ow() / pool; }
};

struct StageRef {
  std::vector<double> conv;  // relu(conv), (n, oh, ow, f)
  std::vector<double> pooled;
  std::vector<int64_t> winner;  // index into conv of each pooled value
};

// bf16: each convolution output rounded to bfloat16 before the pooling compares it.
StageRef naiveForward(const Stage& s, int64_t n, const std::vector<double>& x, const float* w, const float* b,
                      bool bf16 = false) {
  StageRef r;
  r.conv.assign(static_cast<size_t>(n * s.oh() * s.ow() * s.f), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t oy = 0; oy < s.oh(); ++oy)
      for (int64_t ox = 0; ox < s.ow(); ++ox)
        for (int64_t f = 0; f < s.f; ++f) {
          double a = b[f];
          for (int64_t ky = 0; ky < s.k; ++ky)
            for (int64_t kx = 0; kx < s.k; ++kx)
              for (int64_t c = 0; c < s.c; ++c)
                a += x[static_cast<size_t>(((i * s.h + oy * s.st + ky) * s.w + ox * s.st + kx) * s.c + c)] *
                     w[((ky * s.k + kx) * s.c + c) * s.f + f];
          a = a > 0 ? a : 0;
          r.conv[static_cast<size_t>(((i * s.oh() + oy) * s.ow() + ox) * s.f + f)] =
              bf16 ? roundToBfloat16(static_cast<float>(a)) : a;
        }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t py = 0; py < s.ph(); ++py)
      for (int64_t px = 0; px < s.pw(); ++px)
        for (int64_t f = 0; f < s.f; ++f) {
          double best = -std::numeric_limits<double>::infinity();
          int64_t at = -1;
          for (int64_t dy = 0; dy < s.pool; ++dy)
            for (int64_t dx = 0; dx < s.pool; ++dx) {
              const int64_t j = ((i * s.oh() + py * s.pool + dy) * s.ow() + px * s.pool + dx) * s.f + f;
              if (r.conv[static_cast<size_t>(j)] > best) {
                best = r.conv[static_cast<size_t>(j)];
                at = j;
              }
            }
          r.pooled.push_back(best);
          r.winner.push_back(at);
        }
  return r;
}

// From the pooled output's gradient g: the kernel and bias gradients, and the input gradient.
void naiveBackward(const Stage& s, int64_t n, const std::vector<double>& x, const float* w, const StageRef& r,
                   const std::vector<double>& g, std::vector<double>& dw, std::vector<double>& db, std::vector<double>& dx) {
  std::vector<double> dz(r.conv.size(), 0.0);
  for (size_t o = 0; o < g.size(); ++o)
    if (r.conv[static_cast<size_t>(r.winner[o])] > 0) dz[static_cast<size_t>(r.winner[o])] += g[o];
  dw.assign(static_cast<size_t>(s.k * s.k * s.c * s.f), 0.0);
  db.assign(static_cast<size_t>(s.f), 0.0);
  dx.assign(x.size(), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t oy = 0; oy < s.oh(); ++oy)
      for (int64_t ox = 0; ox < s.ow(); ++ox)
        for (int64_t f = 0; f < s.f; ++f) {
          const double d = dz[static_cast<size_t>(((i * s.oh() + oy) * s.ow() + ox) * s.f + f)];
          db[static_cast<size_t>(f)] += d;
          for (int64_t ky = 0; ky < s.k; ++ky)
            for (int64_t kx = 0; kx < s.k; ++kx)
              for (int64_t c = 0; c < s.c; ++c) {
                const auto xi = static_cast<size_t>(((i * s.h + oy * s.st + ky) * s.w + ox * s.st + kx) * s.c + c);
                const int64_t wi = ((ky * s.k + kx) * s.c + c) * s.f + f;
                dw[static_cast<size_t>(wi)] += d * x[xi];
                dx[xi] += d * w[wi];
              }
        }
}

// The largest |a - ref| over max(|ref|, scale): relative, with an absolute floor at scale.
double worst(const float* a, const std::vector<double>& ref, double scale) {
  double e = 0;
  for (size_t i = 0; i < ref.size(); ++i) e = std::max(e, std::fabs(a[i] - ref[i]) / std::max(std::fabs(ref[i]), scale));
  return e;
}

// Two stages (the first fused: nothing below it needs an input gradient; the second masked by its
// pooling, on oneDNN where it has the shape): 13x13x2 -> conv 3x3x16 -> 11x11 -> pool 2 -> 5x5
// (an odd row and column left out) -> conv 2x2x24 -> 4x4 -> pool 2 -> 2x2x24.
const Stage kFirst{13, 13, 2, 16, 3, 2}, kSecond{5, 5, 16, 24, 2, 2};

struct ModelRun {
  std::vector<float> out, grads;
};

ModelRun runModel(Precision p, ThreadTeam* team, int64_t n, const std::vector<float>& params, const std::vector<float>& x,
                  const std::vector<float>& g) {
  Sequential m(modelSpec(
      {kFirst.h, kFirst.w, kFirst.c},
      {layerSpec("Conv2D", {{"filters", kFirst.f}, {"kernel_size", kFirst.k}, {"activation", "relu"}}), layerSpec("MaxPooling2D"),
       layerSpec("Conv2D", {{"filters", kSecond.f}, {"kernel_size", kSecond.k}, {"activation", "relu"}}),
       layerSpec("MaxPooling2D")}));
  applyPrecision(m, p);
  std::copy(params.begin(), params.end(), m.params().begin());
  ThreadTeam::Scope scope(team);
  ModelRun r;
  const float* y = m.forward(x.data(), n, StepContext{});
  r.out.assign(y, y + n * m.outFeatures());
  std::copy(g.begin(), g.end(), m.outputGrad(n));
  m.zeroGrads();
  m.backward(x.data(), n, StepContext{});
  r.grads.assign(m.grads().begin(), m.grads().end());
  return r;
}

struct Reference {
  std::vector<double> out, grads;
};

// The naive two stages; with bf16, the operands and every layer's output rounded as the policy does.
Reference naiveModel(bool bf16, int64_t n, const std::vector<float>& params, const std::vector<float>& x,
                     const std::vector<float>& g) {
  auto rounded = [&](const float* v, size_t count) {
    std::vector<float> o(v, v + count);
    if (bf16)
      for (auto& e : o) e = roundToBfloat16(e);
    return o;
  };
  const size_t k1 = static_cast<size_t>(kFirst.k * kFirst.k * kFirst.c * kFirst.f), b1 = static_cast<size_t>(kFirst.f);
  const size_t k2 = static_cast<size_t>(kSecond.k * kSecond.k * kSecond.c * kSecond.f);
  const auto w1 = rounded(params.data(), k1), w2 = rounded(params.data() + k1 + b1, k2);
  const float* bias1 = params.data() + k1;
  const float* bias2 = params.data() + k1 + b1 + k2;
  std::vector<double> x1(x.begin(), x.end());
  if (bf16)
    for (auto& v : x1) v = roundBf16(v);
  const StageRef s1 = naiveForward(kFirst, n, x1, w1.data(), bias1, bf16);
  const StageRef s2 = naiveForward(kSecond, n, s1.pooled, w2.data(), bias2, bf16);
  Reference r;
  r.out = s2.pooled;
  std::vector<double> g2(g.begin(), g.end()), dw2, db2, dx2, dw1, db1, dx1;
  if (bf16)
    for (auto& v : g2) v = roundBf16(v);
  naiveBackward(kSecond, n, s1.pooled, w2.data(), s2, g2, dw2, db2, dx2);
  if (bf16)
    for (auto& v : dx2) v = roundBf16(v);
  naiveBackward(kFirst, n, x1, w1.data(), s1, dx2, dw1, db1, dx1);
  for (const auto* part : {&dw1, &db1, &dw2, &db2}) r.grads.insert(r.grads.end(), part->begin(), part->end());
  return r;
}

// Winners decided by near-equal values may differ between float orders: tests draw inputs whose
// window values are far apart (distinct random values over a range wide against float rounding).
struct Data {
  int64_t n = 6;
  std::vector<float> params, x, g;
  Data() {
    Sequential probe(modelSpec({kFirst.h, kFirst.w, kFirst.c},
                               {layerSpec("Conv2D", {{"filters", kFirst.f}, {"kernel_size", kFirst.k}, {"activation", "relu"}}),
                                layerSpec("MaxPooling2D"),
                                layerSpec("Conv2D", {{"filters", kSecond.f}, {"kernel_size", kSecond.k}, {"activation", "relu"}}),
                                layerSpec("MaxPooling2D")}));
    probe.initialize(3);
    params.assign(probe.params().begin(), probe.params().end());
    const auto noise = randomVector(params.size(), 8, -0.1, 0.1);  // biases away from 0
    for (size_t i = 0; i < params.size(); ++i) params[i] += noise[i];
    x = randomVector(static_cast<size_t>(n * probe.inFeatures()), 9, -1, 1);
    g = randomVector(static_cast<size_t>(n * probe.outFeatures()), 10, -1, 1);
  }
};

TEST(ConvPool, FusedAndMaskedPairsMatchTheNaiveReferenceInFloat32) {
  const Data d;
  const ModelRun r = runModel(Precision::Float32, nullptr, d.n, d.params, d.x, d.g);
  const Reference ref = naiveModel(false, d.n, d.params, d.x, d.g);
  ASSERT_EQ(r.out.size(), ref.out.size());
  ASSERT_EQ(r.grads.size(), ref.grads.size());
  EXPECT_LT(worst(r.out.data(), ref.out, 1e-3), 2e-5) << "forward";
  EXPECT_LT(worst(r.grads.data(), ref.grads, 1e-2), 1e-4) << "kernel and bias gradients";  // sums of 726 float32 products
  int nonzero = 0;
  for (float v : r.grads) nonzero += v != 0.0f;
  EXPECT_GT(nonzero, static_cast<int>(r.grads.size()) * 3 / 4) << "the gradients must be exercised";
}

TEST(ConvPool, FusedAndMaskedPairsMatchTheNaiveReferenceInBfloat16) {
  const Data d;
  const ModelRun r = runModel(Precision::MixedBfloat16, nullptr, d.n, d.params, d.x, d.g);
  const Reference ref = naiveModel(true, d.n, d.params, d.x, d.g);
  for (float v : r.out) ASSERT_EQ(v, roundToBfloat16(v)) << "an output that is not a bfloat16 value";
  for (float v : r.grads) ASSERT_EQ(v, roundToBfloat16(v)) << "a gradient that is not a bfloat16 value";
  // Sums of float32 products in another order, rounded to 8 bits: one bfloat16 step (2^-8) now and then.
  EXPECT_LT(worst(r.out.data(), ref.out, 1e-2), 1.6e-2) << "forward";
  EXPECT_LT(worst(r.grads.data(), ref.grads, 5e-2), 1.6e-2) << "kernel and bias gradients";
}

TEST(ConvPool, ATeamGivesTheSerialValuesAndTheSameBitsTwice) {
  const Data d;
  for (const Precision p : {Precision::Float32, Precision::MixedBfloat16}) {
    const ModelRun serial = runModel(p, nullptr, d.n, d.params, d.x, d.g);
    ThreadTeam team(2);
    const ModelRun a = runModel(p, &team, d.n, d.params, d.x, d.g), b = runModel(p, &team, d.n, d.params, d.x, d.g);
    const std::string what = toString(p);
    EXPECT_EQ(a.out, serial.out) << what << ": forward splits by samples, every value computed alone";
    std::vector<double> ref(serial.grads.begin(), serial.grads.end());
    EXPECT_LT(worst(a.grads.data(), ref, 1e-2), p == Precision::Float32 ? 5e-5 : 1.6e-2) << what;
    EXPECT_EQ(0, std::memcmp(a.grads.data(), b.grads.data(), a.grads.size() * sizeof(float))) << what;
    EXPECT_EQ(a.out, b.out) << what;
  }
}

// The fused kernels alone: 17x15x3 -> conv 3x3, strides 2, 24 filters (a block of 16 and one of
// 8) -> 8x7 -> pool 3 -> 2x2 (two rows and a column of the convolution left out; nine positions a
// window, so the last group of four is partial).
const Stage kStrided{17, 15, 3, 24, 3, 3, 2};

convpool::Shapes shapesOf(const Stage& s) {
  convpool::Shapes c{};
  c.conv = Geometry{s.h, s.w, s.c, s.oh(), s.ow(), 0, 0};
  c.convWin = Window{s.k, s.k, s.st, s.st, false};
  c.pool = Geometry{s.oh(), s.ow(), s.f, s.ph(), s.pw(), 0, 0};
  c.poolWin = Window{s.pool, s.pool, s.pool, s.pool, false};
  c.filters = s.f;
  return c;
}

struct Fused {
  std::vector<float> pooled;
  std::vector<int32_t> argmax;
};

Fused fusedForward(const Stage& s, int64_t n, const std::vector<float>& x, const std::vector<float>& w,
                   const std::vector<float>& b) {
  Fused r;
  r.pooled.resize(static_cast<size_t>(n * s.ph() * s.pw() * s.f));
  r.argmax.resize(r.pooled.size());
  convpool::forward(shapesOf(s), n, x.data(), w.data(), b.data(), r.pooled.data(), r.argmax.data(), false);
  return r;
}

struct StridedData {
  int64_t n = 3;
  std::vector<float> x = randomVector(static_cast<size_t>(n * kStrided.h * kStrided.w * kStrided.c), 21, -1, 1);
  std::vector<float> w = randomVector(static_cast<size_t>(kStrided.k * kStrided.k * kStrided.c * kStrided.f), 22, -0.4, 0.4);
  std::vector<float> b = randomVector(static_cast<size_t>(kStrided.f), 23, -0.3, 0.3);
  std::vector<float> g = randomVector(static_cast<size_t>(n * kStrided.ph() * kStrided.pw() * kStrided.f), 24, -1, 1);
};

TEST(ConvPool, TheFusedKernelsFitTheShapesTheyLoopOver) {
  EXPECT_TRUE(convpool::fits(shapesOf(kStrided)));
  EXPECT_TRUE(convpool::fits(shapesOf(Stage{36, 36, 1, 8, 3, 8})));    // 64 window positions
  EXPECT_FALSE(convpool::fits(shapesOf(Stage{38, 38, 1, 8, 3, 9})));   // 81: past the kernel's window table
  EXPECT_FALSE(convpool::fits(shapesOf(Stage{17, 15, 8, 24, 3, 3})));  // a patch of 72 values
  EXPECT_FALSE(convpool::fits(shapesOf(Stage{17, 15, 3, 20, 3, 3})));  // 20 filters: not whole blocks of 8
}

TEST(ConvPool, TheFusedKernelsOnAStridedConvolutionMatchTheNaiveReference) {
  const StridedData d;
  ASSERT_TRUE(convpool::fits(shapesOf(kStrided)));
  const Fused r = fusedForward(kStrided, d.n, d.x, d.w, d.b);
  const StageRef ref = naiveForward(kStrided, d.n, std::vector<double>(d.x.begin(), d.x.end()), d.w.data(), d.b.data());
  ASSERT_EQ(r.pooled.size(), ref.pooled.size());
  EXPECT_LT(worst(r.pooled.data(), ref.pooled, 1e-3), 2e-5) << "forward";
  const int64_t perSample = kStrided.oh() * kStrided.ow() * kStrided.f,
                pooledPerSample = kStrided.ph() * kStrided.pw() * kStrided.f;
  int positive = 0;
  for (size_t o = 0; o < r.argmax.size(); ++o) {
    const int64_t sample = static_cast<int64_t>(o) / pooledPerSample;
    ASSERT_EQ(r.argmax[o], ref.winner[o] - sample * perSample) << "the winner of pooled value " << o;
    positive += ref.pooled[o] > 0;
  }
  EXPECT_GT(positive, static_cast<int>(r.pooled.size()) / 2) << "ReLU must pass most windows' maxima";

  std::vector<float> dw(d.w.size(), 0.0f), db(d.b.size(), 0.0f);
  convpool::backward(shapesOf(kStrided), d.n, d.x.data(), r.pooled.data(), r.argmax.data(), d.g.data(), dw.data(), db.data());
  std::vector<double> rdw, rdb, rdx;
  naiveBackward(kStrided, d.n, std::vector<double>(d.x.begin(), d.x.end()), d.w.data(), ref,
                std::vector<double>(d.g.begin(), d.g.end()), rdw, rdb, rdx);
  EXPECT_LT(worst(dw.data(), rdw, 1e-2), 5e-5) << "kernel gradient";
  EXPECT_LT(worst(db.data(), rdb, 1e-2), 1e-5) << "bias gradient";
}

// The loss sum(g * pooled) is linear in each parameter while no window's winner and no winner's
// ReLU side changes, so a central difference over a step that changes neither is exact but for
// float rounding; a parameter whose step would cross such a kink is left out (and counted).
TEST(ConvPool, TheFusedGradientsMatchFiniteDifferencesOfTheFusedForward) {
  const StridedData d;
  const Fused base = fusedForward(kStrided, d.n, d.x, d.w, d.b);
  std::vector<float> dw(d.w.size(), 0.0f), db(d.b.size(), 0.0f);
  convpool::backward(shapesOf(kStrided), d.n, d.x.data(), base.pooled.data(), base.argmax.data(), d.g.data(), dw.data(),
                     db.data());
  auto sameKinks = [&](const Fused& f) {
    for (size_t o = 0; o < f.pooled.size(); ++o)
      if (f.argmax[o] != base.argmax[o] || (f.pooled[o] > 0) != (base.pooled[o] > 0)) return false;
    return true;
  };
  auto loss = [&](const Fused& f) {
    double l = 0;
    for (size_t o = 0; o < f.pooled.size(); ++o) l += static_cast<double>(d.g[o]) * f.pooled[o];
    return l;
  };
  int checked = 0, leftOut = 0;
  double worstError = 0;
  std::vector<float> w = d.w, b = d.b;
  // Moves one parameter (an element of w or b) a step each way, then puts it back.
  auto check = [&](float& param, float analytic) {
    const float at = param, step = 1e-2f;
    param = at + step;
    const float up = param;
    const Fused plus = fusedForward(kStrided, d.n, d.x, w, b);
    param = at - step;
    const float down = param;
    const Fused minus = fusedForward(kStrided, d.n, d.x, w, b);
    param = at;
    if (!sameKinks(plus) || !sameKinks(minus)) {
      ++leftOut;
      return;
    }
    const double numeric = (loss(plus) - loss(minus)) / (static_cast<double>(up) - down);
    worstError = std::max(worstError, test::normalisedError(analytic, numeric, 1e-2));
    ++checked;
  };
  for (size_t j = 0; j < w.size(); ++j) check(w[j], dw[j]);
  for (size_t j = 0; j < b.size(); ++j) check(b[j], db[j]);
  EXPECT_GT(checked, static_cast<int>(d.w.size() + d.b.size()) * 3 / 4) << leftOut << " parameters' steps crossed a kink";
  EXPECT_LT(worstError, 1e-2) << "over " << checked << " parameters";
  double largest = 0;
  for (float v : dw) largest = std::max(largest, std::fabs(static_cast<double>(v)));
  EXPECT_GT(largest, 0.5) << "the gradients must be exercised";
}

}  // namespace
}  // namespace ml
