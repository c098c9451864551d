// bfloat16 matrix products for the mixed_bfloat16 policy: C (float32) = op(A) op(B) [+ bias], with A
// and B in bfloat16 and the sums in float32, as a GPU's tensor cores and oneDNN compute them.
//
// Two kernels give the same numbers up to the order of the float32 sums:
//  - oneDNN's matmul (Debian's libdnnl), used when it was built in and creates a native bfloat16
//    primitive on this CPU (AVX512-BF16 or AMX: "brg:avx512_core_bf16", ...);
//  - emulated: the bfloat16 values widened to float32 and multiplied by OpenBLAS' sgemm. Every
//    product of two bfloat16 values is exact in float32, so only the order of the sums differs.
// A CPU without bfloat16 instructions runs the emulated kernel (oneDNN 2.6 refuses bfloat16 matmul
// there, or would run a reference kernel many times slower than sgemm: neither is used).
//
// oneDNN runs on the calling thread alone (no OpenMP team): a replica is one thread, and the
// mirrored strategy already gives every core a replica.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace ml::bf16 {

enum class Kernel { OneDnn, Emulated };

// The kernel products use in this process (decided once: a oneDNN primitive is created and its
// implementation checked), unless forced.
Kernel kernel();
// One line for users: "oneDNN 2.6 brg:avx512_core_bf16" or "emulated (float32 sgemm): <why>".
std::string kernelDescription();
// Tests and benchmarks: run the emulated kernel even where oneDNN could (false: back to kernel()).
void forceEmulated(bool on);

// float32 -> bfloat16 bits, round to nearest even, NaN kept NaN (roundToBfloat16's value, stored
// in 16 bits); and back (exact).
void pack(const float* in, uint16_t* out, size_t n);
void unpack(const uint16_t* in, float* out, size_t n);
// roundToBfloat16 over an array, in place; and acc[i] += roundToBfloat16(in[i]). The same values as
// the scalar function, in loops the compiler vectorizes.
void roundInPlace(float* values, size_t n);
void addRounded(const float* in, float* acc, size_t n);
// acc[i] += the bfloat16 value in[i] (exact).
void addUnpacked(const uint16_t* in, float* acc, size_t n);

// C (M x N, row stride ldc) = op(A) (M x K) * op(B) (K x N) [+ bias (N), per column], row-major
// operands: op(A) = A (row stride lda) or, with transA, A^T where A is K x M. C is overwritten.
void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda, const uint16_t* B,
          int64_t ldb, float* C, int64_t ldc, const float* bias = nullptr);
// The same product rounded to bfloat16 (to nearest even) as it is written: half the bytes of C.
void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda, const uint16_t* B,
          int64_t ldb, uint16_t* C, int64_t ldc);

}  // namespace ml::bf16
