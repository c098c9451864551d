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

// The bias gradient, db[j] += sum over rows of dz[r][j], in two passes whose order depends on (n, k)
// alone (not on the GPU, nor on timing): the same bits on every run and on every replica, with no
// atomics. Pass 1: a block of 32 columns x 8 row lanes sums one chunk of rows of one column tile;
// each lane adds its rows (r0 + lane, r0 + lane + 8, ...) in order, then lane 0 adds the 8 lanes in
// order. Adjacent threads read adjacent columns of a row (coalesced). With one chunk, pass 1 adds
// straight into db; otherwise it writes one partial row per chunk and pass 2 adds the chunks to db
// in chunk order.
constexpr int kBiasColumns = 32, kBiasLanes = 8;
constexpr int64_t kBiasChunkRows = 256, kBiasMaxChunks = 1024;

int64_t biasChunks(int64_t n) {
  const int64_t c = (n + kBiasChunkRows - 1) / kBiasChunkRows;
  return c < 1 ? 1 : (c > kBiasMaxChunks ? kBiasMaxChunks : c);
}

__global__ void biasPartialKernel(const float* dz, float* out, int64_t n, int64_t k, int64_t rowsPerChunk, bool intoDb) {
  __shared__ float part[kBiasLanes][kBiasColumns + 1];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kBiasColumns + tx;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rowsPerChunk;
  const int64_t r1 = r0 + rowsPerChunk < n ? r0 + rowsPerChunk : n;
  float acc = 0.0f;
  if (j < k)
    for (int64_t r = r0 + ty; r < r1; r += kBiasLanes) acc += dz[r * k + j];
  part[ty][tx] = acc;
  __syncthreads();
  if (ty != 0 || j >= k) return;
  float sum = part[0][tx];
  for (int lane = 1; lane < kBiasLanes; ++lane) sum += part[lane][tx];
  if (intoDb)
    out[j] += sum;
  else
    out[static_cast<int64_t>(blockIdx.y) * k + j] = sum;
}

__global__ void biasChunksKernel(const float* partial, float* db, int64_t chunks, int64_t k) {
  for (int64_t j = firstIndex(); j < k; j += gridStride()) {
    float sum = partial[j];
    for (int64_t c = 1; c < chunks; ++c) sum += partial[c * k + j];
    db[j] += sum;
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

int64_t biasGradientWorkspace(int64_t n, int64_t k) {
  const int64_t chunks = biasChunks(n);
  return chunks > 1 ? chunks * k : 0;
}

void biasGradient(cudaStream_t s, const float* dz, float* db, int64_t n, int64_t k, float* workspace) {
  if (n <= 0 || k <= 0) return;
  const int64_t chunks = biasChunks(n);
  const int64_t rowsPerChunk = (n + chunks - 1) / chunks;
  const dim3 block(kBiasColumns, kBiasLanes);
  const dim3 grid(static_cast<unsigned>((k + kBiasColumns - 1) / kBiasColumns), static_cast<unsigned>(chunks));
  if (chunks == 1) {
    biasPartialKernel<<<grid, block, 0, s>>>(dz, db, n, k, rowsPerChunk, true);
    return;
  }
  biasPartialKernel<<<grid, block, 0, s>>>(dz, workspace, n, k, rowsPerChunk, false);
  biasChunksKernel<<<gridFor(k), kThreads, 0, s>>>(workspace, db, chunks, k);
}

void dropoutForward(cudaStream_t s, const float* x, float* y, uint8_t* mask, int64_t n, int64_t k, uint64_t key, uint64_t step,
                    const int64_t* sampleIds, uint32_t threshold, float scale) {
  dropoutForwardKernel<<<gridFor(n * k), kThreads, 0, s>>>(x, y, mask, n, k, key, step, sampleIds, threshold, scale);
}

void dropoutBackward(cudaStream_t s, const float* dy, float* dx, const uint8_t* mask, int64_t count, float scale) {
  dropoutBackwardKernel<<<gridFor(count), kThreads, 0, s>>>(dy, dx, mask, count, scale);
}

}  // namespace mlcuda::kernels
