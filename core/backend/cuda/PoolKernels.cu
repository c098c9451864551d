// MaxPooling2D, AveragePooling2D and GlobalAveragePooling2D on channels-last images, as
// core/nn/Pooling.cpp computes them, to the bit: the same operations in the same order for every
// value (explicitly rounded intrinsics, so that no multiply and add fuse into an FMA, as the CPU
// build forbids too: -ffp-contract=off).
//
// These are the plugin's own kernels and not cuDNN's pooling (nor, in BatchNormKernels.cu, cuDNN's
// batch normalisation), for two reasons. Max pooling's ties are common (the zeros after a ReLU fill
// whole windows) and cuDNN does not say which of the tied inputs gets the gradient: here it is the
// first in window order, as on the CPU, so that GPU and CPU route every gradient to the same input
// and train to the same weights. And synchronized BatchNormalization needs the sum across replicas
// between the statistics and the normalisation (and again between the backward sums and dx), which
// cuDNN's fused batch-norm calls, one call per pass, leave no room for.
//
// The backward passes are gathers, not scatters: one thread per input element adds, in output order,
// the gradients of the outputs whose window covers it (max pooling: those whose argmax is this
// element), so there are no atomics and every run gives the same bits as the CPU's loop.
#include <cmath>

#include "backend/cuda/Kernels.h"

