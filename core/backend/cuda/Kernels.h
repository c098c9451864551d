// Launchers of the plugin's own kernels (the .cu files). They enqueue on the given stream and do not
// check: the calling entry point checks the launch with ML_LAUNCHED, naming its device.
// Every formula mirrors core/nn so that the GPU test can hold each kernel against the CPU layer.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/CudaPluginApi.h"

namespace mlcuda::kernels {

inline constexpr int kThreads = 256;
// Blocks for a grid-stride loop over count elements: at least one, at most 65536.
inline unsigned gridFor(int64_t count) {
  const int64_t b = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65536 ? 65536 : b));
}

// dst = act(src + b) element-wise over n rows of k (b may be null; act is not softmax);
// dst may equal src.
void biasActivation(cudaStream_t s, const float* src, float* dst, const float* b, int64_t n, int64_t k, int act);
// dz = dy * act'(.) from the output y, element-wise (act is not softmax); dz may equal dy.
void activationBackward(cudaStream_t s, int act, const float* y, const float* dy, float* dz, int64_t count);
// y = softmax(x) over each of n rows of k, the row maximum subtracted (ml::activationForward);
// y may equal x. Deterministic: the reduction order depends on k alone.
void softmaxForward(cudaStream_t s, const float* x, float* y, int64_t n, int64_t k);
// dx = y * (dy - sum(dy * y)) per row, from the output y (ml::activationBackward); dx may equal dy
// (or y).
void softmaxBackward(cudaStream_t s, const float* y, const float* dy, float* dx, int64_t n, int64_t k);
// db[j] += sum over rows of dz[r][j], in parallel over column tiles and chunks of rows, in an order
// fixed by (n, k) alone (run-to-run identical bits, no atomics); not the CPU's row-by-row order, so
// equal to it to float rounding. workspace: biasGradientWorkspace(n, k) floats of device memory
// (unused, and may be null, when that is 0: up to 256 rows), not read or written by anyone else
// until the kernels end.
int64_t biasGradientWorkspace(int64_t n, int64_t k);
void biasGradient(cudaStream_t s, const float* dz, float* db, int64_t n, int64_t k, float* workspace);

void dropoutForward(cudaStream_t s, const float* x, float* y, uint8_t* mask, int64_t n, int64_t k, uint64_t key, uint64_t step,
                    const int64_t* sampleIds, uint32_t threshold, float scale);
void dropoutBackward(cudaStream_t s, const float* dy, float* dx, const uint8_t* mask, int64_t count, float scale);

// ---- convolutions (ConvKernels.cu): the copies around cuDNN --------------------------------------
// dst (cols, rows) = src (rows, cols)^T: Keras' (kh*kw*c, filters) kernel to cuDNN's (filters, kh*kw*c).
void transpose(cudaStream_t s, const float* src, float* dst, int64_t rows, int64_t cols);
// dst (cols, rows) += src (rows, cols)^T: cuDNN's kernel gradient added into Keras' layout.
void addTransposed(cudaStream_t s, const float* src, float* dst, int64_t rows, int64_t cols);
// xp (n, hp, wp, c) = x (n, h, w, c) placed at (top, left), zeros around it.
void padImages(cudaStream_t s, const float* x, float* xp, int64_t n, int64_t h, int64_t w, int64_t c, int64_t top, int64_t left,
               int64_t hp, int64_t wp);
// x (n, h, w, c) = the (h, w) window of xp (n, hp, wp, c) at (top, left).
void cropImages(cudaStream_t s, const float* xp, float* x, int64_t n, int64_t h, int64_t w, int64_t c, int64_t top, int64_t left,
                int64_t hp, int64_t wp);

// ---- pooling (PoolKernels.cu), bit for bit as ml::Pool2D and ml::GlobalAveragePooling2D ----------
void poolForward(cudaStream_t s, const mlcuda_conv_geometry& g, bool isMax, const float* x, float* y, int32_t* argmax, int64_t n);
// dx overwritten; no atomics (each input element gathers its outputs in order).
void poolBackward(cudaStream_t s, const mlcuda_conv_geometry& g, bool isMax, const float* dy, const int32_t* argmax, float* dx,
                  int64_t n);
void globalAvgPoolForward(cudaStream_t s, const float* x, float* y, int64_t n, int64_t hw, int64_t c);
void globalAvgPoolBackward(cudaStream_t s, const float* dy, float* dx, int64_t n, int64_t hw, int64_t c);

