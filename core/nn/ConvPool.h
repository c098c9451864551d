// The first convolution of a CNN fused with the max pooling above it: Conv2D (a small patch, e.g.
// 3x3 over 1 grey channel, ReLU, valid padding) then MaxPooling2D whose windows tile its output.
// Computed apart, the convolution writes its whole output (26x26x32 floats a Fashion-MNIST sample,
// 5.5 MB a batch of 64: past the core's L2), the pooling reads it back, and backward writes and reads
// a gradient of that size twice more; those passes, not the multiply-adds, were a quarter of a
// fashion-cnn step. Fused, forward keeps each window's outputs in registers and writes only the
// pooled values and their argmax; backward rebuilds one sample's output gradient at a time in a
// small scratch (L1/L2) and takes the kernel and bias gradients from it. The layer below needs no
// input gradient (the first layer with parameters), so none is computed.
//
// The sums run in a fixed order (taps in (ky, kx, c) order from the bias; positions row by row),
// so the bits are the same from run to run; they differ from oneDNN's order by float rounding.
// mixed_bfloat16: the input and kernel given already rounded to bfloat16 (their products are exact
// in float32), each convolution output rounded before the pooling compares it, as the policy
// rounds a layer's output; the gradients summed in float32 (the caller rounds them once).
#pragma once
#include <cstdint>

#include "nn/Spatial.h"

namespace ml::convpool {

struct Shapes {
  Geometry conv;    // the convolution's input and output sizes (valid padding)
  Window convWin;   // its kernel and strides
  Geometry pool;    // the pooling's (its input is the convolution's output)
  Window poolWin;   // strides = pool size, so the windows tile
  int64_t filters;  // F
};

// Whether a Conv2D (kernel, strides, filters, input channels) and the max pooling above it fit
// these kernels: a patch of at most 64 values, filters a multiple of 8, valid padding.
bool fits(const Shapes& s);

// x (n, h, w, c) -> pooled (n, ph, pw, F) = maxpool(relu(conv(x, w) + b)), argmax as Pool2D keeps
// it (the position (oy * ow + ox) * F + f, within the sample's convolution output, of each winner:
// the first of equal maxima in row-major window order). w is Keras' (kh, kw, c, F).
void forward(const Shapes& s, int64_t n, const float* x, const float* w, const float* bias, float* pooled, int32_t* argmax,
             bool roundBf16);

// From the pooled output's gradient g (n, ph, pw, F): dw (kh, kw, c, F) += and db (F) += the
// gradients of the batch (db may be null). The output gradient is g at each winner whose pooled
// value is positive (ReLU's gradient there), 0 everywhere else.
void backward(const Shapes& s, int64_t n, const float* x, const float* pooled, const int32_t* argmax, const float* g, float* dw,
              float* db);

}  // namespace ml::convpool
