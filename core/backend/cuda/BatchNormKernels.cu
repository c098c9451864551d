// BatchNormalization over the last axis, as core/nn/BatchNorm.cpp computes it: the per-channel sums
// in double (moments; dy and dy*xhat for the backward), the normalisation, the evaluation and moving
// statistics and the input gradient, each value with the CPU's operations in the CPU's types
// (explicitly rounded intrinsics: no FMA, as the CPU build's -ffp-contract=off). Why these are the
// plugin's own kernels and not cuDNN's batch normalisation: PoolKernels.cu.
//
// The sums are deterministic without atomics: pass 1 gives each block a tile of 32 channels and a
// chunk of rows, 8 row lanes each adding their rows in order, then lane 0 adding the lanes in order
// into one partial per chunk; pass 2 adds the chunks in order. The order depends on (rows, C) alone,
// so every run gives the same bits (the CPU adds row by row: equal to double rounding).
#include <cmath>

#include "backend/cuda/Kernels.h"

namespace mlcuda::kernels {

namespace {

__device__ __forceinline__ int64_t firstIndex() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t gridStride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

constexpr int kColumns = 32, kLanes = 8;
constexpr int64_t kChunkRows = 256, kMaxChunks = 1024;

int64_t chunksFor(int64_t rows) {
  const int64_t c = (rows + kChunkRows - 1) / kChunkRows;
  return c < 1 ? 1 : (c > kMaxChunks ? kMaxChunks : c);
}

// xhat = (x - mean) * invstd in float, as the CPU computes it.
__device__ __forceinline__ float normalized(float x, float mean, float invstd) { return __fmul_rn(__fsub_rn(x, mean), invstd); }

// Pass 1. moments (dy == null): [sum x, sum x^2]; backward: [sum dy, sum dy * xhat]. partial holds
// chunks x 2C doubles: chunk k's [first sums (C), second sums (C)].
__global__ void partialSumsKernel(const float* x, const float* dy, const float* stats, int64_t rows, int64_t C,
                                  int64_t rowsPerChunk, double* partial) {
  __shared__ double first[kLanes][kColumns + 1], second[kLanes][kColumns + 1];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kColumns + tx;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rowsPerChunk;
  const int64_t r1 = r0 + rowsPerChunk < rows ? r0 + rowsPerChunk : rows;
  double a = 0.0, b = 0.0;
  if (c < C) {
    if (dy) {
      const float mean = stats[c], invstd = stats[C + c];
      for (int64_t r = r0 + ty; r < r1; r += kLanes) {
        const double g = dy[r * C + c], xh = normalized(x[r * C + c], mean, invstd);
        a = __dadd_rn(a, g);
        b = __dadd_rn(b, __dmul_rn(g, xh));
      }
    } else {
      for (int64_t r = r0 + ty; r < r1; r += kLanes) {
        const double v = x[r * C + c];
        a = __dadd_rn(a, v);
        b = __dadd_rn(b, __dmul_rn(v, v));
      }
    }
  }
  first[ty][tx] = a;
  second[ty][tx] = b;
  __syncthreads();
  if (ty != 0 || c >= C) return;
  double sa = first[0][tx], sb = second[0][tx];
  for (int lane = 1; lane < kLanes; ++lane) {
    sa = __dadd_rn(sa, first[lane][tx]);
    sb = __dadd_rn(sb, second[lane][tx]);
  }
  double* out = partial + static_cast<int64_t>(blockIdx.y) * 2 * C;
  out[c] = sa;
  out[C + c] = sb;
}

// Pass 2: sums = the chunks' partials added in chunk order; then, for the backward,
// dgamma += float(sum dy xhat) and dbeta += float(sum dy) (either may be null).
__global__ void chunkSumsKernel(const double* partial, int64_t chunks, int64_t C, double* sums, float* dgamma, float* dbeta) {
  for (int64_t c = firstIndex(); c < C; c += gridStride()) {
    double a = partial[c], b = partial[C + c];
    for (int64_t k = 1; k < chunks; ++k) {
      a = __dadd_rn(a, partial[k * 2 * C + c]);
      b = __dadd_rn(b, partial[k * 2 * C + C + c]);
    }
    sums[c] = a;
    sums[C + c] = b;
    if (dgamma) dgamma[c] = __fadd_rn(dgamma[c], static_cast<float>(b));
    if (dbeta) dbeta[c] = __fadd_rn(dbeta[c], static_cast<float>(a));
  }
}

// y = gamma * xhat + beta, with the CPU's 1 and 0 where there is no gamma or beta.
__global__ void forwardKernel(const float* x, float* y, int64_t total, int64_t C, const float* stats, const float* gamma,
                              const float* beta) {
  for (int64_t i = firstIndex(); i < total; i += gridStride()) {
    const int64_t c = i % C;
    const float xh = normalized(x[i], stats[c], stats[C + c]);
    y[i] = __fadd_rn(__fmul_rn(gamma ? gamma[c] : 1.0f, xh), beta ? beta[c] : 0.0f);
  }
}

__global__ void evalStatsKernel(const float* movingMean, const float* movingVar, int64_t C, double epsilon, float* stats) {
  for (int64_t c = firstIndex(); c < C; c += gridStride()) {
    stats[c] = movingMean[c];
    stats[C + c] = static_cast<float>(__ddiv_rn(1.0, __dsqrt_rn(__dadd_rn(static_cast<double>(movingVar[c]), epsilon))));
  }
}

// moving = float(moving * momentum + global * (1 - momentum)), in double.
__global__ void updateMovingKernel(float* movingMean, float* movingVar, const double* global, int64_t C, double momentum,
                                   double rest) {
  for (int64_t c = firstIndex(); c < C; c += gridStride()) {
    movingMean[c] = static_cast<float>(__dadd_rn(__dmul_rn(movingMean[c], momentum), __dmul_rn(global[c], rest)));
    movingVar[c] = static_cast<float>(__dadd_rn(__dmul_rn(movingVar[c], momentum), __dmul_rn(global[C + c], rest)));
  }
}

// dx = float(k * (dy - a - xhat * b)) in double, k = gamma * invstd; a = b = 0 in evaluation.
__global__ void backwardDataKernel(const float* x, const float* dy, float* dx, int64_t total, int64_t C, const float* stats,
                                   const float* gamma, const double* sums, double count, bool training) {
  for (int64_t i = firstIndex(); i < total; i += gridStride()) {
    const int64_t c = i % C;
    const float mean = stats[c], invstd = stats[C + c];
    const double k = __dmul_rn(gamma ? static_cast<double>(gamma[c]) : 1.0, static_cast<double>(invstd));
    const double a = training ? __ddiv_rn(sums[c], count) : 0.0, b = training ? __ddiv_rn(sums[C + c], count) : 0.0;
    const double xh = normalized(x[i], mean, invstd);
    dx[i] = static_cast<float>(__dmul_rn(k, __dsub_rn(__dsub_rn(static_cast<double>(dy[i]), a), __dmul_rn(xh, b))));
  }
}

void channelSums(cudaStream_t s, const float* x, const float* dy, int64_t rows, int64_t C, const float* stats, double* out,
                 float* dgamma, float* dbeta, double* workspace) {
  const int64_t chunks = chunksFor(rows);
  const int64_t rowsPerChunk = (rows + chunks - 1) / chunks;
  const dim3 grid(static_cast<unsigned>((C + kColumns - 1) / kColumns), static_cast<unsigned>(chunks));
  partialSumsKernel<<<grid, dim3(kColumns, kLanes), 0, s>>>(x, dy, stats, rows, C, rowsPerChunk, workspace);
  chunkSumsKernel<<<gridFor(C), kThreads, 0, s>>>(workspace, chunks, C, out, dgamma, dbeta);
}

}  // namespace

int64_t batchnormWorkspace(int64_t rows, int64_t c) { return chunksFor(rows) * 2 * c; }

void batchnormMoments(cudaStream_t s, const float* x, int64_t rows, int64_t c, double* out, double* workspace) {
  channelSums(s, x, nullptr, rows, c, nullptr, out, nullptr, nullptr, workspace);
}

void batchnormBackwardSums(cudaStream_t s, const float* x, const float* dy, int64_t rows, int64_t c, const float* stats,
                           double* out, float* dgamma, float* dbeta, double* workspace) {
  channelSums(s, x, dy, rows, c, stats, out, dgamma, dbeta, workspace);
}

void batchnormForward(cudaStream_t s, const float* x, float* y, int64_t rows, int64_t c, const float* stats, const float* gamma,
                      const float* beta) {
  forwardKernel<<<gridFor(rows * c), kThreads, 0, s>>>(x, y, rows * c, c, stats, gamma, beta);
}

void batchnormEvalStats(cudaStream_t s, const float* movingMean, const float* movingVar, int64_t c, double epsilon,
                        float* stats) {
  evalStatsKernel<<<gridFor(c), kThreads, 0, s>>>(movingMean, movingVar, c, epsilon, stats);
}

void batchnormUpdateMoving(cudaStream_t s, float* movingMean, float* movingVar, const double* global, int64_t c,
                           double momentum) {
  updateMovingKernel<<<gridFor(c), kThreads, 0, s>>>(movingMean, movingVar, global, c, momentum, 1.0 - momentum);
}

void batchnormBackwardData(cudaStream_t s, const float* x, const float* dy, float* dx, int64_t rows, int64_t c,
                           const float* stats, const float* gamma, const double* sums, double count, bool training) {
  backwardDataKernel<<<gridFor(rows * c), kThreads, 0, s>>>(x, dy, dx, rows * c, c, stats, gamma, sums, count, training);
}

}  // namespace mlcuda::kernels
