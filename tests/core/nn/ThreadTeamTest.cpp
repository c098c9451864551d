// One replica on a team of threads. Where the math is the same, the bits are the same: Dense
// backward with its two GEMMs side by side runs the very calls of the serial path, and the
// element-wise parts (activation gradient by rows, bias gradient by columns) keep each element's
// order. A GEMM split across threads is not the same math in OpenBLAS 0.3.21 (its blocking of the
// inner dimension follows the block's shape: measured) nor in oneDNN's blocked matmul (nn/Sgemm.h,
// which Dense uses where the CPU has it), so split GEMMs agree to float rounding: for the forward,
// a few float32 steps of the largest output (512 summands).
// Either way the result does not change from run to run. Conv2D and pooling on a team: the same
// rules (their im2col, col2im, pooling and activations split by samples keep the bits).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "nn/Conv2D.h"
#include "nn/Dense.h"
#include "nn/OneDnnConv.h"
#include "nn/Pooling.h"
#include "nn/ThreadTeam.h"
#include "random/Rng.h"

extern "C" void openblas_set_num_threads(int);

namespace {

struct Result {
  std::vector<float> y, dW, dx;
};

// Forward (on `forwardTeam`, or serially), then backward twice (gradients accumulate) on the
// current thread's team, if any.
Result runDense(int64_t in, int64_t out, int64_t n, ml::Act act, ml::ThreadTeam* forwardTeam = nullptr) {
  ml::Dense d(out, act);
  d.name = "dense";
  d.build({in});
  std::vector<float> p(static_cast<size_t>(d.paramCount())), g(p.size(), 0.0f);
  d.bind(p.data(), g.data());
  d.initialize(7);
  ml::Rng rng(3);
  std::vector<float> x(static_cast<size_t>(n * in)), dy(static_cast<size_t>(n * out));
  for (auto& v : x) v = static_cast<float>(rng.uniform(-1, 1));
  Result r;
  r.y.resize(static_cast<size_t>(n * out));
  r.dx.resize(x.size());
  const ml::StepContext ctx;
  {
    ml::ThreadTeam::Scope scope(forwardTeam);
    d.forward(x.data(), r.y.data(), n, ctx);
  }
  for (int rep = 0; rep < 2; ++rep) {
    for (auto& v : dy) v = static_cast<float>(rng.uniform(-1, 1));
    d.backward(x.data(), r.y.data(), dy.data(), r.dx.data(), n, ctx);
  }
  r.dW = g;  // kernel and bias gradients
  return r;
}

double relDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::fabs(static_cast<double>(a[i]) - b[i]));
    den = std::max(den, std::fabs(static_cast<double>(b[i])));
  }
  return a.size() == b.size() ? num / std::max(den, 1e-30) : 1e30;
}

bool sameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(ThreadTeam, RunsEveryTaskOnceAndSplitsCoverTheRange) {
  ml::ThreadTeam team(3);
  for (int round = 0; round < 200; ++round) {
    std::atomic<int> mask{0};
    team.run(3, [&](int i) { mask.fetch_or(1 << i); });
    ASSERT_EQ(mask.load(), 7);
    std::vector<int> hits(101, 0);
    team.split(101, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) ++hits[static_cast<size_t>(i)];
    });
    for (int h : hits) ASSERT_EQ(h, 1);
  }
}

// Tasks are claimed by whichever thread is free: on more threads than cores (5 on this machine's
// 2) workers often wake after the caller has run every task of a generation, or in the middle of
// the next one. Every task must still run exactly once, in its own generation (a late worker must
// never run a finished generation's task), and a task that waits for no one finishes on the caller
// alone when the workers are slow.
TEST(ThreadTeam, EveryTaskRunsOnceInItsGenerationWhateverThreadClaimsIt) {
  ml::ThreadTeam team(5);
  std::vector<std::atomic<int>> runs(5);
  for (int gen = 0; gen < 3000; ++gen) {
    const int tasks = 2 + gen % 4;
    for (auto& r : runs) r.store(0);
    std::atomic<int> current{gen}, stale{0};
    team.run(tasks, [&, gen](int i) {
      if (current.load() != gen) stale.fetch_add(1);
      runs[static_cast<size_t>(i)].fetch_add(1);
    });
    current.store(-1);
    ASSERT_EQ(stale.load(), 0) << "generation " << gen;
    for (int i = 0; i < 5; ++i)
      ASSERT_EQ(runs[static_cast<size_t>(i)].load(), i < tasks ? 1 : 0) << "task " << i << ", gen " << gen;
  }
}

