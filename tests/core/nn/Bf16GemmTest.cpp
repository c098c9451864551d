// The bfloat16 products of mixed_bfloat16 (nn/Bf16Gemm.h): packing agrees with the one rounding
// place bit for bit; both kernels (oneDNN's native one where this CPU has bfloat16 instructions,
// and the emulated one) stay within float32's summation error bound of the exact product of the
// bfloat16 operands, for every transposition, odd sizes and row strides; oneDNN runs on the
// calling thread alone; a Dense layer gives the same numbers with either kernel up to rounding order.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "nn/Bf16Gemm.h"
#include "nn/Conv2D.h"
#include "nn/Dense.h"
#include "nn/Precision.h"
#include "nn/ThreadTeam.h"
#include "random/Rng.h"

#include "NnTestUtil.h"

namespace ml {
namespace {

using test::DenseOut;

// Restores the kernel choice when a test ends.
struct ForceEmulated {
  explicit ForceEmulated(bool on) { bf16::forceEmulated(on); }
  ~ForceEmulated() { bf16::forceEmulated(false); }
};

TEST(Bf16Pack, AgreesWithRoundToBfloat16OnRandomBits) {
  Rng rng(77);
  std::vector<float> in(200000);
  for (size_t i = 0; i < in.size(); ++i) in[i] = std::bit_cast<float>(static_cast<uint32_t>(rng.next()));
  // The edges: ties to even both ways, the largest finite values (which round to inf), infinities.
  const float edges[] = {1.0f + 0x1p-8f,
                         1.0f + 0x3p-8f,
                         std::numeric_limits<float>::max(),
                         -std::numeric_limits<float>::max(),
                         std::numeric_limits<float>::infinity(),
                         -std::numeric_limits<float>::infinity(),
                         0.0f,
                         -0.0f,
                         std::numeric_limits<float>::denorm_min()};
  in.insert(in.end(), std::begin(edges), std::end(edges));
  in.push_back(std::bit_cast<float>(0x7f800001u));  // a NaN whose payload is all in the low bits
  std::vector<uint16_t> packed(in.size());
  bf16::pack(in.data(), packed.data(), in.size());
  std::vector<float> back(in.size());
  bf16::unpack(packed.data(), back.data(), in.size());
  size_t nans = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const float want = roundToBfloat16(in[i]);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(back[i])) << std::hex << std::bit_cast<uint32_t>(in[i]);  // never inf
      ASSERT_EQ(std::signbit(back[i]), std::signbit(in[i]));
      ++nans;
    } else {
      ASSERT_EQ(std::bit_cast<uint32_t>(back[i]), std::bit_cast<uint32_t>(want)) << std::hex << std::bit_cast<uint32_t>(in[i]);
    }
  }
  EXPECT_GT(nans, 0u);
}

struct GemmCase {
  bool transA, transB;
  int64_t M, N, K, pad;  // pad: extra elements per row of every operand (a row stride > its width)
  bool bias;
};

// Random bfloat16 operands for op(A) (M x K) and op(B) (K x N) stored as the case says; the exact
// product in double and the float32 error bound per element (gamma_K * sum |a||b|, plus the bias).
struct GemmData {
  int64_t lda, ldb, ldc;
  std::vector<uint16_t> A, B;
  std::vector<float> bias;
  std::vector<double> exact, bound;
};

