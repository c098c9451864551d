// Conv2D as Keras defines it: channels-last input (h, w, c), kernel (kh, kw, c, filters) (Keras'
// layout, so weights files and exports need no transposition), bias (filters), "valid" or "same"
// padding, strides, a fused activation. CPU kernels, float32: oneDNN's convolutions where it has
// an optimized one for this CPU (nn/OneDnnConv.h; measured 2.3-4.4x faster per pass, README), else
// im2col then one OpenBLAS sgemm per chunk of samples. mixed_bfloat16: oneDNN's bfloat16
// convolutions where this CPU has them (AVX512-BF16, AMX), else im2col and Bf16Gemm; mixed_float16:
// im2col and the rounded products. A replica with several threads (its ThreadTeam) splits each
// pass (the im2col low-precision paths excepted).
#pragma once
#include <string>
#include <vector>

#include "nn/Activations.h"
#include "nn/Layer.h"
#include "nn/Precision.h"
#include "nn/Spatial.h"

namespace ml {

class Pool2D;
class ThreadTeam;

class Conv2D : public Layer {
 public:
  Conv2D(int64_t filters, Window win, Act act, bool useBias, std::string kernelInit, std::string biasInit);
  std::string type() const override { return "Conv2D"; }
  Shape build(const Shape& input) override;
  int64_t paramCount() const override { return kernelSize() + (useBias_ ? filters_ : 0); }
  void bind(float* params, float* grads) override;
  void initialize(uint64_t seed) override;
  void forward(const float* x, float* y, int64_t n, const StepContext& ctx) override;
  void backward(const float* x, const float* y, float* dy, float* dx, int64_t n, const StepContext& ctx) override;
  bool gradientsFinite() const override;
  int64_t lowPrecisionBytes(int64_t batch) const override;
  int64_t lowPrecisionBytesInUse() const override;
  nlohmann::json args() const override;

  int64_t filters() const { return filters_; }
  const Window& window() const { return win_; }
  Act activation() const { return act_; }
  bool useBias() const { return useBias_; }
  const Geometry& geometry() const { return g_; }
  // The kernel (kh, kw, in channels, filters), Keras' layout, and the bias (filters) or null.
  const float* kernel() const { return w_; }
  const float* bias() const { return b_; }
  // Multiply-adds of the forward pass per sample (the benchmarks' FLOP count is twice this).
  int64_t macsPerSample() const { return g_.oh * g_.ow * patch() * filters_; }
  // mixed_*: as Dense (nn/Precision.h): windows, kernel, outputs and gradients rounded to the low
  // format, float32 sums, the kernel and its gradient buffer float32.
  void setPrecision(Precision p) { precision_ = p; }
  // Fuses this layer with the max pooling above it (nn/ConvPool.h) when the shapes fit and nothing
  // below needs an input gradient (Sequential asks): forward then leaves its own output unwritten
  // and the pooling's forward calls forwardPooled; backward takes the pooling's gradient from it.
  // Not under mixed_float16 (whose rounding of each product's operands the fused loops do not do).
  bool fusePoolAbove(Pool2D* pool);
  bool poolFused() const { return pool_ && precision_ != Precision::MixedFloat16; }
  // The pooled output (n, ph, pw, F) and its argmax from the input of the last forward.
  void forwardPooled(float* pooled, int32_t* argmax, int64_t n);
  // The gradient that reaches backward is already ReLU's (the max pooling above applied the mask:
  // Pool2D::setReluBelow), so backward skips that pass. Only with a ReLU activation.
  // With the pooling given, its backward's channel sums are this layer's bias gradient too
  // (Pool2D::givesBiasGradient), which the oneDNN passes then leave out.
  void setGradientMasked(Pool2D* by) { maskedBy_ = act_ == Act::Relu ? by : nullptr; }

 private:
  int64_t patch() const { return win_.kh * win_.kw * g_.c; }
  int64_t kernelSize() const { return patch() * filters_; }
  int64_t chunkRows(int64_t n) const;
  void backwardChunkOnTeam(ThreadTeam& team, const float* dz, int64_t rows, float* dx, int64_t m);
  void forwardOneDnn(const float* x, float* y, int64_t n, ThreadTeam* team);
  void backwardOneDnn(const float* x, const float* dz, float* dx, int64_t n, ThreadTeam* team);
  void forwardOneDnnBf16(const float* x, float* y, int64_t n, ThreadTeam* team);
  void backwardOneDnnBf16(const float* x, const float* dz, float* dx, int64_t n, ThreadTeam* team);
  bool bf16OnOneDnn() const;  // mixed_bfloat16 with oneDNN's bfloat16 convolutions for this shape
  void backwardPooled(const float* x, int64_t n);
  bool biasFromPool() const;
  void addPartSums(const std::vector<float>& parts, float* db) const;

  int64_t filters_;
  Window win_;
  Act act_;
  bool useBias_;
  std::string kernelInit_, biasInit_;
  Geometry g_;
  float *w_ = nullptr, *b_ = nullptr, *dw_ = nullptr, *db_ = nullptr;
  std::vector<float> cols_, dcols_;       // im2col scratch of one chunk of samples
  std::vector<float> dwParts_, dbParts_;  // oneDNN: each part's kernel and bias gradients
  Precision precision_ = Precision::Float32;
  Pool2D* maskedBy_ = nullptr;     // the max pooling above that applies ReLU's gradient, if any
  Pool2D* pool_ = nullptr;         // the fused max pooling above, if any
  const float* fusedX_ = nullptr;  // its forward's input, kept by forward for forwardPooled
  // Low precision: the rounded kernel of the last forward (backward uses it), and the micro-batch's
  // kernel and bias gradients, summed over the chunks in float32 and rounded once.
  std::vector<float> wq_, dwq_, dbq_;
  // mixed_bfloat16: the kernel, one chunk's windows and dz as bfloat16 for Bf16Gemm, and one
  // chunk's kernel gradient before it joins the sum over chunks.
  std::vector<uint16_t> wb_, colsb_, dzb_;
  std::vector<uint16_t> xb_;  // oneDNN bfloat16: the batch's input packed
  std::vector<float> xr_;     // fused with pooling, mixed_bfloat16: the batch's input rounded
  std::vector<float> dwChunk_;
};

// x (n, h, w, c) -> cols (n * oh * ow, kh * kw * c), zeros where the window leaves the image.
void im2col(const float* x, int64_t n, const Geometry& g, const Window& win, float* cols);
// The adjoint: dx (n, h, w, c) += the column gradients at the positions they came from.
void col2imAdd(const float* dcols, int64_t n, const Geometry& g, const Window& win, float* dx);

}  // namespace ml
