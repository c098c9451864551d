// Dense: y = act(x W + b), kernel W (in, out) as in Keras, bias b (out).
#pragma once
#include "nn/Activations.h"
#include "nn/Layer.h"

namespace ml {

class Dense : public Layer {
 public:
  Dense(int64_t units, Act act, bool useBias = true, std::string kernelInit = "glorot_uniform",
        std::string biasInit = "zeros");
  std::string type() const override { return "Dense"; }
  Shape build(const Shape& input) override;
  int64_t paramCount() const override { return inFeatures() * units_ + (useBias_ ? units_ : 0); }
  void bind(float* params, float* grads) override;
  void initialize(uint64_t seed) override;
  void forward(const float* x, float* y, int64_t n, const StepContext& ctx) override;
  void backward(const float* x, const float* y, float* dy, float* dx, int64_t n, const StepContext& ctx) override;
  nlohmann::json args() const override;
  bool gradientsFinite() const override;

  Act activation() const { return act_; }
  // Set by the model when the loss takes the softmax gradient itself (fused softmax + cross-entropy):
  // backward then receives dL/d(pre-activation) directly.
  void setFusedSoftmax(bool on) { fusedSoftmax_ = on; }
  const float* kernel() const { return w_; }
  const float* bias() const { return b_; }

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
};

}  // namespace ml
