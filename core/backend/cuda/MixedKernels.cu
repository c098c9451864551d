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

template <typename T>
__device__ __forceinline__ T packOne(float v);
template <>
__device__ __forceinline__ __nv_bfloat16 packOne<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half packOne<__half>(float v) {
  return __float2half_rn(v);
}

// cols (n*oh*ow, kh*kw*c) = the windows of x (n, h, w, c), zeros where a window leaves the image:
// nn/Conv2D.cpp's im2col, each value packed to the low format.
template <typename T>
__global__ void im2colKernel(const float* x, mlcuda_conv_geometry g, int64_t n, T* cols) {
  const int64_t P = g.kh * g.kw * g.c, total = n * g.oh * g.ow * P;
  for (int64_t i = firstIndex(); i < total; i += gridStride()) {
    const int64_t row = i / P, p = i % P;
    const int64_t ci = p % g.c, kx = (p / g.c) % g.kw, ky = p / (g.c * g.kw);
    const int64_t ox = row % g.ow, oy = (row / g.ow) % g.oh, img = row / (g.ow * g.oh);
    const int64_t iy = oy * g.sh - g.pad_top + ky, ix = ox * g.sw - g.pad_left + kx;
    const bool inside = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w;
    cols[i] = packOne<T>(inside ? x[((img * g.h + iy) * g.w + ix) * g.c + ci] : 0.0f);
  }
}

// dx (n, h, w, c) = the column gradients added at the positions they came from, each element
// gathering its windows in the order nn/Conv2D.cpp's col2imAdd adds them (outputs in row-major
// order: the kernel's rows and columns from the last), so no atomics and the CPU's sums.
__global__ void col2imKernel(const float* dcols, mlcuda_conv_geometry g, int64_t n, float* dx) {
  const int64_t P = g.kh * g.kw * g.c, total = n * g.h * g.w * g.c;
  for (int64_t i = firstIndex(); i < total; i += gridStride()) {
    const int64_t ci = i % g.c, ix = (i / g.c) % g.w, iy = (i / (g.c * g.w)) % g.h, img = i / (g.c * g.w * g.h);
    float sum = 0.0f;
    for (int64_t ky = g.kh - 1; ky >= 0; --ky) {
      const int64_t ty = iy + g.pad_top - ky;
      if (ty < 0 || ty % g.sh != 0 || ty / g.sh >= g.oh) continue;
      for (int64_t kx = g.kw - 1; kx >= 0; --kx) {
        const int64_t tx = ix + g.pad_left - kx;
        if (tx < 0 || tx % g.sw != 0 || tx / g.sw >= g.ow) continue;
        const int64_t row = (img * g.oh + ty / g.sh) * g.ow + tx / g.sw;
        sum = __fadd_rn(sum, dcols[row * P + (ky * g.kw + kx) * g.c + ci]);
      }
    }
    dx[i] = sum;
  }
}

}  // namespace

void im2colLow(cudaStream_t s, int precision, const float* x, const mlcuda_conv_geometry& g, int64_t n, void* cols) {
  const int64_t total = n * g.oh * g.ow * g.kh * g.kw * g.c;
  if (precision == MLCUDA_PRECISION_BFLOAT16)
    im2colKernel<<<gridFor(total), kThreads, 0, s>>>(x, g, n, static_cast<__nv_bfloat16*>(cols));
  else
    im2colKernel<<<gridFor(total), kThreads, 0, s>>>(x, g, n, static_cast<__half*>(cols));
}

void col2im(cudaStream_t s, const float* dcols, const mlcuda_conv_geometry& g, int64_t n, float* dx) {
  col2imKernel<<<gridFor(n * g.h * g.w * g.c), kThreads, 0, s>>>(dcols, g, n, dx);
}

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
