// Loss (with its gradient, softmax or sigmoid fused where the CPU fuses it) and metric kernels, one
// thread per row with the CPU's arithmetic in the CPU's types and order, plus a deterministic sum of
// the rows.
#include "backend/cuda/CudaPluginApi.h"
#include "backend/cuda/Kernels.h"

namespace mlcuda::kernels {

namespace {

constexpr float kEps = 1e-7f;  // Keras' epsilon for clipping probabilities, as in core/nn/Loss.cpp

__device__ __forceinline__ int64_t firstIndex() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t gridStride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// std::clamp: a NaN passes through (fminf/fmaxf would replace it).
__device__ __forceinline__ float clampStd(float v, float lo, float hi) { return v < lo ? lo : (hi < v ? hi : v); }

__device__ __forceinline__ float targetAt(int kind, const float* targets, int64_t r, int64_t j, int64_t k) {
  if (kind == MLCUDA_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY) return static_cast<int64_t>(targets[r]) == j ? 1.0f : 0.0f;
  return targets[r * k + j];
}

// std::max_element: the first of the largest.
__device__ __forceinline__ int64_t argmaxFirst(const float* p, int64_t k) {
  int64_t best = 0;
  for (int64_t j = 1; j < k; ++j)
    if (p[best] < p[j]) best = j;
  return best;
}

// Binary cross-entropy of one row (ml::Loss::compute's binaryCrossentropy): the sum over the k
// outputs of loss / k, and grad = the per-output gradient / k. On logits z: max(z, 0) - z t +
// log(1 + e^-|z|), gradient sigmoid(z) - t; fused (p a sigmoid output): gradient p - t with respect to
// the sigmoid's input; on probabilities: clipped like Keras, gradient -t/p + (1-t)/(1-p). Explicitly
// rounded double operations where the CPU would otherwise see a fused multiply-add.
__device__ double binaryRow(bool fromLogits, bool fused, const float* pred, const float* targets, int64_t k, float* grad) {
  const float invK = 1.0f / static_cast<float>(k);
  double total = 0;
  for (int64_t j = 0; j < k; ++j) {
    const float p = pred[j], t = targets[j];
    double l;
    float g;
    if (fromLogits) {
      const float positive = p < 0.0f ? 0.0f : p;  // std::max(p, 0.0f)
      const double pd = p;
      l = __dadd_rn(__dsub_rn(positive, __dmul_rn(pd, t)), log1p(exp(-fabs(pd))));
      g = static_cast<float>(1.0 / (1.0 + exp(-pd))) - t;
    } else {
      const double q = clampStd(p, kEps, 1.0f - kEps);
      l = -__dadd_rn(__dmul_rn(t, log(q)), __dmul_rn(1.0 - t, log(1.0 - q)));
      const bool clipped = p < kEps || p > 1.0f - kEps;
      g = fused ? p - t : (clipped ? 0.0f : -t / p + (1.0f - t) / (1.0f - p));
    }
    total += l / static_cast<double>(k);
    if (grad) grad[j] = g * invK;
  }
  return total;
}

__global__ void lossRowsKernel(int kind, bool fromLogits, bool fused, const float* pred, const float* targets, int64_t n,
                               int64_t k, float* grad, double* rowLoss) {
  for (int64_t r = firstIndex(); r < n; r += gridStride()) {
    const float* p = pred + r * k;
    float* g = grad ? grad + r * k : nullptr;
    double total = 0;
    if (kind == MLCUDA_LOSS_MEAN_SQUARED_ERROR) {
      double s = 0;
      for (int64_t j = 0; j < k; ++j) {
        const float d = p[j] - targets[r * k + j];
        s += static_cast<double>(d) * d;
        if (g) g[j] = 2.0f * d / static_cast<float>(k);
      }
      total = s / static_cast<double>(k);
    } else if (kind == MLCUDA_LOSS_BINARY_CROSSENTROPY) {
      total = binaryRow(fromLogits, fused, p, targets + r * k, k, g);
    } else if (fromLogits) {
      // log-softmax with the max subtracted; grad = softmax - target.
      const float mx = p[argmaxFirst(p, k)];
      double sum = 0;
      for (int64_t j = 0; j < k; ++j) sum += exp(static_cast<double>(p[j] - mx));
      const double logSum = log(sum) + mx;
      for (int64_t j = 0; j < k; ++j) {
        const float t = targetAt(kind, targets, r, j, k);
        if (t != 0.0f) total -= t * (p[j] - logSum);
        if (g) g[j] = static_cast<float>(exp(p[j] - logSum)) - t;
      }
    } else if (fused) {
      // p is a softmax output; the gradient w.r.t. its logits is p - target.
      for (int64_t j = 0; j < k; ++j) {
        const float t = targetAt(kind, targets, r, j, k);
        if (t != 0.0f) total -= t * logf(clampStd(p[j], kEps, 1.0f - kEps));
        if (g) g[j] = p[j] - t;
      }
    } else {
      // Keras on probabilities: normalise rows to sum 1, clip, -sum t log p.
      double s = 0;
      for (int64_t j = 0; j < k; ++j) s += p[j];
      const float inv = static_cast<float>(1.0 / (s > 1e-30 ? s : 1e-30));
      float tSum = 0;
      for (int64_t j = 0; j < k; ++j) tSum += targetAt(kind, targets, r, j, k);
      for (int64_t j = 0; j < k; ++j) {
        const float t = targetAt(kind, targets, r, j, k);
        const float q = p[j] * inv;
        const bool clipped = q < kEps || q > 1.0f - kEps;
        if (t != 0.0f) total -= t * logf(clampStd(q, kEps, 1.0f - kEps));
        if (g) g[j] = (clipped || t == 0.0f ? 0.0f : -t / p[j]) + tSum * inv;
      }
    }
    rowLoss[r] = total;
  }
}

__global__ void metricRowsKernel(int kind, const float* pred, const float* targets, int64_t n, int64_t k, int64_t targetDim,
                                 double* rowValue) {
  for (int64_t r = firstIndex(); r < n; r += gridStride()) {
    const float* p = pred + r * k;
    double v = 0;
    if (kind == MLCUDA_METRIC_BINARY_ACCURACY || kind == MLCUDA_METRIC_BINARY_ACCURACY_LOGITS) {
      // The share of the row's outputs on the right side of the threshold.
      const float threshold = kind == MLCUDA_METRIC_BINARY_ACCURACY ? 0.5f : 0.0f;
      int64_t right = 0;
      for (int64_t j = 0; j < k; ++j) right += (p[j] > threshold) == (targets[r * targetDim + j] > 0.5f) ? 1 : 0;
      v = static_cast<double>(right) / static_cast<double>(k);
    } else if (kind == MLCUDA_METRIC_ACCURACY) {
      const int64_t guess = argmaxFirst(p, k);
      const int64_t truth = targetDim == 1 ? static_cast<int64_t>(targets[r]) : argmaxFirst(targets + r * targetDim, targetDim);
      v = guess == truth ? 1.0 : 0.0;
    } else {
      double e = 0;
      for (int64_t j = 0; j < k; ++j) e += fabsf(p[j] - targets[r * targetDim + j]);
      v = e / static_cast<double>(k);
    }
    rowValue[r] = v;
  }
}

// One block: each thread adds a strided share in order, then a fixed tree. The order depends on n
// only, so the same inputs give the same bits on every run and every replica.
__global__ void sumKernel(const double* values, int64_t n, double* out) {
  __shared__ double part[kThreads];
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) s += values[i];
  part[threadIdx.x] = s;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w >>= 1) {
    if (static_cast<int>(threadIdx.x) < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = part[0];
}

}  // namespace

void lossRows(cudaStream_t s, int kind, bool fromLogits, bool fused, const float* pred, const float* targets, int64_t n,
              int64_t k, float* grad, double* rowLoss) {
  lossRowsKernel<<<gridFor(n), kThreads, 0, s>>>(kind, fromLogits, fused, pred, targets, n, k, grad, rowLoss);
}

void metricRows(cudaStream_t s, int kind, const float* pred, const float* targets, int64_t n, int64_t k, int64_t targetDim,
                double* rowValue) {
  metricRowsKernel<<<gridFor(n), kThreads, 0, s>>>(kind, pred, targets, n, k, targetDim, rowValue);
}

void sumDeterministic(cudaStream_t s, const double* values, int64_t n, double* out) {
  sumKernel<<<1, kThreads, 0, s>>>(values, n, out);
}

}  // namespace mlcuda::kernels
