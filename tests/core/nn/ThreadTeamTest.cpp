// One replica on a team of threads. Where the math is the same, the bits are the same: Dense
// backward with its two GEMMs side by side runs the very calls of the serial path, and the
// element-wise parts (activation gradient by rows, bias gradient by columns) keep each element's
// order. A GEMM split across threads is not the same math in OpenBLAS 0.3.21 (its blocking of the
// inner dimension follows the block's shape: measured), so split GEMMs agree to float rounding.
// Either way the result does not change from run to run.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "nn/Dense.h"
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
        EXPECT_LT(relDiff(r.y, serial.y), 1e-6) << "forward " << what;
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
