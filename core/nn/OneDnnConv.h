// Float32 convolutions on oneDNN (Debian's libdnnl): forward, backward weights (with the bias) and
// backward data, on channels-last activations and Keras' (kh, kw, c, filters) kernel, which is
// reordered to and from the blocked layout oneDNN's fast kernels want on every call (the kernel
// changes every step; the reorder, made once per shape and thread, runs in a few microseconds). Measured against im2col +
// OpenBLAS with bench_conv (README, issue 14): 2.3x to 4.4x faster per pass on one thread on fashion-cnn's layers.
//
// Used only where oneDNN was built in and picks a direct (JIT) convolution on this CPU: brgconv or
// jit:avx512_core, jit:avx2 (measured faster than im2col too, with ONEDNN_MAX_CPU_ISA=AVX2); its
// reference kernel or its own gemm-based one would be slower, and Conv2D keeps im2col + OpenBLAS. Runs on
// the calling thread alone (one OpenMP thread), like Bf16Gemm: a replica's team splits the samples.
// Plans (primitives and memory descriptors) are kept per thread and shape. Deterministic: the same
// call gives the same bits every time.
#pragma once
#include <cstdint>
#include <string>

#include "nn/Spatial.h"

namespace ml::dnnconv {

// Whether Conv2D's float32 passes run here (decided once by creating a primitive), unless forced
// off; with a layer's shape, also whether oneDNN has a direct kernel for all three of its passes.
bool available();
bool available(const Geometry& g, const Window& win, int64_t filters);
// One line: "oneDNN 2.6.3 brgconv:avx512_core" or "im2col + OpenBLAS sgemm: <why>".
std::string description();
// The same for the mixed_bfloat16 policy: bfloat16 operands, float32 sums and results. oneDNN 2.6
// has direct bfloat16 convolutions only on CPUs with AVX512-BF16 or AMX; elsewhere Conv2D keeps
// im2col and Bf16Gemm. "oneDNN 2.6.3 bfloat16 brgconv:avx512_core_bf16 (backward jit_bf16:...)".
bool availableBf16();
bool availableBf16(const Geometry& g, const Window& win, int64_t filters);
std::string descriptionBf16();
// Tests and benchmarks: run im2col even where oneDNN could, both types (false: back to available()).
void forceOff(bool on);

// x (n, h, w, c) -> y (n, oh, ow, f) = conv(x, w) [+ bias], then max(y, 0) when relu; y overwritten.
void forward(const Geometry& g, const Window& win, int64_t filters, int64_t n, const float* x, const float* w, const float* bias,
             float* y, bool relu = false);
// dw (kh, kw, c, f) and db (f, or null) overwritten with the gradients of this batch.
void backwardWeights(const Geometry& g, const Window& win, int64_t filters, int64_t n, const float* x, const float* dz, float* dw,
                     float* db);
// dx (n, h, w, c) overwritten with the input gradient.
void backwardData(const Geometry& g, const Window& win, int64_t filters, int64_t n, const float* dz, const float* w, float* dx);

// bfloat16 (bits in uint16_t) operands, float32 results: the same passes. Every product of two
// bfloat16 values is exact in float32, so these agree with im2col + Bf16Gemm up to the order of the
// float32 sums.
void forward(const Geometry& g, const Window& win, int64_t filters, int64_t n, const uint16_t* x, const uint16_t* w,
             const float* bias, float* y, bool relu = false);
void backwardWeights(const Geometry& g, const Window& win, int64_t filters, int64_t n, const uint16_t* x, const uint16_t* dz,
                     float* dw, float* db);
void backwardData(const Geometry& g, const Window& win, int64_t filters, int64_t n, const uint16_t* dz, const uint16_t* w,
                  float* dx);

}  // namespace ml::dnnconv
