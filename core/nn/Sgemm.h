// float32 matrix products for Dense: C = op(A) op(B) [+ C] [+ bias], row-major, on the calling
// thread alone (a replica's ThreadTeam splits the work; nothing here starts threads).
//
// Two kernels:
//  - oneDNN's matmul (Debian's libdnnl, the CPU library of PyTorch and TensorFlow) where it has a
//    blocked kernel for the shape ("brg:avx512_core" on AVX-512 CPUs), unless OpenBLAS runs its
//    own AVX-512 kernels on an AMD CPU. Against OpenBLAS pinned to its AVX2 kernels
//    (OPENBLAS_CORETYPE=Haswell, as on some machines here) oneDNN measured 1.8-2.0x per product of
//    the 784-512-512-10 MLP on one thread; against OpenBLAS' own SkylakeX kernels on an Intel Xeon,
//    1.03-1.2x per product and 1.08-1.1x end to end (bench_kernels' BM_GemmKernel: the README's tables);
//  - OpenBLAS' cblas_sgemm everywhere else: where it runs its own AVX-512 kernels on an AMD CPU
//    (a Zen 5 EPYC: as fast as oneDNN per product and faster end to end); where oneDNN was not
//    built in or offers only its reference or generic gemm kernel (AVX2 CPUs with oneDNN 2.6, a
//    block of columns of a wider matrix); and when forced.
// Both sum in float32; the order of the sums differs between them (results agree to rounding).
// Each kernel gives the same bits for the same call every time, so a run is reproducible and two
// threads computing the same product get the same result.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace ml::sgemm {

enum class Kernel { OneDnn, OpenBlas };

// The kernel this process uses where oneDNN can (decided once, from OpenBLAS' kernels and the
// implementation oneDNN picks for a 256 x 512 x 512 product), unless forced.
Kernel kernel();
// One line for users: "oneDNN 2.6.3 brg:avx512_core (OpenBLAS runs its Haswell kernels here)" or
// "OpenBLAS sgemm (...)" / "OpenBLAS sgemm: <why not oneDNN>".
std::string kernelDescription();
// Whether oneDNN has its blocked float32 matmul on this CPU (whether or not it is preferred).
bool oneDnnAvailable();
// Tests and benchmarks: one kernel for every product it can run (oneDNN only where available);
// nullopt: back to the preferred one.
void force(std::optional<Kernel> kernel);

// C (M x N, row stride ldc) = op(A) (M x K) * op(B) (K x N), plus C itself when accumulate, plus
// bias (N values, one per column) when given; op(A) = A (row stride lda) or, with transA, A^T
// where A is K x M. bias and accumulate do not go together.
void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
          float* C, int64_t ldc, bool accumulate = false, const float* bias = nullptr);

// The kernel a product of this shape runs on this thread (the first call for a shape decides).
Kernel kernelFor(bool transA, bool transB, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc,
                 bool accumulate = false, bool bias = false);

}  // namespace ml::sgemm