// The gradient check between backward's layers reads the kernel gradient in blocks on a team: one
// inf or NaN anywhere in it (uneven blocks: 37 x 29 on 2 and 3 threads), or in the bias gradient,
// is found, and a finite gradient passes, serially and on the team alike.
TEST(ThreadTeam, TheGradientCheckOnATeamFindsEveryNonFiniteValue) {
  ml::Dense d(29, ml::Act::Relu);
  d.name = "dense";
  d.build({37});
  std::vector<float> p(static_cast<size_t>(d.paramCount())), g(p.size(), 0.25f);
  d.bind(p.data(), g.data());
  const float bad[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity()};
  for (int threads : {1, 2, 3}) {
    ml::ThreadTeam team(threads);
    ml::ThreadTeam::Scope scope(threads > 1 ? &team : nullptr);
    ASSERT_TRUE(d.gradientsFinite()) << threads << " threads";
    for (size_t i = 0; i < g.size(); ++i) {  // the kernel's 37 x 29 values, then the bias' 29
      for (float v : bad) {
        g[i] = v;
        EXPECT_FALSE(d.gradientsFinite()) << "value " << v << " at " << i << ", " << threads << " threads";
      }
      g[i] = 0.25f;
    }
    EXPECT_TRUE(d.gradientsFinite()) << threads << " threads";
  }
}

TEST(ThreadTeam, DenseOnATeamMatchesTheSerialPath) {
  openblas_set_num_threads(1);
  struct Case {
    int64_t in, out, n;
    ml::Act act;
  };
  // The wide MLP's layers, uneven splits (101 rows, 37x23, 3 threads), few outputs, few rows.
  const Case cases[] = {{784, 512, 256, ml::Act::Relu},
                        {512, 512, 101, ml::Act::Tanh},
                        {512, 10, 64, ml::Act::Sigmoid},
                        {37, 23, 40, ml::Act::Relu},
                        {12, 16, 8, ml::Act::Relu}};
  using P = ml::Dense::BackwardPlan;
  for (const Case& c : cases) {
    const Result serial = runDense(c.in, c.out, c.n, c.act);
    for (int threads : {2, 3}) {
      ml::ThreadTeam team(threads);
      ml::ThreadTeam::Scope scope(&team);
      for (P plan : {P::Split, P::SideBySide, P::Auto}) {
        ml::Dense::forcePlan(plan);
        const std::string what = std::to_string(c.in) + "x" + std::to_string(c.out) + " batch " + std::to_string(c.n) + ", " +
                                 std::to_string(threads) + " threads, plan " + std::to_string(static_cast<int>(plan));
        // Forward and backward on the team: the serial results to float rounding, the same bits every time.
        const Result r = runDense(c.in, c.out, c.n, c.act, &team);
        EXPECT_LT(relDiff(r.y, serial.y), 5e-6) << "forward " << what;
        EXPECT_LT(relDiff(r.dW, serial.dW), 1e-5) << "weight and bias gradients " << what;
        EXPECT_LT(relDiff(r.dx, serial.dx), 1e-5) << "input gradient " << what;
        const Result again = runDense(c.in, c.out, c.n, c.act, &team);
        EXPECT_TRUE(sameBits(again.y, r.y) && sameBits(again.dW, r.dW) && sameBits(again.dx, r.dx)) << what;
        // Side by side after a serial forward: exactly the serial bits (the same calls, concurrently).
        if (plan == P::SideBySide) {
          const Result side = runDense(c.in, c.out, c.n, c.act, nullptr);
          EXPECT_TRUE(sameBits(side.dW, serial.dW)) << "weight and bias gradients " << what;
          EXPECT_TRUE(sameBits(side.dx, serial.dx)) << "input gradient " << what;
        }
      }
      ml::Dense::forcePlan(P::Auto);
    }
  }
}

TEST(ThreadTeam, ThePlanIsChosenByShape) {
  using P = ml::Dense::BackwardPlan;
  EXPECT_EQ(ml::Dense::choosePlan(512, 512, 256, 1), P::Split);       // nothing to run beside
  EXPECT_EQ(ml::Dense::choosePlan(512, 512, 256, 2), P::SideBySide);  // the wide MLP's hidden layer
  EXPECT_EQ(ml::Dense::choosePlan(4096, 4096, 1024, 2), P::Split);    // big GEMMs split well
}

}  // namespace

// Any layer: forward (on `forwardTeam`, or serially) of inputs on a 0.25 grid (ties for max
// pooling), then backward twice on the current thread's team, if any; parameters' gradients in dW.
Result runLayer(ml::Layer& layer, const ml::Shape& input, int64_t n, ml::ThreadTeam* forwardTeam) {
  layer.name = "layer";
  const ml::Shape out = layer.build(input);
  int64_t in = 1, outF = 1;
  for (auto d : input) in *= d;
  for (auto d : out) outF *= d;
  std::vector<float> p(static_cast<size_t>(layer.paramCount())), g(p.size(), 0.0f);
  layer.bind(p.data(), g.data());
  layer.initialize(7);
  ml::Rng rng(5);
  std::vector<float> x(static_cast<size_t>(n * in)), dy(static_cast<size_t>(n * outF));
  for (auto& v : x) v = std::round(static_cast<float>(rng.uniform(-2, 2)) * 4) / 4;
  Result r;
  r.y.resize(dy.size());
  r.dx.resize(x.size());
  const ml::StepContext ctx;
  {
    ml::ThreadTeam::Scope scope(forwardTeam);
    layer.forward(x.data(), r.y.data(), n, ctx);
  }
  for (int rep = 0; rep < 2; ++rep) {
    for (auto& v : dy) v = static_cast<float>(rng.uniform(-1, 1));
    layer.backward(x.data(), r.y.data(), dy.data(), r.dx.data(), n, ctx);
  }
  r.dW = g;
  return r;
}

