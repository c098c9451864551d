// float32 matrix products for Dense: C = op(A) op(B) [+ C] [+ bias], row-major, on the calling
// thread alone (a replica's ThreadTeam splits the work; nothing here starts threads).
//
// Two kernels, chosen per product shape:
//  - oneDNN's matmul (Debian's libdnnl, the CPU library of PyTorch and TensorFlow) where it has a
//    blocked kernel for the shape ("brg:avx512_core" on AVX-512 CPUs), which measured 1.8-2.0x
//    OpenBLAS' sgemm on one thread for every product of the 784-512-512-10 MLP (bench_kernels,
//    BM_GemmKernel: the README's table);
//  - OpenBLAS' cblas_sgemm everywhere else: where oneDNN was not built in, where it offers only
//    its reference or generic gemm kernel (AVX2 CPUs with oneDNN 2.6), and when forced.
// Both sum in float32; the order of the sums differs between them (results agree to rounding).
// Each kernel gives the same bits for the same call every time, so a run is reproducible and two
// threads computing the same product get the same result.
#pragma once
#include <cstdint>
#include <string>

namespace ml::sgemm {

enum class Kernel { OneDnn, OpenBlas };

// The kernel this process uses where oneDNN can (decided once, from the implementation oneDNN
// picks for a 256 x 512 x 512 product), unless forced.
Kernel kernel();
// One line for users: "oneDNN 2.6.3 brg:avx512_core" or "OpenBLAS sgemm: <why not oneDNN>".
std::string kernelDescription();
// Tests and benchmarks: OpenBLAS for every product (false: back to kernel()).
void forceOpenBlas(bool on);

// C (M x N, row stride ldc) = op(A) (M x K) * op(B) (K x N), plus C itself when accumulate, plus
// bias (N values, one per column) when given; op(A) = A (row stride lda) or, with transA, A^T
// where A is K x M. bias and accumulate do not go together.
void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
          float* C, int64_t ldc, bool accumulate = false, const float* bias = nullptr);

// The kernel a product of this shape runs on this thread (the first call for a shape decides).
Kernel kernelFor(bool transA, bool transB, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc,
                 bool accumulate = false, bool bias = false);

}  // namespace ml::sgemm
