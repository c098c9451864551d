// Fused optimizer updates (one pass over parameters, gradients and slots; Keras formulas as in
// core/nn/Optimizer.cpp) and the device-memory all-reduce of logical GPUs.
#include <cuda_bf16.h>

#include "backend/cuda/Kernels.h"

namespace mlcuda::kernels {

namespace {

__device__ __forceinline__ int64_t firstIndex() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t gridStride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

__global__ void sgdKernel(float* p, const float* g, int64_t count, float scale, float lr) {
  for (int64_t i = firstIndex(); i < count; i += gridStride()) p[i] -= lr * (g[i] * scale);
}

__global__ void sgdMomentumKernel(float* p, const float* g, float* v, int64_t count, float scale, float lr, float m,
                                  bool nesterov) {
  for (int64_t i = firstIndex(); i < count; i += gridStride()) {
    const float gi = g[i] * scale;
    const float vi = m * v[i] - lr * gi;
    v[i] = vi;
    if (nesterov)
      p[i] += m * vi - lr * gi;
    else
      p[i] += vi;
  }
}

__global__ void adamKernel(float* p, const float* g, float* m, float* v, int64_t count, float scale, float alpha, float b1,
                           float b2, float c1, float c2, float eps) {
  for (int64_t i = firstIndex(); i < count; i += gridStride()) {
    const float gi = g[i] * scale;
    const float mi = b1 * m[i] + c1 * gi;
    const float vi = b2 * v[i] + c2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] -= alpha * mi / (sqrtf(vi) + eps);
  }
}

__global__ void rmspropKernel(float* p, const float* g, float* v, float* mom, int64_t count, float scale, float lr, float rho,
                              float c, float momentum, float eps) {
  for (int64_t i = firstIndex(); i < count; i += gridStride()) {
    const float gi = g[i] * scale;
    const float vi = rho * v[i] + c * gi * gi;
    v[i] = vi;
    if (mom) {
      const float mi = momentum * mom[i] + lr * gi / sqrtf(vi + eps);  // Keras: epsilon inside the root
      mom[i] = mi;
      p[i] -= mi;
    } else {
      p[i] -= lr * gi / sqrtf(vi + eps);
    }
  }
}

// One atomic per block at most: each thread counts its elements, the block sums in shared memory.
__global__ void countNonfiniteKernel(const float* x, int64_t count, unsigned long long* counter) {
  __shared__ unsigned long long blockCount[kThreads];
  unsigned long long mine = 0;
  for (int64_t i = firstIndex(); i < count; i += gridStride()) mine += isfinite(x[i]) ? 0ull : 1ull;
  blockCount[threadIdx.x] = mine;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) blockCount[threadIdx.x] += blockCount[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0 && blockCount[0] != 0) atomicAdd(counter, blockCount[0]);
}

struct BufferList {
  float* p[kMaxLocalBuffers];
};

// Each element's sum is computed once, left to right, and written to every buffer: all replicas
// receive identical bits.
__global__ void localAllReduceKernel(BufferList b, int count, int64_t elements) {
  for (int64_t i = firstIndex(); i < elements; i += gridStride()) {
    float s = b.p[0][i];
    for (int r = 1; r < count; ++r) s += b.p[r][i];
    for (int r = 0; r < count; ++r) b.p[r][i] = s;
  }
}

__device__ __forceinline__ float toBf16(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

// bfloat16 on the wire: every value rounded before it joins, the running sum after each addition.
__global__ void localAllReduceBf16Kernel(BufferList b, int count, int64_t elements) {
  for (int64_t i = firstIndex(); i < elements; i += gridStride()) {
    float s = toBf16(b.p[0][i]);
    for (int r = 1; r < count; ++r) s = toBf16(__fadd_rn(s, toBf16(b.p[r][i])));
    for (int r = 0; r < count; ++r) b.p[r][i] = s;
  }
}

__global__ void unpackBf16Kernel(const __nv_bfloat16* src, float* dst, int64_t count) {
  for (int64_t i = firstIndex(); i < count; i += gridStride()) dst[i] = __bfloat162float(src[i]);
}

}  // namespace

void sgd(cudaStream_t s, float* p, const float* g, float* v, int64_t count, float scale, float lr, float momentum,
         bool nesterov) {
  if (momentum == 0.0f)
    sgdKernel<<<gridFor(count), kThreads, 0, s>>>(p, g, count, scale, lr);
  else
    sgdMomentumKernel<<<gridFor(count), kThreads, 0, s>>>(p, g, v, count, scale, lr, momentum, nesterov);
}

void adam(cudaStream_t s, float* p, const float* g, float* m, float* v, int64_t count, float scale, float alpha, float b1,
          float b2, float c1, float c2, float eps) {
  adamKernel<<<gridFor(count), kThreads, 0, s>>>(p, g, m, v, count, scale, alpha, b1, b2, c1, c2, eps);
}

void rmsprop(cudaStream_t s, float* p, const float* g, float* v, float* mom, int64_t count, float scale, float lr, float rho,
             float c, float momentum, float eps) {
  rmspropKernel<<<gridFor(count), kThreads, 0, s>>>(p, g, v, momentum == 0.0f ? nullptr : mom, count, scale, lr, rho, c, momentum,
                                                    eps);
}

void countNonfinite(cudaStream_t s, const float* x, int64_t count, unsigned long long* counter) {
  countNonfiniteKernel<<<gridFor(count), kThreads, 0, s>>>(x, count, counter);
}

void localAllReduce(cudaStream_t s, float* const* buffers, int count, int64_t elements, bool bf16) {
  BufferList b{};
  for (int r = 0; r < count && r < kMaxLocalBuffers; ++r) b.p[r] = buffers[r];
  if (bf16)
    localAllReduceBf16Kernel<<<gridFor(elements), kThreads, 0, s>>>(b, count, elements);
  else
    localAllReduceKernel<<<gridFor(elements), kThreads, 0, s>>>(b, count, elements);
}

void unpackBf16(cudaStream_t s, const void* src, float* dst, int64_t count) {
  unpackBf16Kernel<<<gridFor(count), kThreads, 0, s>>>(static_cast<const __nv_bfloat16*>(src), dst, count);
}

}  // namespace mlcuda::kernels
