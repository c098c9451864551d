// The device-side gather of a batch: the data set's rows stay on the device, the batch's row
// indices are the only input that crosses the bus each step.
#include "backend/cuda/Kernels.h"

namespace mlcuda::kernels {

namespace {

// One thread per output element, grid-stride; consecutive threads read consecutive floats of a row.
__global__ void gatherRowsKernel(const float* __restrict__ src, const int64_t* __restrict__ rows, int64_t n, int64_t width,
                                 float* __restrict__ dst) {
  const int64_t total = n * width;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / width;
    dst[i] = src[rows[r] * width + (i - r * width)];
  }
}

}  // namespace

void gatherRows(cudaStream_t s, const float* src, const int64_t* rows, int64_t n, int64_t width, float* dst) {
  const int64_t total = n * width;
  gatherRowsKernel<<<gridFor(total), kThreads, 0, s>>>(src, rows, n, width, dst);
}

}  // namespace mlcuda::kernels