GemmData makeData(const GemmCase& c, uint64_t seed) {
  GemmData d;
  const int64_t rowsA = c.transA ? c.K : c.M, colsA = c.transA ? c.M : c.K;
  const int64_t rowsB = c.transB ? c.N : c.K, colsB = c.transB ? c.K : c.N;
  d.lda = colsA + c.pad;
  d.ldb = colsB + c.pad;
  d.ldc = c.N + c.pad;
  Rng rng(seed);
  auto fill = [&](std::vector<uint16_t>& v, int64_t rows, int64_t ld) {
    std::vector<float> f(static_cast<size_t>(rows * ld));
    for (float& x : f) x = static_cast<float>(rng.uniform(-2, 2));
    v.resize(f.size());
    bf16::pack(f.data(), v.data(), f.size());
  };
  fill(d.A, rowsA, d.lda);
  fill(d.B, rowsB, d.ldb);
  if (c.bias)
    for (int64_t j = 0; j < c.N; ++j) d.bias.push_back(static_cast<float>(rng.uniform(-1, 1)));
  auto val = [](uint16_t b) { return static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(b) << 16)); };
  auto a = [&](int64_t i, int64_t k) { return val(c.transA ? d.A[k * d.lda + i] : d.A[i * d.lda + k]); };
  auto b = [&](int64_t k, int64_t j) { return val(c.transB ? d.B[j * d.ldb + k] : d.B[k * d.ldb + j]); };
  const double gamma = static_cast<double>(c.K + 1) * 0x1p-24 / (1.0 - static_cast<double>(c.K + 1) * 0x1p-24);
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < c.N; ++j) {
      double s = 0, mag = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        s += a(i, k) * b(k, j);
        mag += std::fabs(a(i, k) * b(k, j));
      }
      if (c.bias) {
        s += d.bias[static_cast<size_t>(j)];
        mag += std::fabs(d.bias[static_cast<size_t>(j)]);
      }
      d.exact.push_back(s);
      d.bound.push_back(gamma * mag + 1e-30);
    }
  return d;
}

// Runs the current kernel; every C element within the bound, and the padding of C untouched.
std::vector<float> runAndCheck(const GemmCase& c, const GemmData& d) {
  const float sentinel = -12345.0f;
  std::vector<float> C(static_cast<size_t>(c.M * d.ldc), sentinel);
  bf16::gemm(c.transA, c.transB, c.M, c.N, c.K, d.A.data(), d.lda, d.B.data(), d.ldb, C.data(), d.ldc,
             c.bias ? d.bias.data() : nullptr);
  double worst = 0;
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = 0; j < c.N; ++j) {
      const size_t e = static_cast<size_t>(i * c.N + j);
      worst = std::max(worst, std::fabs(C[static_cast<size_t>(i * d.ldc + j)] - d.exact[e]) / d.bound[e]);
    }
    for (int64_t j = c.N; j < d.ldc; ++j) EXPECT_EQ(C[static_cast<size_t>(i * d.ldc + j)], sentinel) << "wrote past N";
  }
  EXPECT_LE(worst, 1.0) << "error / float32 summation bound";
  return C;
}

const GemmCase kCases[] = {
    {false, false, 37, 19, 53, 0, true},    {true, false, 37, 19, 53, 3, false},    {false, true, 37, 19, 53, 5, false},
    {true, true, 17, 29, 41, 2, true},      {false, false, 1, 10, 512, 0, true},    {true, false, 784, 512, 256, 0, false},
    {false, true, 256, 784, 512, 0, false}, {false, false, 256, 512, 784, 0, true},
};

TEST(Bf16Gemm, EmulatedKernelIsWithinFloat32sSummationBound) {
  ForceEmulated force(true);
  EXPECT_EQ(bf16::kernel(), bf16::Kernel::Emulated);
  uint64_t seed = 1;
  for (const GemmCase& c : kCases) {
    SCOPED_TRACE(testing::Message() << c.transA << c.transB << " " << c.M << "x" << c.N << "x" << c.K);
    runAndCheck(c, makeData(c, seed++));
  }
}

TEST(Bf16Gemm, OneDnnKernelIsWithinTheBoundAndAgreesWithTheEmulatedOne) {
  if (bf16::kernel() != bf16::Kernel::OneDnn) GTEST_SKIP() << "no native bfloat16 kernel here: " << bf16::kernelDescription();
  EXPECT_NE(bf16::kernelDescription().find("oneDNN"), std::string::npos) << bf16::kernelDescription();
  uint64_t seed = 1;
  for (const GemmCase& c : kCases) {
    SCOPED_TRACE(testing::Message() << c.transA << c.transB << " " << c.M << "x" << c.N << "x" << c.K);
    const GemmData d = makeData(c, seed++);
    const std::vector<float> native = runAndCheck(c, d);
    const std::vector<float> again = runAndCheck(c, d);  // the cached plan: the same bits
    EXPECT_EQ(native, again);
    ForceEmulated force(true);
    const std::vector<float> emulated = runAndCheck(c, d);
    for (size_t i = 0; i < native.size(); ++i) {
      const size_t e = static_cast<size_t>((static_cast<int64_t>(i) / d.ldc) * c.N + static_cast<int64_t>(i) % d.ldc);
      if (static_cast<int64_t>(i) % d.ldc < c.N) {
        ASSERT_LE(std::fabs(native[i] - emulated[i]), 2 * d.bound[e]);
      }
    }
  }
}

