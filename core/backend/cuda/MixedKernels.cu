// Mixed precision's element-wise kernels: rounding float32 values to bfloat16 or float16 (round to
// nearest even, as __float2bfloat16_rn and __float2half_rn do, float16 with its subnormals and inf
// from 65520: nn/Precision.cpp's rules), packing them for cublasGemmEx, adding a rounded gradient to
// a float32 one, and the loss gradient's scale.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/cuda/CudaPluginApi.h"
#include "backend/cuda/Kernels.h"

namespace mlcuda::kernels {

namespace {

__device__ __forceinline__ int64_t firstIndex() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t gridStride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

__device__ __forceinline__ float roundLow(int precision, float v) {
  if (precision == MLCUDA_PRECISION_BFLOAT16) return __bfloat162float(__float2bfloat16_rn(v));
  if (precision == MLCUDA_PRECISION_FLOAT16) return __half2float(__float2half_rn(v));
  return v;
}

__global__ void roundKernel(int precision, const float* src, float* dst, const float* b, int64_t count, int64_t k) {
  for (int64_t i = firstIndex(); i < count; i += gridStride())
    dst[i] = roundLow(precision, b ? __fadd_rn(src[i], b[i % k]) : src[i]);
}

__global__ void packBf16Kernel(const float* src, __nv_bfloat16* dst, int64_t count) {
  for (int64_t i = firstIndex(); i < count; i += gridStride()) dst[i] = __float2bfloat16_rn(src[i]);
}

__global__ void packHalfKernel(const float* src, __half* dst, int64_t count) {
  for (int64_t i = firstIndex(); i < count; i += gridStride()) dst[i] = __float2half_rn(src[i]);
}

__global__ void addRoundedKernel(int precision, const float* src, float* dst, int64_t count) {
  for (int64_t i = firstIndex(); i < count; i += gridStride()) dst[i] = __fadd_rn(dst[i], roundLow(precision, src[i]));
}

__global__ void scaleKernel(float* x, int64_t count, float factor) {
  for (int64_t i = firstIndex(); i < count; i += gridStride()) x[i] = __fmul_rn(x[i], factor);
}

}  // namespace

void roundTo(cudaStream_t s, int precision, const float* src, float* dst, int64_t count, const float* b, int64_t k) {
  roundKernel<<<gridFor(count), kThreads, 0, s>>>(precision, src, dst, b, count, k);
}

void packLow(cudaStream_t s, int precision, const float* src, void* dst, int64_t count) {
  if (precision == MLCUDA_PRECISION_BFLOAT16)
    packBf16Kernel<<<gridFor(count), kThreads, 0, s>>>(src, static_cast<__nv_bfloat16*>(dst), count);
  else
    packHalfKernel<<<gridFor(count), kThreads, 0, s>>>(src, static_cast<__half*>(dst), count);
}

void addRounded(cudaStream_t s, int precision, const float* src, float* dst, int64_t count) {
  addRoundedKernel<<<gridFor(count), kThreads, 0, s>>>(precision, src, dst, count);
}

void scale(cudaStream_t s, float* x, int64_t count, float factor) {
  scaleKernel<<<gridFor(count), kThreads, 0, s>>>(x, count, factor);
}

}  // namespace mlcuda::kernels
