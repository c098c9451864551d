// Softmax over the rows of an (n, k) matrix, forward and backward, as ml::activationForward and
// ml::activationBackward compute it (core/nn/Activations.cpp): the row maximum subtracted before
// expf, y = e * (1 / sum e); dx = y * (dy - sum(dy * y)). One warp per row up to 1024 columns, one
// block per row above. Every reduction has an order fixed by k (a strided share per thread, then a
// butterfly across the warp, then the warps in order): the same bits on every run, and every thread
// of a row ends with the same value. Each element is read and written by the same thread, after the
// row's reductions, so y may be x and dx may be dy.
#include <cmath>

#include "backend/cuda/Kernels.h"

namespace mlcuda::kernels {

namespace {

constexpr int kWarp = 32;
constexpr int kRowsPerBlock = kThreads / kWarp;  // warp-per-row kernels: 8 rows per block
constexpr int64_t kWarpRowMaxColumns = 1024;

// The xor butterfly: lanes i and i^m add the same two values (a + b == b + a exactly), so every
// lane ends with the same bits.
__device__ __forceinline__ float warpMax(float v) {
  for (int m = kWarp / 2; m > 0; m >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, m));
  return v;
}
__device__ __forceinline__ float warpSum(float v) {
  for (int m = kWarp / 2; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

// Block-wide (kThreads) versions: each warp's value, then the warps in order by every thread.
// `part` holds kThreads / 32 floats; the trailing barrier lets the next reduction reuse it.
__device__ __forceinline__ float blockMax(float v, float* part) {
  v = warpMax(v);
  if (threadIdx.x % kWarp == 0) part[threadIdx.x / kWarp] = v;
  __syncthreads();
  float r = part[0];
  for (int w = 1; w < kThreads / kWarp; ++w) r = fmaxf(r, part[w]);
  __syncthreads();
  return r;
}
__device__ __forceinline__ float blockSum(float v, float* part) {
  v = warpSum(v);
  if (threadIdx.x % kWarp == 0) part[threadIdx.x / kWarp] = v;
  __syncthreads();
  float r = part[0];
  for (int w = 1; w < kThreads / kWarp; ++w) r += part[w];
  __syncthreads();
  return r;
}

// One warp per row; rows grid-strided (uniform per warp, so the full-mask shuffles are legal).
__global__ void softmaxForwardWarpKernel(const float* x, float* y, int64_t n, int64_t k) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  for (int64_t r = warp; r < n; r += static_cast<int64_t>(gridDim.x) * kRowsPerBlock) {
    const float* xr = x + r * k;
    float* yr = y + r * k;
    float m = -INFINITY;
    for (int64_t j = lane; j < k; j += kWarp) m = fmaxf(m, xr[j]);
    m = warpMax(m);
    float s = 0.0f;
    for (int64_t j = lane; j < k; j += kWarp) s += expf(xr[j] - m);
    const float inv = 1.0f / warpSum(s);
    for (int64_t j = lane; j < k; j += kWarp) yr[j] = expf(xr[j] - m) * inv;
  }
}

__global__ void softmaxBackwardWarpKernel(const float* y, const float* dy, float* dx, int64_t n, int64_t k) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  for (int64_t r = warp; r < n; r += static_cast<int64_t>(gridDim.x) * kRowsPerBlock) {
    const float* yr = y + r * k;
    const float* dyr = dy + r * k;
    float* dxr = dx + r * k;
    float dot = 0.0f;
    for (int64_t j = lane; j < k; j += kWarp) dot += dyr[j] * yr[j];
    dot = warpSum(dot);
    for (int64_t j = lane; j < k; j += kWarp) dxr[j] = yr[j] * (dyr[j] - dot);
  }
}

// One block of kThreads per row, for rows longer than kWarpRowMaxColumns.
__global__ void softmaxForwardBlockKernel(const float* x, float* y, int64_t n, int64_t k) {
  __shared__ float part[kThreads / kWarp];
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    const float* xr = x + r * k;
    float* yr = y + r * k;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < k; j += kThreads) m = fmaxf(m, xr[j]);
    m = blockMax(m, part);
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < k; j += kThreads) s += expf(xr[j] - m);
    const float inv = 1.0f / blockSum(s, part);
    for (int64_t j = threadIdx.x; j < k; j += kThreads) yr[j] = expf(xr[j] - m) * inv;
  }
}

__global__ void softmaxBackwardBlockKernel(const float* y, const float* dy, float* dx, int64_t n, int64_t k) {
  __shared__ float part[kThreads / kWarp];
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    const float* yr = y + r * k;
    const float* dyr = dy + r * k;
    float* dxr = dx + r * k;
    float dot = 0.0f;
    for (int64_t j = threadIdx.x; j < k; j += kThreads) dot += dyr[j] * yr[j];
    dot = blockSum(dot, part);
    for (int64_t j = threadIdx.x; j < k; j += kThreads) dxr[j] = yr[j] * (dyr[j] - dot);
  }
}

unsigned blocksFor(int64_t rows) { return static_cast<unsigned>(rows < 1 ? 1 : (rows > 65536 ? 65536 : rows)); }

}  // namespace

void softmaxForward(cudaStream_t s, const float* x, float* y, int64_t n, int64_t k) {
  if (n <= 0 || k <= 0) return;
  if (k <= kWarpRowMaxColumns)
    softmaxForwardWarpKernel<<<blocksFor((n + kRowsPerBlock - 1) / kRowsPerBlock), kThreads, 0, s>>>(x, y, n, k);
  else
    softmaxForwardBlockKernel<<<blocksFor(n), kThreads, 0, s>>>(x, y, n, k);
}

void softmaxBackward(cudaStream_t s, const float* y, const float* dy, float* dx, int64_t n, int64_t k) {
  if (n <= 0 || k <= 0) return;
  if (k <= kWarpRowMaxColumns)
    softmaxBackwardWarpKernel<<<blocksFor((n + kRowsPerBlock - 1) / kRowsPerBlock), kThreads, 0, s>>>(y, dy, dx, n, k);
  else
    softmaxBackwardBlockKernel<<<blocksFor(n), kThreads, 0, s>>>(y, dy, dx, n, k);
}

}  // namespace mlcuda::kernels
