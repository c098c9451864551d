// The float32 products of Dense (nn/Sgemm.h): both kernels (oneDNN's blocked matmul where this CPU
// has it, OpenBLAS' sgemm) stay within float32's summation error bound of the exact product, for
// every transposition, the accumulate and bias forms, odd sizes, row strides and column blocks of
// a larger matrix (a team's parts); the same call gives the same bits every time and on any thread;
// oneDNN really runs the wide MLP's products where the CPU has the kernel; a Dense layer gives the
// same numbers on either kernel up to the order of the sums.
#include <cblas.h>
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "nn/Dense.h"
#include "nn/Sgemm.h"
#include "nn/ThreadTeam.h"
#include "random/Rng.h"

#include "NnTestUtil.h"

namespace ml {
namespace {

using test::DenseOut;

// One kernel for the test's products; the preferred one again when the test ends.
struct Force {
  explicit Force(sgemm::Kernel k) { sgemm::force(k); }
  ~Force() { sgemm::force(std::nullopt); }
};

struct Case {
  bool transA, transB;
  int64_t M, N, K, pad;  // pad: extra elements per row of every operand (a row stride > its width)
  bool accumulate, bias;
};

// Random operands stored as the case says, C's initial values (accumulate), the exact result in
// double and the float32 error bound per element: gamma_(K+2) * (sum |a||b| + |c| + |bias|).
struct Data {
  int64_t lda, ldb, ldc;
  std::vector<float> A, B, C0, bias;
  std::vector<double> exact, bound;
};

Data makeData(const Case& c, uint64_t seed) {
  Data d;
  const int64_t rowsA = c.transA ? c.K : c.M, colsA = c.transA ? c.M : c.K;
  const int64_t rowsB = c.transB ? c.N : c.K, colsB = c.transB ? c.K : c.N;
  d.lda = colsA + c.pad;
  d.ldb = colsB + c.pad;
  d.ldc = c.N + c.pad;
  Rng rng(seed);
  auto fill = [&](std::vector<float>& v, int64_t rows, int64_t ld) {
    v.resize(static_cast<size_t>(rows * ld));
    for (float& x : v) x = static_cast<float>(rng.uniform(-2, 2));
  };
  fill(d.A, rowsA, d.lda);
  fill(d.B, rowsB, d.ldb);
  fill(d.C0, c.M, d.ldc);
  if (c.bias)
    for (int64_t j = 0; j < c.N; ++j) d.bias.push_back(static_cast<float>(rng.uniform(-1, 1)));
  auto a = [&](int64_t i, int64_t k) { return static_cast<double>(c.transA ? d.A[k * d.lda + i] : d.A[i * d.lda + k]); };
  auto b = [&](int64_t k, int64_t j) { return static_cast<double>(c.transB ? d.B[j * d.ldb + k] : d.B[k * d.ldb + j]); };
  const double gamma = static_cast<double>(c.K + 2) * 0x1p-24 / (1.0 - static_cast<double>(c.K + 2) * 0x1p-24);
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < c.N; ++j) {
      double s = 0, mag = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        s += a(i, k) * b(k, j);
        mag += std::fabs(a(i, k) * b(k, j));
      }
      const double extra = c.accumulate ? d.C0[static_cast<size_t>(i * d.ldc + j)]
                           : c.bias     ? d.bias[static_cast<size_t>(j)]
                                        : 0.0;
      d.exact.push_back(s + extra);
      d.bound.push_back(gamma * (mag + std::fabs(extra)) + 1e-30);
    }
  return d;
}

// Runs the current kernel; every C element within the bound, and C's padding untouched.
std::vector<float> runAndCheck(const Case& c, const Data& d) {
  std::vector<float> C = d.C0;
  sgemm::gemm(c.transA, c.transB, c.M, c.N, c.K, d.A.data(), d.lda, d.B.data(), d.ldb, C.data(), d.ldc, c.accumulate,
              c.bias ? d.bias.data() : nullptr);
  double worst = 0;
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = 0; j < c.N; ++j) {
      const size_t e = static_cast<size_t>(i * c.N + j);
      worst = std::max(worst, std::fabs(C[static_cast<size_t>(i * d.ldc + j)] - d.exact[e]) / d.bound[e]);
    }
    for (int64_t j = c.N; j < d.ldc; ++j)
      EXPECT_EQ(C[static_cast<size_t>(i * d.ldc + j)], d.C0[static_cast<size_t>(i * d.ldc + j)]) << "wrote past N";
  }
  EXPECT_LE(worst, 1.0) << "error / float32 summation bound";
  return C;
}