TEST(ThreadTeam, ConvolutionsAndPoolingOnATeamMatchTheSerialPath) {
  openblas_set_num_threads(1);
  struct Case {
    std::string what;
    std::function<std::unique_ptr<ml::Layer>()> make;
    ml::Shape input;
    int64_t n;
    bool pooling;
  };
  using ml::Window;
  const Case cases[] = {
      // fashion-cnn's first convolution, two chunks of samples (344 per chunk), an uneven split
      {"conv 32 3x3 on 28x28x1",
       [] {
         return std::make_unique<ml::Conv2D>(32, Window{3, 3, 1, 1, false}, ml::Act::Relu, true, "glorot_uniform", "ones");
       },
       {28, 28, 1},
       350,
       false},
      // its second (60 samples per chunk: two chunks), the window gradient split by 288 columns
      {"conv 64 3x3 on 13x13x32",
       [] {
         return std::make_unique<ml::Conv2D>(64, Window{3, 3, 1, 1, false}, ml::Act::Relu, true, "glorot_uniform", "ones");
       },
       {13, 13, 32},
       101,
       false},
      {"conv 16 5x5 stride 2 same, no bias",
       [] {
         return std::make_unique<ml::Conv2D>(16, Window{5, 5, 2, 2, true}, ml::Act::Tanh, false, "glorot_uniform", "zeros");
       },
       {11, 11, 3},
       9,
       false},
      {"max pool 2x2 on 26x26x32",
       [] {
         return std::make_unique<ml::Pool2D>(true, Window{2, 2, 2, 2, false});
       },
       {26, 26, 32},
       37,
       true},
      {"max pool 3x3 stride 2 same on 11x11x5",
       [] {
         return std::make_unique<ml::Pool2D>(true, Window{3, 3, 2, 2, true});
       },
       {11, 11, 5},
       7,
       true},
      {"average pool 3x3 stride 2 same on 11x11x5",
       [] {
         return std::make_unique<ml::Pool2D>(false, Window{3, 3, 2, 2, true});
       },
       {11, 11, 5},
       7,
       true},
  };
  for (const bool oneDnn : {false, true}) {
    ml::dnnconv::forceOff(false);
    if (oneDnn && !ml::dnnconv::available()) {
      ADD_FAILURE() << "not run on oneDNN: " << ml::dnnconv::description();
      continue;
    }
    ml::dnnconv::forceOff(!oneDnn);
    for (const Case& c : cases) {
      if (oneDnn && c.pooling) continue;
      auto serialLayer = c.make();
      const Result serial = runLayer(*serialLayer, c.input, c.n, nullptr);
      for (int threads : {2, 3}) {
        ml::ThreadTeam team(threads);
        ml::ThreadTeam::Scope scope(&team);
        const std::string what = c.what + ", batch " + std::to_string(c.n) + ", " + std::to_string(threads) + " threads, " +
                                 (oneDnn ? "oneDNN" : "im2col");
        auto layer = c.make();
        const Result r = runLayer(*layer, c.input, c.n, &team);
        if (c.pooling) {  // nothing but per-sample work: exactly the serial bits
          EXPECT_TRUE(sameBits(r.y, serial.y)) << "forward " << what;
          EXPECT_TRUE(sameBits(r.dx, serial.dx)) << "input gradient " << what;
          continue;
        }
        // oneDNN's team splits the samples: the kernel gradient is a sum over other parts.
        EXPECT_LT(relDiff(r.y, serial.y), 5e-6) << "forward " << what;
        EXPECT_LT(relDiff(r.dW, serial.dW), oneDnn ? 1e-4 : 1e-5) << "kernel and bias gradients " << what;
        EXPECT_LT(relDiff(r.dx, serial.dx), 1e-5) << "input gradient " << what;
        auto again = c.make();
        const Result r2 = runLayer(*again, c.input, c.n, &team);
        EXPECT_TRUE(sameBits(r2.y, r.y) && sameBits(r2.dW, r.dW) && sameBits(r2.dx, r.dx)) << what;
        if (threads == 2 && !oneDnn) {  // backward's two products side by side after a serial forward: the serial calls
          auto side = c.make();
          const Result s2 = runLayer(*side, c.input, c.n, nullptr);
          EXPECT_TRUE(sameBits(s2.dW, serial.dW)) << "kernel and bias gradients " << what;
          EXPECT_TRUE(sameBits(s2.dx, serial.dx)) << "input gradient " << what;
        }
      }
    }
  }
  ml::dnnconv::forceOff(false);
}
