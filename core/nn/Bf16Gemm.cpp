// The bfloat16 products of Bf16Gemm.h: oneDNN's matmul where the CPU has bfloat16 instructions,
// OpenBLAS on the widened values elsewhere.
#include "nn/Bf16Gemm.h"

#include <cblas.h>

#include <atomic>
#include <bit>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "tensor/Dispatch.h"

#if MIRRORLAB_HAVE_DNNL
#include "nn/OneDnnContext.h"
#endif

namespace ml::bf16 {

namespace {

std::atomic<bool> gForceEmulated{false};

// Thread-local scratch for the emulated kernel's widened operands.
thread_local std::vector<float> tWideA, tWideB;

void emulatedGemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda, const uint16_t* B,
                  int64_t ldb, float* C, int64_t ldc, const float* bias) {
  // Widen exactly the elements the product reads: an operand may be a block of a larger matrix (a
  // team's columns), so its last row ends at its own last column, not at the leading dimension.
  const int64_t rowsA = transA ? K : M, colsA = transA ? M : K;
  const int64_t rowsB = transB ? N : K, colsB = transB ? K : N;
  const auto extent = [](int64_t rows, int64_t cols, int64_t ld) {
    return rows > 0 && cols > 0 ? static_cast<size_t>((rows - 1) * ld + cols) : size_t{0};
  };
  tWideA.resize(extent(rowsA, colsA, lda));
  tWideB.resize(extent(rowsB, colsB, ldb));
  unpack(A, tWideA.data(), tWideA.size());
  unpack(B, tWideB.data(), tWideB.size());
  if (bias)
    for (int64_t r = 0; r < M; ++r) std::memcpy(C + r * ldc, bias, static_cast<size_t>(N) * sizeof(float));
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans, static_cast<int>(M),
              static_cast<int>(N), static_cast<int>(K), 1.0f, tWideA.data(), static_cast<int>(lda), tWideB.data(),
              static_cast<int>(ldb), bias ? 1.0f : 0.0f, C, static_cast<int>(ldc));
}

#if MIRRORLAB_HAVE_DNNL

using onednn::engine;
using onednn::oneOpenMpThread;

struct Key {
  bool transA, transB, bias, bf16Out = false;
  int64_t M, N, K, lda, ldb, ldc;
  bool operator==(const Key&) const = default;
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = (k.transA ? 1u : 0u) | (k.transB ? 2u : 0u) | (k.bias ? 4u : 0u) | (k.bf16Out ? 8u : 0u);
    for (int64_t v : {k.M, k.N, k.K, k.lda, k.ldb, k.ldc}) h = h * 1000003u ^ static_cast<size_t>(v);
    return h;
  }
};

using dt = dnnl::memory::data_type;
using dims = dnnl::memory::dims;

struct Plan {
  dnnl::memory::desc a, b, c, bias;
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
};

Plan makePlan(const Key& k) {
  Plan p;
  // Row-major operands given by strides: op(A) is M x K, stored (M, lda) or transposed (K, lda).
  p.a = dnnl::memory::desc(dims{k.M, k.K}, dt::bf16, k.transA ? dims{1, k.lda} : dims{k.lda, 1});
  p.b = dnnl::memory::desc(dims{k.K, k.N}, dt::bf16, k.transB ? dims{1, k.ldb} : dims{k.ldb, 1});
  p.c = dnnl::memory::desc(dims{k.M, k.N}, k.bf16Out ? dt::bf16 : dt::f32, dims{k.ldc, 1});
  if (k.bias) p.bias = dnnl::memory::desc(dims{1, k.N}, dt::f32, dims{k.N, 1});
  const auto desc = k.bias ? dnnl::matmul::desc(p.a, p.b, p.bias, p.c) : dnnl::matmul::desc(p.a, p.b, p.c);
  p.pd = dnnl::matmul::primitive_desc(desc, engine());
  p.prim = dnnl::matmul(p.pd);
  return p;
}

// C is float32, or bfloat16 with bf16Out.
void oneDnnGemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda, const uint16_t* B,
                int64_t ldb, void* C, int64_t ldc, const float* bias, bool bf16Out) {
  oneOpenMpThread();
  thread_local std::unordered_map<Key, Plan, KeyHash> plans;
  const Key key{transA, transB, bias != nullptr, bf16Out, M, N, K, lda, ldb, ldc};
  auto it = plans.find(key);
  if (it == plans.end()) it = plans.emplace(key, makePlan(key)).first;
  const Plan& p = it->second;
  onednn::executeMatmul(p.prim, p.a, A, p.b, B, p.c, C, p.bias, bias);
}

