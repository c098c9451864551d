// The float32 products of Sgemm.h: oneDNN's blocked matmul where it has one, OpenBLAS elsewhere.
#include "nn/Sgemm.h"

#include <cblas.h>

#include <atomic>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#if MIRRORLAB_HAVE_DNNL
#include "nn/OneDnnContext.h"
#endif

namespace ml::sgemm {

namespace {

enum class Forced { No, OpenBlas, OneDnn };
std::atomic<Forced> gForced{Forced::No};

void openBlasGemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                  int64_t ldb, float* C, int64_t ldc, bool accumulate, const float* bias) {
  if (bias)
    for (int64_t r = 0; r < M; ++r) std::memcpy(C + r * ldc, bias, static_cast<size_t>(N) * sizeof(float));
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans, static_cast<int>(M),
              static_cast<int>(N), static_cast<int>(K), 1.0f, A, static_cast<int>(lda), B, static_cast<int>(ldb),
              accumulate || bias ? 1.0f : 0.0f, C, static_cast<int>(ldc));
}

#if MIRRORLAB_HAVE_DNNL

using onednn::engine;
using dt = dnnl::memory::data_type;
using dims = dnnl::memory::dims;

struct Key {
  bool transA, transB, accumulate, bias;
  int64_t M, N, K, lda, ldb, ldc;
  bool operator==(const Key&) const = default;
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = (k.transA ? 1u : 0u) | (k.transB ? 2u : 0u) | (k.accumulate ? 4u : 0u) | (k.bias ? 8u : 0u);
    for (int64_t v : {k.M, k.N, k.K, k.lda, k.ldb, k.ldc}) h = h * 1000003u ^ static_cast<size_t>(v);
    return h;
  }
};

// A blocked kernel ("brg:avx512_core", "brg:avx512_core_amx"): the one that beats OpenBLAS' AVX2
// kernels. Not the reference loops, and not "gemm:jit", oneDNN's own sgemm, no faster than OpenBLAS'.
bool blocked(const std::string& impl) { return impl.rfind("brg", 0) == 0; }

struct Plan {
  bool oneDnn = false;
  dnnl::memory::desc a, b, c, bias;
  dnnl::matmul prim;
};

dnnl::matmul::primitive_desc describe(const Key& k, Plan& p) {
  // Row-major operands given by strides: op(A) is M x K, stored (M, lda) or transposed (K, lda).
  p.a = dnnl::memory::desc(dims{k.M, k.K}, dt::f32, k.transA ? dims{1, k.lda} : dims{k.lda, 1});
  p.b = dnnl::memory::desc(dims{k.K, k.N}, dt::f32, k.transB ? dims{1, k.ldb} : dims{k.ldb, 1});
  p.c = dnnl::memory::desc(dims{k.M, k.N}, dt::f32, dims{k.ldc, 1});
  if (k.bias) p.bias = dnnl::memory::desc(dims{1, k.N}, dt::f32, dims{k.N, 1});
  const auto desc = k.bias ? dnnl::matmul::desc(p.a, p.b, p.bias, p.c) : dnnl::matmul::desc(p.a, p.b, p.c);
  dnnl::primitive_attr attr;
  if (k.accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  return dnnl::matmul::primitive_desc(desc, attr, engine());
}

Plan makePlan(const Key& k) {
  Plan p;
  try {
    const auto pd = describe(k, p);
    if (!blocked(pd.impl_info_str())) return p;
    p.prim = dnnl::matmul(pd);
    p.oneDnn = true;
  } catch (const dnnl::error&) {
    p.oneDnn = false;  // no implementation for this shape: OpenBLAS
  }
  return p;
}

const Plan& planFor(const Key& k) {
  onednn::oneOpenMpThread();
  thread_local std::unordered_map<Key, Plan, KeyHash> plans;
  auto it = plans.find(k);
  if (it == plans.end()) it = plans.emplace(k, makePlan(k)).first;
  return it->second;
}

void run(const Plan& p, const float* A, const float* B, float* C, const float* bias) {
  onednn::executeMatmul(p.prim, p.a, A, p.b, B, p.c, C, p.bias, bias);
}

struct Probe {
  Kernel kernel = Kernel::OpenBlas;
  bool oneDnnBlocked = false;  // oneDNN has its blocked kernel here (forceable even where not preferred)
  std::string description, oneDnnDescription;
};

// OpenBLAS' kernels for this CPU: its own choice, or the one OPENBLAS_CORETYPE pins.
std::string openBlasCore() {
  const char* name = openblas_get_corename();
  return name ? name : "unknown";
}

// OpenBLAS runs AVX-512 kernels (its own choice on an AVX-512 CPU). On an AMD EPYC (Zen 5, its
// Cooperlake kernels) they measured as fast as oneDNN's blocked matmul on the wide MLP's products
// (0.86x-1.1x per product) and faster end to end, where oneDNN's per-call cost counts. On an Intel
// Xeon (its SkylakeX kernels) oneDNN was faster on every product of the wide MLP at batch 128 and
// 256 (3-20%, bench_kernels' BM_GemmKernel) and end to end (cpu:2 0.915 -> 0.827 s/epoch, cpu:1 x 2
// threads 0.863 -> 0.793, cpu:1 x 1 1.618 -> 1.487; interleaved rounds). So: OpenBLAS where it runs
// AVX-512 kernels on an AMD CPU, oneDNN elsewhere. Its AVX2 (Haswell) kernels measured half as fast.
// The choice depends on the machine alone (no timing at start), so a run's bits do not change
// from one start to the next.
bool openBlasHasAvx512Kernels(const std::string& core) {
  for (const char* k : {"SkylakeX", "Cooperlake", "SapphireRapids"})
    if (core == k) return true;
  return false;
}

bool amdCpu() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_is("amd");
#else
  return false;
#endif
}

