// Dense: y = act(x W + b), kernel W (in, out) as in Keras, bias b (out).
#pragma once
#include <vector>

#include "nn/Activations.h"
#include "nn/Layer.h"
#include "nn/Precision.h"

namespace ml {

class Dense : public Layer {
 public:
  Dense(int64_t units, Act act, bool useBias = true, std::string kernelInit = "glorot_uniform", std::string biasInit = "zeros");
  std::string type() const override { return "Dense"; }
  Shape build(const Shape& input) override;
  int64_t paramCount() const override { return inFeatures() * units_ + (useBias_ ? units_ : 0); }
  void bind(float* params, float* grads) override;
  void initialize(uint64_t seed) override;
  void forward(const float* x, float* y, int64_t n, const StepContext& ctx) override;
  void backward(const float* x, const float* y, float* dy, float* dx, int64_t n, const StepContext& ctx) override;
  bool gradientsFinite() const override;
  bool overwritesGrads() const override { return true; }
  int64_t lowPrecisionBytes(int64_t batch) const override;
  int64_t lowPrecisionBytesInUse() const override;

  Act activation() const { return act_; }
  // Set by the model when the loss takes the softmax gradient itself (fused softmax + cross-entropy):
  // backward then receives dL/d(pre-activation) directly.
  void setFusedSoftmax(bool on) { fusedSoftmax_ = on; }
  const float* kernel() const { return w_; }

  // How backward uses a team of threads (nn/ThreadTeam.h): split each GEMM across the team, or
  // run the input-gradient and weight-gradient GEMMs side by side, one thread each.
  enum class BackwardPlan { Auto, Split, SideBySide };
  // The plan Auto picks for this shape on `threads` threads (measured: see bench_kernels).
  static BackwardPlan choosePlan(int64_t in, int64_t out, int64_t n, int threads);
  // Forces a plan for every Dense (benchmarks and tests); Auto restores the choice by shape.
  static void forcePlan(BackwardPlan plan);
  const float* bias() const { return b_; }
  // mixed_*: inputs, weights, outputs and gradients rounded to the low precision, the products
  // accumulated in float32, the kernel and its gradient kept in float32 (nn/Precision.h).
  void setPrecision(Precision p) { precision_ = p; }
  Precision precision() const { return precision_; }

 private:
  int64_t units_;
  Act act_;
  bool useBias_;
  std::string kernelInit_, biasInit_;
  bool fusedSoftmax_ = false;
  float* w_ = nullptr;
  float* b_ = nullptr;
  float* dw_ = nullptr;
  float* db_ = nullptr;
  Precision precision_ = Precision::Float32;
  // Low precision: the rounded input and kernel of the last forward (backward uses them), and the
  // micro-batch's kernel gradient before it is rounded and added to the float32 one.
  std::vector<float> xq_, wq_, dwq_;
  // mixed_bfloat16: the input, kernel and dz as bfloat16 for Bf16Gemm (xq_ and wq_ stay unused).
  std::vector<uint16_t> xb_, wb_, dzb_, dwb_;

  bool overwrite_ = false;  // this backward writes dW and db (StepContext::overwriteGrads)
  void backwardOnTeam(const float* y, const float* x, float* dz, float* dx, int64_t n);
  void weightGrad(const float* x, const float* dz, int64_t n, int64_t lo, int64_t hi);  // rows [lo, hi) of dW
  void biasGrad(const float* dz, int64_t n, int64_t lo, int64_t hi);                    // columns [lo, hi) of db
  void inputGrad(const float* dz, float* dx, int64_t lo, int64_t hi);                   // rows [lo, hi) of dx
  void forwardLow(const float* x, float* y, int64_t n);
  void backwardLow(const float* y, float* dz, float* dx, int64_t n);
  void forwardBf16(const float* x, float* y, int64_t n);
  void backwardBf16(const float* y, float* dz, float* dx, int64_t n);
};

}  // namespace ml
