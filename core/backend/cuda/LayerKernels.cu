// Element-wise layer kernels: bias + activation after the Dense GEMM, activation gradients from the
// output, the bias gradient, and dropout with the CPU's counter-based mask.
#include "backend/cuda/CudaPluginApi.h"
#include "backend/cuda/DeviceRng.h"
#include "backend/cuda/Kernels.h"

namespace mlcuda::kernels {

namespace {

__device__ __forceinline__ int64_t firstIndex() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t gridStride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// ml::activationForward, element-wise forms.
__device__ __forceinline__ float activate(float v, int act) {
  switch (act) {
    case MLCUDA_ACT_RELU: return v > 0.0f ? v : 0.0f;
    case MLCUDA_ACT_SIGMOID: return 1.0f / (1.0f + expf(-v));
    case MLCUDA_ACT_TANH: return tanhf(v);
    default: return v;
  }
}

__global__ void biasActivationKernel(const float* src, float* dst, const float* b, int64_t total, int64_t k, int act) {
  for (int64_t i = firstIndex(); i < total; i += gridStride()) {
    float v = src[i];
    if (b) v += b[i % k];
    dst[i] = activate(v, act);
  }
}

// ml::activationBackward, element-wise forms, from the output y.
__global__ void activationBackwardKernel(int act, const float* y, const float* dy, float* dz, int64_t count) {
  for (int64_t i = firstIndex(); i < count; i += gridStride()) {
    const float yi = y[i], g = dy[i];
    switch (act) {
      case MLCUDA_ACT_RELU: dz[i] = yi > 0.0f ? g : 0.0f; break;
      case MLCUDA_ACT_SIGMOID: dz[i] = g * yi * (1.0f - yi); break;
      case MLCUDA_ACT_TANH: dz[i] = g * (1.0f - yi * yi); break;
      default: dz[i] = g; break;
    }
  }
}

// One thread per column adds the rows in order, like Dense::backward's loop: deterministic, and
// the same additions as the CPU. Adjacent threads read adjacent columns (coalesced).
__global__ void biasGradientKernel(const float* dz, float* db, int64_t n, int64_t k) {
  for (int64_t j = firstIndex(); j < k; j += gridStride()) {
    float acc = db[j];
    for (int64_t r = 0; r < n; ++r) acc += dz[r * k + j];
    db[j] = acc;
  }
}

__global__ void dropoutForwardKernel(const float* x, float* y, uint8_t* mask, int64_t n, int64_t k, uint64_t key, uint64_t step,
                                     const int64_t* sampleIds, uint32_t threshold, float scale) {
  const int64_t total = n * k;
  for (int64_t i = firstIndex(); i < total; i += gridStride()) {
    const int64_t r = i / k, j = i - r * k;
    const uint64_t id = sampleIds ? static_cast<uint64_t>(sampleIds[r]) : static_cast<uint64_t>(r);
    const bool keep = dropoutKeep(hashKeys(key, step, id), j, threshold);
    mask[i] = keep ? 1 : 0;
    y[i] = keep ? x[i] * scale : 0.0f;
  }
}

__global__ void dropoutBackwardKernel(const float* dy, float* dx, const uint8_t* mask, int64_t count, float scale) {
  for (int64_t i = firstIndex(); i < count; i += gridStride()) dx[i] = mask[i] ? dy[i] * scale : 0.0f;
}

}  // namespace

void biasActivation(cudaStream_t s, const float* src, float* dst, const float* b, int64_t n, int64_t k, int act) {
  biasActivationKernel<<<gridFor(n * k), kThreads, 0, s>>>(src, dst, b, n * k, k, act);
}

void activationBackward(cudaStream_t s, int act, const float* y, const float* dy, float* dz, int64_t count) {
  activationBackwardKernel<<<gridFor(count), kThreads, 0, s>>>(act, y, dy, dz, count);
}

void biasGradient(cudaStream_t s, const float* dz, float* db, int64_t n, int64_t k) {
  biasGradientKernel<<<gridFor(k), kThreads, 0, s>>>(dz, db, n, k);
}

void dropoutForward(cudaStream_t s, const float* x, float* y, uint8_t* mask, int64_t n, int64_t k, uint64_t key, uint64_t step,
                    const int64_t* sampleIds, uint32_t threshold, float scale) {
  dropoutForwardKernel<<<gridFor(n * k), kThreads, 0, s>>>(x, y, mask, n, k, key, step, sampleIds, threshold, scale);
}

void dropoutBackward(cudaStream_t s, const float* dy, float* dx, const uint8_t* mask, int64_t count, float scale) {
  dropoutBackwardKernel<<<gridFor(count), kThreads, 0, s>>>(dy, dx, mask, count, scale);
}

}  // namespace mlcuda::kernels
