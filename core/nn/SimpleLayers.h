// The parameter-free layers: Activation, Flatten, Reshape, Dropout.
#pragma once
#include <vector>

#include "nn/Activations.h"
#include "nn/Layer.h"

namespace ml {

class ActivationLayer : public Layer {
 public:
  explicit ActivationLayer(Act act) : act_(act) {}
  std::string type() const override { return "Activation"; }
  Shape build(const Shape& input) override;
  void forward(const float* x, float* y, int64_t n, const StepContext& ctx) override;
  void backward(const float* x, const float* y, float* dy, float* dx, int64_t n, const StepContext& ctx) override;
  Act activation() const { return act_; }
  void setFusedSoftmax(bool on) { fusedSoftmax_ = on; }

 private:
  Act act_;
  bool fusedSoftmax_ = false;
};

class Flatten : public Layer {
 public:
  std::string type() const override { return "Flatten"; }
  Shape build(const Shape& input) override;
  void forward(const float* x, float* y, int64_t n, const StepContext& ctx) override;
  void backward(const float* x, const float* y, float* dy, float* dx, int64_t n, const StepContext& ctx) override;
  bool isReshape() const override { return true; }
};

// Keras' Reshape(target_shape): the same values seen with another per-sample shape; one entry
// may be -1 (inferred). Like Flatten, the model skips the copy.
class Reshape : public Layer {
 public:
  explicit Reshape(Shape target) : target_(std::move(target)) {}
  std::string type() const override { return "Reshape"; }
  Shape build(const Shape& input) override;
  void forward(const float* x, float* y, int64_t n, const StepContext& ctx) override;
  void backward(const float* x, const float* y, float* dy, float* dx, int64_t n, const StepContext& ctx) override;
  bool isReshape() const override { return true; }

 private:
  Shape target_;
};

// Inverted dropout: kept units are scaled by 1/(1-rate) in training, identity in inference.
// The mask of element j of a sample is a pure function of (seed, layer, step, global sample index, j),
// so it does not change when the batch is split across replicas differently.
class Dropout : public Layer {
 public:
  Dropout(double rate, uint64_t layerSalt) : rate_(rate), salt_(layerSalt) {}
  std::string type() const override { return "Dropout"; }
  Shape build(const Shape& input) override;
  void forward(const float* x, float* y, int64_t n, const StepContext& ctx) override;
  void backward(const float* x, const float* y, float* dy, float* dx, int64_t n, const StepContext& ctx) override;
  double rate() const { return rate_; }
  uint64_t salt() const { return salt_; }  // keys the mask with the seed (the GPU backend needs it too)

 private:
  double rate_;
  uint64_t salt_;
  std::vector<uint8_t> mask_;  // last training forward's mask, used by backward
};

}  // namespace ml