namespace mlcuda::kernels {

namespace {

__device__ __forceinline__ int64_t firstIndex() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t gridStride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }
__device__ __forceinline__ int64_t maxI(int64_t a, int64_t b) { return a > b ? a : b; }
__device__ __forceinline__ int64_t minI(int64_t a, int64_t b) { return a < b ? a : b; }

// The window of output row oy clipped to the image: input rows [lo, hi) (ml::Pool2D::forward).
struct Span {
  int64_t lo, hi;
};
__device__ __forceinline__ Span windowRows(const mlcuda_conv_geometry& g, int64_t oy) {
  return {maxI(0, oy * g.sh - g.pad_top), minI(g.h, oy * g.sh - g.pad_top + g.kh)};
}
__device__ __forceinline__ Span windowCols(const mlcuda_conv_geometry& g, int64_t ox) {
  return {maxI(0, ox * g.sw - g.pad_left), minI(g.w, ox * g.sw - g.pad_left + g.kw)};
}
// The outputs along one axis whose window covers input position i: o * stride - pad <= i and
// i < o * stride - pad + k, within [0, out).
__device__ __forceinline__ Span covering(int64_t i, int64_t pad, int64_t k, int64_t stride, int64_t out) {
  const int64_t first = i + pad - k + 1;
  const int64_t lo = first > 0 ? (first + stride - 1) / stride : 0;
  return {lo, minI((i + pad) / stride + 1, out)};
}

// One thread per output (sample, oy, ox, channel), channels innermost (coalesced). Max: -inf and
// the window's first in-image position, then a strict > over the window row by row (the first
// maximum wins); average: the window's sum in the same order divided by its in-image positions.
__global__ void poolForwardKernel(mlcuda_conv_geometry g, bool isMax, const float* x, float* y, int32_t* argmax, int64_t n) {
  const int64_t C = g.c, inF = g.h * g.w * C, total = n * g.oh * g.ow * C;
  for (int64_t i = firstIndex(); i < total; i += gridStride()) {
    const int64_t ch = i % C;
    int64_t t = i / C;
    const int64_t ox = t % g.ow;
    t /= g.ow;
    const int64_t oy = t % g.oh, s = t / g.oh;
    const Span ys = windowRows(g, oy), xs = windowCols(g, ox);
    const float* img = x + s * inF;
    if (isMax) {
      float best = -INFINITY;
      int64_t at = (ys.lo * g.w + xs.lo) * C + ch;
      for (int64_t iy = ys.lo; iy < ys.hi; ++iy)
        for (int64_t ix = xs.lo; ix < xs.hi; ++ix) {
          const int64_t p = (iy * g.w + ix) * C + ch;
          const float v = img[p];
          if (v > best) {
            best = v;
            at = p;
          }
        }
      y[i] = best;
      argmax[i] = static_cast<int32_t>(at);
    } else {
      float sum = 0.0f;
      for (int64_t iy = ys.lo; iy < ys.hi; ++iy)
        for (int64_t ix = xs.lo; ix < xs.hi; ++ix) sum = __fadd_rn(sum, img[(iy * g.w + ix) * C + ch]);
      y[i] = __fdiv_rn(sum, static_cast<float>((ys.hi - ys.lo) * (xs.hi - xs.lo)));
    }
  }
}

// One thread per input element (sample, iy, ix, channel): the sum, from 0 and in output order, of
// dy over the outputs whose window covers it (max: whose argmax is it; average: times the output's
// 1 / in-image positions, as the CPU scales it).
__global__ void poolBackwardKernel(mlcuda_conv_geometry g, bool isMax, const float* dy, const int32_t* argmax, float* dx,
                                   int64_t n) {
  const int64_t C = g.c, total = n * g.h * g.w * C;
  for (int64_t i = firstIndex(); i < total; i += gridStride()) {
    const int64_t ch = i % C;
    int64_t t = i / C;
    const int64_t ix = t % g.w;
    t /= g.w;
    const int64_t iy = t % g.h, s = t / g.h;
    const int64_t here = (iy * g.w + ix) * C + ch;
    const Span oys = covering(iy, g.pad_top, g.kh, g.sh, g.oh), oxs = covering(ix, g.pad_left, g.kw, g.sw, g.ow);
    float acc = 0.0f;
    for (int64_t oy = oys.lo; oy < oys.hi; ++oy)
      for (int64_t ox = oxs.lo; ox < oxs.hi; ++ox) {
        const int64_t o = ((s * g.oh + oy) * g.ow + ox) * C + ch;
        if (isMax) {
          if (argmax[o] == here) acc = __fadd_rn(acc, dy[o]);
        } else {
          const Span ys = windowRows(g, oy), xs = windowCols(g, ox);
          const float inv = __fdiv_rn(1.0f, static_cast<float>((ys.hi - ys.lo) * (xs.hi - xs.lo)));
          acc = __fadd_rn(acc, __fmul_rn(dy[o], inv));
        }
      }
    dx[i] = acc;
  }
}

// One thread per (sample, channel): the positions' sum in order, divided by their number.
__global__ void globalAvgForwardKernel(const float* x, float* y, int64_t n, int64_t hw, int64_t c) {
  const float count = static_cast<float>(hw);
  for (int64_t i = firstIndex(); i < n * c; i += gridStride()) {
    const int64_t s = i / c, ch = i - s * c;
    const float* v = x + s * hw * c + ch;
    float sum = 0.0f;
    for (int64_t p = 0; p < hw; ++p) sum = __fadd_rn(sum, v[p * c]);
    y[i] = __fdiv_rn(sum, count);
  }
}

__global__ void globalAvgBackwardKernel(const float* dy, float* dx, int64_t n, int64_t hw, int64_t c) {
  const float count = static_cast<float>(hw);
  const int64_t total = n * hw * c;
  for (int64_t i = firstIndex(); i < total; i += gridStride()) {
    const int64_t ch = i % c, s = i / (hw * c);
    dx[i] = __fdiv_rn(dy[s * c + ch], count);
  }
}

}  // namespace

void poolForward(cudaStream_t s, const mlcuda_conv_geometry& g, bool isMax, const float* x, float* y, int32_t* argmax,
                 int64_t n) {
  poolForwardKernel<<<gridFor(n * g.oh * g.ow * g.c), kThreads, 0, s>>>(g, isMax, x, y, argmax, n);
}

void poolBackward(cudaStream_t s, const mlcuda_conv_geometry& g, bool isMax, const float* dy, const int32_t* argmax, float* dx,
                  int64_t n) {
  poolBackwardKernel<<<gridFor(n * g.h * g.w * g.c), kThreads, 0, s>>>(g, isMax, dy, argmax, dx, n);
}

void globalAvgPoolForward(cudaStream_t s, const float* x, float* y, int64_t n, int64_t hw, int64_t c) {
  globalAvgForwardKernel<<<gridFor(n * c), kThreads, 0, s>>>(x, y, n, hw, c);
}

void globalAvgPoolBackward(cudaStream_t s, const float* dy, float* dx, int64_t n, int64_t hw, int64_t c) {
  globalAvgBackwardKernel<<<gridFor(n * hw * c), kThreads, 0, s>>>(dy, dx, n, hw, c);
}

}  // namespace mlcuda::kernels