// Dense's three products at odd and real sizes: forward (bias), weight gradient (x^T dz,
// accumulated), input gradient (dz W^T); with padding, as a team's column blocks see them.
const Case kCases[] = {
    {false, false, 37, 19, 53, 0, false, true},     {true, false, 53, 19, 37, 3, true, false},
    {false, true, 37, 53, 19, 5, false, false},     {true, true, 17, 29, 41, 2, false, false},
    {false, false, 1, 10, 512, 0, false, true},     {false, false, 256, 512, 784, 0, false, true},
    {true, false, 784, 512, 256, 0, true, false},   {false, true, 256, 784, 512, 0, false, false},
    {false, false, 256, 10, 512, 0, false, true},   {true, false, 512, 10, 256, 0, true, false},
    {false, false, 64, 200, 300, 312, false, true},
};

TEST(Sgemm, OpenBlasIsWithinFloat32sSummationBound) {
  Force force(sgemm::Kernel::OpenBlas);
  EXPECT_EQ(sgemm::kernel(), sgemm::Kernel::OpenBlas);
  uint64_t seed = 1;
  for (const Case& c : kCases) {
    SCOPED_TRACE(testing::Message() << c.transA << c.transB << " " << c.M << "x" << c.N << "x" << c.K);
    runAndCheck(c, makeData(c, seed++));
  }
}

TEST(Sgemm, OneDnnIsWithinTheBoundAndGivesTheSameBitsEveryTime) {
  if (!sgemm::oneDnnAvailable()) GTEST_SKIP() << "no oneDNN blocked matmul here: " << sgemm::kernelDescription();
  Force force(sgemm::Kernel::OneDnn);
  EXPECT_EQ(sgemm::kernelDescription().rfind("oneDNN ", 0), 0u) << sgemm::kernelDescription();
  EXPECT_EQ(sgemm::kernel(), sgemm::Kernel::OneDnn);
  uint64_t seed = 1;
  for (const Case& c : kCases) {
    SCOPED_TRACE(testing::Message() << c.transA << c.transB << " " << c.M << "x" << c.N << "x" << c.K);
    const Data d = makeData(c, seed++);
    const std::vector<float> first = runAndCheck(c, d);
    EXPECT_EQ(runAndCheck(c, d), first) << "the cached plan";
    std::vector<float> other;
    std::thread t([&] { other = runAndCheck(c, d); });  // another thread's own plan
    t.join();
    EXPECT_EQ(other, first) << "another thread";
  }
}

// The products Dense issues for the wide MLP (784-512-512-10, batch 256), whole and as a 2-thread
// team's parts (rows: samples of y and dx, inputs of dW with x's columns packed), run on oneDNN
// where this CPU has its blocked kernel: the speed this kernel exists for. A block of columns of a
// wider matrix does not (oneDNN offers its generic gemm there, which is no faster than OpenBLAS).
TEST(Sgemm, TheWideMlpsProductsRunOnOneDnn) {
  if (!sgemm::oneDnnAvailable()) GTEST_SKIP() << "no oneDNN blocked matmul here: " << sgemm::kernelDescription();
  Force force(sgemm::Kernel::OneDnn);
  const int64_t out = 512;
  for (int64_t in : {784, 512, 10})
    for (int parts : {1, 2}) {
      SCOPED_TRACE(testing::Message() << in << "x" << out << ", " << parts << " part(s)");
      const int64_t n = 256 / parts, rowsOfW = in / parts;
      EXPECT_EQ(sgemm::kernelFor(false, false, n, out, in, in, out, out, false, true), sgemm::Kernel::OneDnn) << "forward";
      EXPECT_EQ(sgemm::kernelFor(true, false, rowsOfW, out, 256, rowsOfW, out, out, true), sgemm::Kernel::OneDnn) << "dW";
      EXPECT_EQ(sgemm::kernelFor(false, true, n, in, out, out, out, in), sgemm::Kernel::OneDnn) << "dx";
    }
  sgemm::force(sgemm::Kernel::OpenBlas);
  EXPECT_EQ(sgemm::kernelFor(false, false, 256, 512, 784, 784, 512, 512, false, true), sgemm::Kernel::OpenBlas);
}