// The product written as bfloat16 is the float32 product rounded: bit for bit with the emulated
// kernel; with oneDNN (its own conversion of the same accumulators) within one rounding step, nearly
// all exactly. Padding past N is left alone.
TEST(Bf16Gemm, Bfloat16OutputIsTheRoundedFloat32Product) {
  for (bool emulated : {true, false}) {
    if (!emulated && bf16::kernel() != bf16::Kernel::OneDnn) continue;
    ForceEmulated force(emulated);
    for (const GemmCase& c : {GemmCase{true, false, 784, 512, 256, 0, false}, GemmCase{true, false, 37, 19, 53, 3, false}}) {
      const GemmData d = makeData(c, 21);
      std::vector<float> f(static_cast<size_t>(c.M * d.ldc), 0.0f);
      std::vector<uint16_t> b(f.size(), 0xABCD);
      bf16::gemm(c.transA, c.transB, c.M, c.N, c.K, d.A.data(), d.lda, d.B.data(), d.ldb, f.data(), d.ldc);
      bf16::gemm(c.transA, c.transB, c.M, c.N, c.K, d.A.data(), d.lda, d.B.data(), d.ldb, b.data(), d.ldc);
      size_t exact = 0, total = 0;
      for (int64_t i = 0; i < c.M; ++i)
        for (int64_t j = 0; j < d.ldc; ++j) {
          const size_t e = static_cast<size_t>(i * d.ldc + j);
          if (j >= c.N) {
            ASSERT_EQ(b[e], 0xABCD) << "wrote past N";
            continue;
          }
          const float got = std::bit_cast<float>(static_cast<uint32_t>(b[e]) << 16), want = roundToBfloat16(f[e]);
          ASSERT_LE(std::fabs(got - want), std::fabs(want) * 0x1p-7f + 1e-30f) << i << "," << j;
          exact += got == want ? 1 : 0;
          ++total;
        }
      if (emulated)
        EXPECT_EQ(exact, total);
      else
        EXPECT_GE(exact, total * 99 / 100) << bf16::kernelDescription();
    }
  }
}

TEST(Bf16Gemm, RunsOnTheCallingThreadAlone) {
  // OpenMP keeps a calling thread's team alive after a parallel region: were oneDNN to use one,
  // the process would have more threads than the caller's while the caller still lives.
  const GemmCase c{false, false, 256, 512, 784, 0, true};
  const GemmData d = makeData(c, 3);
  const int before = test::threadsOfThisProcess();
  int during = 0;
  std::thread t([&] {
    runAndCheck(c, d);
    runAndCheck(c, d);
    during = test::threadsOfThisProcess();
  });
  t.join();
  EXPECT_EQ(during, before + 1) << bf16::kernelDescription();
}

DenseOut runBf16Dense(int64_t in, int64_t out, int64_t n, Act act, bool emulated) {
  ForceEmulated force(emulated);
  return test::runDenseLayer(in, out, n, act, Precision::MixedBfloat16, 1);
}

// Equal up to one bfloat16 rounding step each (the sums' order differs), most of them exactly. A
// value that is a sum with cancellation may differ by float32's summation error, which scales with
// the summands rather than the sum: 1e-5 of the largest value covers that (K <= 784 summands).
void expectWithinOneBfloat16Step(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  float largest = 0;
  for (float v : b) largest = std::max(largest, std::fabs(v));
  size_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const float scale = std::max(std::fabs(a[i]), std::fabs(b[i]));
    ASSERT_LE(std::fabs(a[i] - b[i]), scale * 0x1p-7f + 1e-5f * largest) << what << " " << i << ": " << a[i] << " vs " << b[i];
    differ += a[i] != b[i] ? 1 : 0;
  }
  EXPECT_LT(differ, a.size() / 4) << what << ": most values are the same bfloat16";
}