// The wide MLP's second layer at batch 256: the implementation oneDNN picks for it; oneDNN is
// preferred where it is blocked, unless OpenBLAS runs AVX-512 kernels on an AMD CPU.
Probe probe() {
  Probe r;
  const std::string lib = "oneDNN " + onednn::version(), core = openBlasCore();
  try {
    onednn::oneOpenMpThread();
    Plan p;
    const std::string impl = describe(Key{false, false, false, true, 256, 512, 512, 512, 512, 512}, p).impl_info_str();
    r.oneDnnBlocked = blocked(impl);
    r.oneDnnDescription = lib + " " + impl;
    if (!r.oneDnnBlocked)
      r.description = "OpenBLAS sgemm: " + lib + " has no blocked float32 matmul on this CPU (it offers " + impl + ")";
  } catch (const dnnl::error& e) {
    r.description = "OpenBLAS sgemm: " + lib + " could not create a float32 matmul (" + e.what() + ")";
  }
  if (!r.oneDnnBlocked) return r;
  if (openBlasHasAvx512Kernels(core) && amdCpu()) {
    r.description = "OpenBLAS sgemm (its " + core + " kernels, as fast as " + lib + "'s matmul on AMD CPUs)";
  } else {
    r.kernel = Kernel::OneDnn;
    std::string why = " (OpenBLAS runs its " + core + " kernels here)";
    if (openBlasHasAvx512Kernels(core)) why = " (faster than OpenBLAS' " + core + " kernels on Intel CPUs; this is not AMD's)";
    r.description = r.oneDnnDescription + why;
  }
  return r;
}

#else

struct Probe {
  Kernel kernel = Kernel::OpenBlas;
  bool oneDnnBlocked = false;
  std::string description = "OpenBLAS sgemm: this Mirrorlab was built without oneDNN (libdnnl-dev)", oneDnnDescription;
};
Probe probe() { return {}; }

#endif

const Probe& probed() {
  static const Probe p = probe();
  return p;
}

}  // namespace

Kernel kernel() {
  switch (gForced.load(std::memory_order_relaxed)) {
    case Forced::OpenBlas: return Kernel::OpenBlas;
    case Forced::OneDnn: return probed().oneDnnBlocked ? Kernel::OneDnn : Kernel::OpenBlas;
    case Forced::No: break;
  }
  return probed().kernel;
}

std::string kernelDescription() {
  const Forced f = gForced.load(std::memory_order_relaxed);
  if (f == Forced::OpenBlas && probed().kernel == Kernel::OneDnn) return "OpenBLAS sgemm: forced";
  if (f == Forced::OneDnn && probed().oneDnnBlocked && probed().kernel != Kernel::OneDnn)
    return probed().oneDnnDescription + ": forced";
  return probed().description;
}

bool oneDnnAvailable() { return probed().oneDnnBlocked; }

void force(std::optional<Kernel> k) {
  gForced.store(!k ? Forced::No : *k == Kernel::OneDnn ? Forced::OneDnn : Forced::OpenBlas, std::memory_order_relaxed);
}

Kernel kernelFor(bool transA, bool transB, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc,
                 bool accumulate, bool bias) {
  if (kernel() != Kernel::OneDnn || M == 0 || N == 0 || K == 0) return Kernel::OpenBlas;
#if MIRRORLAB_HAVE_DNNL
  return planFor(Key{transA, transB, accumulate, bias, M, N, K, lda, ldb, ldc}).oneDnn ? Kernel::OneDnn : Kernel::OpenBlas;
#else
  (void)transA, (void)transB, (void)lda, (void)ldb, (void)ldc, (void)accumulate, (void)bias;
  return Kernel::OpenBlas;
#endif
}

void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
          float* C, int64_t ldc, bool accumulate, const float* bias) {
  if (bias && accumulate) throw std::logic_error("sgemm::gemm: bias and accumulate together");
  if (M == 0 || N == 0) return;
#if MIRRORLAB_HAVE_DNNL
  if (kernel() == Kernel::OneDnn && K > 0) {
    const Plan& p = planFor(Key{transA, transB, accumulate, bias != nullptr, M, N, K, lda, ldb, ldc});
    if (p.oneDnn) return run(p, A, B, C, bias);
  }
#endif
  openBlasGemm(transA, transB, M, N, K, A, lda, B, ldb, C, ldc, accumulate, bias);
}

}  // namespace ml::sgemm