// The preferred kernel follows OpenBLAS' kernels and the CPU's maker: OpenBLAS' own AVX-512 ones on
// an AMD CPU (as fast as oneDNN there, measured) keep OpenBLAS; anything else on a CPU where oneDNN
// has its blocked matmul takes oneDNN (on an Intel Xeon it was faster than OpenBLAS' AVX-512
// kernels, measured). The start line says which and why.
TEST(Sgemm, ThePreferredKernelFollowsOpenBlassKernelsAndTheCpu) {
  const std::string core = openblas_get_corename();
  const bool avx512 = core == "SkylakeX" || core == "Cooperlake" || core == "SapphireRapids";
  __builtin_cpu_init();
  const bool amd = __builtin_cpu_is("amd");
  const sgemm::Kernel want = sgemm::oneDnnAvailable() && !(avx512 && amd) ? sgemm::Kernel::OneDnn : sgemm::Kernel::OpenBlas;
  EXPECT_EQ(sgemm::kernel(), want) << "OpenBLAS core " << core << (amd ? ", AMD: " : ", not AMD: ") << sgemm::kernelDescription();
  if (sgemm::oneDnnAvailable()) {
    EXPECT_NE(sgemm::kernelDescription().find(core), std::string::npos) << sgemm::kernelDescription();
    if (avx512) {
      EXPECT_NE(sgemm::kernelDescription().find(amd ? "on AMD CPUs" : "not AMD's"), std::string::npos)
          << sgemm::kernelDescription();
    }
  }
}

TEST(Sgemm, BiasAndAccumulateTogetherAreRefused) {
  std::vector<float> a(4, 1.0f), b(4, 1.0f), c(4, 0.0f), bias(2, 0.0f);
  EXPECT_THROW(sgemm::gemm(false, false, 2, 2, 2, a.data(), 2, b.data(), 2, c.data(), 2, true, bias.data()), std::logic_error);
}

TEST(Sgemm, RunsOnTheCallingThreadAlone) {
  const Case c{false, false, 256, 512, 784, 0, false, true};
  const Data d = makeData(c, 3);
  const int before = test::threadsOfThisProcess();
  int during = 0;
  std::thread t([&] {
    runAndCheck(c, d);
    runAndCheck(c, d);
    during = test::threadsOfThisProcess();
  });
  t.join();
  EXPECT_EQ(during, before + 1) << sgemm::kernelDescription();
}

DenseOut runDense(int64_t in, int64_t out, int64_t n, Act act, bool openBlas) {
  Force force(openBlas ? sgemm::Kernel::OpenBlas : sgemm::Kernel::OneDnn);
  return test::runDenseLayer(in, out, n, act, Precision::Float32, 2);
}

// max |a - b| / max |b|: the same numbers up to the order of float32 sums.
double relDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
  }
  return diff / scale;
}

TEST(Sgemm, DenseGivesOpenBlassNumbersUpToTheOrderOfSums) {
  if (!sgemm::oneDnnAvailable()) GTEST_SKIP() << "no oneDNN blocked matmul here: " << sgemm::kernelDescription();
  Force force(sgemm::Kernel::OneDnn);
  struct Shape {
    int64_t in, out, n;
    Act act;
  };
  for (const Shape& s : {Shape{784, 512, 64, Act::Relu}, Shape{512, 10, 40, Act::Linear}, Shape{37, 23, 9, Act::Tanh}}) {
    for (int threads : {1, 2}) {
      SCOPED_TRACE(testing::Message() << s.in << "x" << s.out << " batch " << s.n << ", " << threads << " threads");
      ThreadTeam team(threads);
      ThreadTeam::Scope scope(threads > 1 ? &team : nullptr);
      const DenseOut dnn = runDense(s.in, s.out, s.n, s.act, false), blas = runDense(s.in, s.out, s.n, s.act, true);
      EXPECT_LT(relDiff(dnn.y, blas.y), 1e-6);
      EXPECT_LT(relDiff(dnn.grads, blas.grads), 1e-5);
      EXPECT_LT(relDiff(dnn.dx, blas.dx), 1e-5);
    }
  }
}

}  // namespace
}  // namespace ml
