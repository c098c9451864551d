// Optimizers with Keras' update formulas and defaults, over one flat parameter buffer.
// grads are SUMS over the global batch; gradScale (1/B) turns them into the mean gradient,
// folded into the update so that no extra pass over the gradients is needed.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nn/OptimizerConstants.h"
#include "nn/Specs.h"

namespace ml {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  static std::unique_ptr<Optimizer> make(const OptimizerSpec& spec, int64_t paramCount);

  // One update: params -= f(gradScale * grads) at learning rate lr. Increments iterations().
  void step(std::span<float> params, std::span<const float> grads, float gradScale, float lr) {
    beginStep(lr);
    update(0, params, grads, gradScale);
  }
  // The same update in pieces: beginStep once, then update() over disjoint ranges that together
  // cover the buffer (offset = where `params` starts in it). The update is element-wise, so the
  // pieces give exactly the bits of one whole step; the pieces' gradients may live in different
  // buffers (a replica reads each reduced chunk where the all-reduce left it).
  virtual void beginStep(float lr) = 0;
  virtual void update(size_t offset, std::span<float> params, std::span<const float> grads, float gradScale) = 0;
  virtual std::string name() const = 0;
  int64_t iterations() const { return iterations_; }
  // Optimizer state buffers (Keras calls them slots), for checksums and tests.
  virtual std::vector<std::span<const float>> stateBuffers() const { return {}; }
  // Puts back slots (stateBuffers' order and sizes) and the step counter saved by a checkpoint,
  // so that the next update gives the bits an uninterrupted run would. Throws UserError on sizes.
  void restore(const std::vector<std::vector<float>>& slots, int64_t iterations);

 protected:
  int64_t iterations_ = 0;
};

// Keras SGD: v = momentum * v - lr * g; p += v (or p += momentum * v - lr * g with Nesterov).
class Sgd : public Optimizer {
 public:
  Sgd(const OptimizerSpec& spec, int64_t n) : momentum_(static_cast<float>(spec.momentum)), nesterov_(spec.nesterov) {
    if (momentum_ != 0.0f) velocity_.assign(static_cast<size_t>(n), 0.0f);
  }
  void beginStep(float lr) override;
  void update(size_t offset, std::span<float> params, std::span<const float> grads, float gradScale) override;
  std::string name() const override { return "sgd"; }
  std::vector<std::span<const float>> stateBuffers() const override { return {velocity_}; }

 private:
  float momentum_;
  bool nesterov_;
  float lr_ = 0;
  std::vector<float> velocity_;
};

// Keras Adam: m, v moments; alpha = lr * sqrt(1 - b2^t) / (1 - b1^t); p -= alpha * m / (sqrt(v) + eps).
class Adam : public Optimizer {
 public:
  Adam(const OptimizerSpec& spec, int64_t n)
      : b1_(spec.beta1),
        b2_(spec.beta2),
        eps_(static_cast<float>(spec.epsilon)),
        m_(static_cast<size_t>(n), 0.0f),
        v_(static_cast<size_t>(n), 0.0f) {}
  void beginStep(float lr) override;
  void update(size_t offset, std::span<float> params, std::span<const float> grads, float gradScale) override;
  std::string name() const override { return "adam"; }
  std::vector<std::span<const float>> stateBuffers() const override { return {m_, v_}; }

 private:
  double b1_, b2_;
  float eps_;
  AdamConstants constants_{};  // this step's bias-corrected rate and Keras' coefficients
  std::vector<float> m_, v_;
};

// Keras RMSprop (centered = false): v = rho v + (1 - rho) g^2; p -= lr g / sqrt(v + eps),
// with momentum: mom = momentum * mom + lr g / sqrt(v + eps); p -= mom. (PyTorch's RMSprop divides
// by sqrt(v) + eps instead; the difference shows while v is not much larger than eps.)
class RmsProp : public Optimizer {
 public:
  RmsProp(const OptimizerSpec& spec, int64_t n)
      : rho_(spec.rho),
        momentum_(static_cast<float>(spec.momentum)),
        eps_(static_cast<float>(spec.epsilon)),
        v_(static_cast<size_t>(n), 0.0f) {
    if (momentum_ != 0.0f) mom_.assign(static_cast<size_t>(n), 0.0f);
  }
  void beginStep(float lr) override;
  void update(size_t offset, std::span<float> params, std::span<const float> grads, float gradScale) override;
  std::string name() const override { return "rmsprop"; }
  std::vector<std::span<const float>> stateBuffers() const override { return {v_, mom_}; }

 private:
  double rho_;  // as set: Keras takes 1 - rho in double (nn/OptimizerConstants.h)
  float momentum_, eps_;
  float lr_ = 0;
  std::vector<float> v_, mom_;
};

}  // namespace ml