struct Probe {
  Kernel kernel = Kernel::Emulated;
  std::string description;
};

// A native bfloat16 implementation, not oneDNN's reference loops ("ref:any", "gemm:ref", ...).
Probe probe() {
  Probe p;
  try {
    oneOpenMpThread();
    const Key k{false, false, true, false, 64, 64, 64, 64, 64, 64};
    Plan plan = makePlan(k);
    const std::string impl = plan.pd.impl_info_str();
    const std::string lib = "oneDNN " + onednn::version();
    if (impl.find("ref") != std::string::npos) {
      p.description = "emulated (float32 sgemm): " + lib + " has only its reference bfloat16 matmul on this CPU (" + impl + ")";
      return p;
    }
    p.kernel = Kernel::OneDnn;
    p.description = lib + " " + impl;
  } catch (const dnnl::error& e) {
    p.description = std::string("emulated (float32 sgemm): oneDNN has no bfloat16 matmul on this CPU (") + e.what() + ")";
  }
  return p;
}

#else

struct Probe {
  Kernel kernel = Kernel::Emulated;
  std::string description = "emulated (float32 sgemm): this Mirrorlab was built without oneDNN (libdnnl-dev)";
};
Probe probe() { return {}; }

#endif

const Probe& probed() {
  static const Probe p = probe();
  return p;
}

}  // namespace

Kernel kernel() { return gForceEmulated.load(std::memory_order_relaxed) ? Kernel::Emulated : probed().kernel; }

std::string kernelDescription() {
  if (gForceEmulated.load(std::memory_order_relaxed) && probed().kernel == Kernel::OneDnn)
    return "emulated (float32 sgemm): forced";
  return probed().description;
}

void forceEmulated(bool on) { gForceEmulated.store(on, std::memory_order_relaxed); }

ML_DISPATCH_X86 void pack(const float* in, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const uint32_t u = std::bit_cast<uint32_t>(in[i]);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t nan = (u >> 16) | 0x40u;  // quiet, sign kept: rounding could carry a NaN into inf
    out[i] = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
  }
}

namespace {
// roundToBfloat16 without a branch: NaN (which the rounding bias could carry into inf) is kept.
inline float roundValue(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  return std::bit_cast<float>((u & 0x7fffffffu) > 0x7f800000u ? u : r);
}
}  // namespace

ML_DISPATCH_X86 void roundInPlace(float* values, size_t n) {
  for (size_t i = 0; i < n; ++i) values[i] = roundValue(values[i]);
}

ML_DISPATCH_X86 void addRounded(const float* in, float* acc, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] += roundValue(in[i]);
}

ML_DISPATCH_X86 void addUnpacked(const uint16_t* in, float* acc, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] += std::bit_cast<float>(static_cast<uint32_t>(in[i]) << 16);
}

ML_DISPATCH_X86 void unpack(const uint16_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = std::bit_cast<float>(static_cast<uint32_t>(in[i]) << 16);
}

void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda, const uint16_t* B,
          int64_t ldb, float* C, int64_t ldc, const float* bias) {
  if (M == 0 || N == 0) return;
#if MIRRORLAB_HAVE_DNNL
  if (kernel() == Kernel::OneDnn && K > 0) return oneDnnGemm(transA, transB, M, N, K, A, lda, B, ldb, C, ldc, bias, false);
#endif
  emulatedGemm(transA, transB, M, N, K, A, lda, B, ldb, C, ldc, bias);
}

void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda, const uint16_t* B,
          int64_t ldb, uint16_t* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
#if MIRRORLAB_HAVE_DNNL
  if (kernel() == Kernel::OneDnn && K > 0) return oneDnnGemm(transA, transB, M, N, K, A, lda, B, ldb, C, ldc, nullptr, true);
#endif
  thread_local std::vector<float> wide;
  wide.resize(static_cast<size_t>(M * N));
  emulatedGemm(transA, transB, M, N, K, A, lda, B, ldb, wide.data(), N, nullptr);
  for (int64_t r = 0; r < M; ++r) pack(wide.data() + r * N, C + r * ldc, static_cast<size_t>(N));
}

}  // namespace ml::bf16