// A Dense layer (784 -> 96, relu, batch 40) under mixed_bfloat16: oneDNN's kernel and the emulated
// one give outputs and gradients equal up to one bfloat16 rounding step.
TEST(Bf16Gemm, DenseGivesTheEmulatedNumbersUpToRoundingOrder) {
  if (bf16::kernel() != bf16::Kernel::OneDnn) GTEST_SKIP() << "no native bfloat16 kernel here: " << bf16::kernelDescription();
  const DenseOut native = runBf16Dense(784, 96, 40, Act::Relu, false), emulated = runBf16Dense(784, 96, 40, Act::Relu, true);
  expectWithinOneBfloat16Step(native.y, emulated.y, "y");
  expectWithinOneBfloat16Step(native.dx, emulated.dx, "dx");
  expectWithinOneBfloat16Step(native.grads, emulated.grads, "grads");
}

// One replica on a team of threads (cpu:1 with --threads-per-device): the bfloat16 products split
// by rows (Dense.cpp says how), with either kernel, give the serial numbers up to rounding order and the same bits
// from run to run.
TEST(Bf16Gemm, DenseOnATeamMatchesTheSerialPath) {
  struct Case {
    int64_t in, out, n;
    Act act;
  };
  const Case cases[] = {{784, 512, 64, Act::Relu}, {512, 10, 64, Act::Linear}, {37, 23, 40, Act::Tanh}};
  for (bool emulated : {true, false}) {
    if (!emulated && bf16::kernel() != bf16::Kernel::OneDnn) continue;
    for (const Case& c : cases) {
      const DenseOut serial = runBf16Dense(c.in, c.out, c.n, c.act, emulated);
      for (int threads : {2, 3}) {
        ThreadTeam team(threads);
        ThreadTeam::Scope scope(&team);
        const std::string what = std::to_string(c.in) + "x" + std::to_string(c.out) + ", " + std::to_string(threads) +
                                 " threads, " + (emulated ? "emulated" : bf16::kernelDescription());
        const DenseOut r = runBf16Dense(c.in, c.out, c.n, c.act, emulated);
        expectWithinOneBfloat16Step(r.y, serial.y, "y " + what);
        expectWithinOneBfloat16Step(r.dx, serial.dx, "dx " + what);
        expectWithinOneBfloat16Step(r.grads, serial.grads, "grads " + what);
        const DenseOut again = runBf16Dense(c.in, c.out, c.n, c.act, emulated);
        EXPECT_TRUE(again.y == r.y && again.dx == r.dx && again.grads == r.grads) << what;
      }
    }
  }
}

// A Conv2D (16 filters 3x3, same padding, stride 2, on 13x13x3, batch 24) under mixed_bfloat16: its
// three products on oneDNN give the emulated kernel's outputs and gradients up to rounding order.
TEST(Bf16Gemm, Conv2DGivesTheEmulatedNumbersUpToRoundingOrder) {
  if (bf16::kernel() != bf16::Kernel::OneDnn) GTEST_SKIP() << "no native bfloat16 kernel here: " << bf16::kernelDescription();
  auto run = [](bool emulated) {
    ForceEmulated force(emulated);
    Conv2D c(16, Window{3, 3, 2, 2, true}, Act::Relu, true, "glorot_uniform", "ones");
    c.name = "conv2d";
    return test::runLayerPasses(c, {13, 13, 3}, 24, Precision::MixedBfloat16, 3, 4, -1.0, 1);
  };
  const DenseOut native = run(false), emulated = run(true);
  expectWithinOneBfloat16Step(native.y, emulated.y, "y");
  expectWithinOneBfloat16Step(native.dx, emulated.dx, "dx");
  expectWithinOneBfloat16Step(native.grads, emulated.grads, "grads");
}

}  // namespace
}  // namespace ml