// ---- BatchNormalization (BatchNormKernels.cu), as ml::BatchNorm over (rows, c) ---------------------
// Doubles of device workspace the two sums below need for `rows` rows (never 0 for rows > 0), not
// read or written by anyone else until their kernels end.
int64_t batchnormWorkspace(int64_t rows, int64_t c);
// out (2c doubles) = [sum x, sum x^2] per channel (rows > 0), deterministic.
void batchnormMoments(cudaStream_t s, const float* x, int64_t rows, int64_t c, double* out, double* workspace);
// out = [sum dy, sum dy xhat]; dgamma += float(sum dy xhat), dbeta += float(sum dy) (either may be null).
void batchnormBackwardSums(cudaStream_t s, const float* x, const float* dy, int64_t rows, int64_t c, const float* stats,
                           double* out, float* dgamma, float* dbeta, double* workspace);
void batchnormForward(cudaStream_t s, const float* x, float* y, int64_t rows, int64_t c, const float* stats, const float* gamma,
                      const float* beta);
void batchnormEvalStats(cudaStream_t s, const float* movingMean, const float* movingVar, int64_t c, double epsilon, float* stats);
void batchnormUpdateMoving(cudaStream_t s, float* movingMean, float* movingVar, const double* global, int64_t c, double momentum);
void batchnormBackwardData(cudaStream_t s, const float* x, const float* dy, float* dx, int64_t rows, int64_t c,
                           const float* stats, const float* gamma, const double* sums, double count, bool training);

// ---- mixed precision (MixedKernels.cu): nn/Precision.cpp's rounding ------------------------------
// dst = round(src (+ b[i % k] when b is not null)) to the precision's format, kept as float32;
// dst may equal src.
void roundTo(cudaStream_t s, int precision, const float* src, float* dst, int64_t count, const float* b = nullptr, int64_t k = 1);
// dst (count bfloat16 or float16 values, 2 bytes each) = src rounded: cublasGemmEx's operands.
void packLow(cudaStream_t s, int precision, const float* src, void* dst, int64_t count);
// dst += round(src): a low-precision product's gradient added to the float32 one.
void addRounded(cudaStream_t s, int precision, const float* src, float* dst, int64_t count);
// cols (n*oh*ow, kh*kw*c) = x's windows packed to the low format (zeros outside the image), as
// nn/Conv2D.cpp's im2col; the product's operand for cublasGemmEx.
void im2colLow(cudaStream_t s, int precision, const float* x, const mlcuda_conv_geometry& g, int64_t n, void* cols);
// dx (n, h, w, c) = col2im of dcols (n*oh*ow, kh*kw*c), overwritten, in the CPU's order of sums.
void col2im(cudaStream_t s, const float* dcols, const mlcuda_conv_geometry& g, int64_t n, float* dx);
// x *= factor (the loss scale).
void scale(cudaStream_t s, float* x, int64_t count, float factor);

// Per-row loss (double) and, when grad is not null, the gradient; see ml::Loss::compute.
void lossRows(cudaStream_t s, int kind, bool fromLogits, bool fused, const float* pred, const float* targets, int64_t n,
              int64_t k, float* grad, double* rowLoss);
// Per-row metric (double); see ml::metricSum.
void metricRows(cudaStream_t s, int kind, const float* pred, const float* targets, int64_t n, int64_t k, int64_t targetDim,
                double* rowValue);
// *out = sum of values[0..n), in an order fixed by n alone (run-to-run identical bits).
void sumDeterministic(cudaStream_t s, const double* values, int64_t n, double* out);

// *counter += number of elements of x that are inf or NaN.
void countNonfinite(cudaStream_t s, const float* x, int64_t count, unsigned long long* counter);

void sgd(cudaStream_t s, float* p, const float* g, float* v, int64_t count, float scale, float lr, float momentum, bool nesterov);
// c1, c2 = 1 - b1, 1 - b2 and c = 1 - rho as Keras takes them (nn/OptimizerConstants.h, on the host).
void adam(cudaStream_t s, float* p, const float* g, float* m, float* v, int64_t count, float scale, float alpha, float b1,
          float b2, float c1, float c2, float eps);
void rmsprop(cudaStream_t s, float* p, const float* g, float* v, float* mom, int64_t count, float scale, float lr, float rho,
             float c, float momentum, float eps);

// dst row i = src row rows[i], width floats a row (the indices were checked on the host).
void gatherRows(cudaStream_t s, const float* src, const int64_t* rows, int64_t n, int64_t width, float* dst);

inline constexpr int kMaxLocalBuffers = 64;
// Every buffer[i][e] = buffers[0][e] + buffers[1][e] + ... (left to right), for count <= 64; with
// bf16, bfloat16 on the wire (mlcuda_local_allreduce_bf16's rounding).
void localAllReduce(cudaStream_t s, float* const* buffers, int count, int64_t elements, bool bf16 = false);
// dst (count floats) = src (count bfloat16 values).
void unpackBf16(cudaStream_t s, const void* src, float* dst, int64_t count);

}  // namespace mlcuda::kernels
