// BatchNormalization over the last axis (channels-last), Keras' arguments and weights: gamma
// (scale), beta (center), moving_mean, moving_variance, in that order in the flat buffer; the two
// moving statistics are non-trainable (zero gradient) and used at evaluation.
//
// Under mirrored training, "synchronized": false (TensorFlow's default) normalises each replica's
// shard with that shard's own mean and variance, so the result changes with the number of
// replicas; "synchronized": true all-reduces the per-channel sum and sum of squares (and, in
// backward, the sums of dy and dy*xhat) so every replica normalises with the global batch's
// statistics, as SyncBatchNorm does, and N replicas give the weights of one. In both modes the
// moving statistics are updated from the global batch's statistics (one small all-reduce), so
// they stay identical on every replica.
#pragma once
#include <vector>

#include "nn/Layer.h"

namespace ml {

// The moving mean and variance start at 0 and 1 and move towards each batch's statistics by
// (1 - momentum) per training pass: after `updates` passes they still hold momentum^updates of
// their start values, which evaluation uses. With Keras' 0.99, 200 steps leave 13%.
double movingStatsStartShare(double momentum, int64_t updates);
// The passes after which that share falls below `share` (0.01: 459 at momentum 0.99).
int64_t movingStatsSettleUpdates(double momentum, double share = 0.01);

class BatchNorm : public Layer {
 public:
  BatchNorm(double momentum, double epsilon, bool center, bool scale, bool synchronized)
      : momentum_(momentum), epsilon_(epsilon), center_(center), scale_(scale), synchronized_(synchronized) {}
  std::string type() const override { return "BatchNormalization"; }
  Shape build(const Shape& input) override;
  int64_t paramCount() const override { return channels() * ((scale_ ? 1 : 0) + (center_ ? 1 : 0) + 2); }
  int64_t nonTrainableCount() const override { return 2 * channels(); }
  void bind(float* params, float* grads) override;
  void initialize(uint64_t seed) override;
  void forward(const float* x, float* y, int64_t n, const StepContext& ctx) override;
  void backward(const float* x, const float* y, float* dy, float* dx, int64_t n, const StepContext& ctx) override;
  bool gradientsFinite() const override;
  bool needsReplicaSum() const override { return true; }
  nlohmann::json args() const override;

  int64_t channels() const { return inputShape.empty() ? 0 : inputShape.back(); }
  bool synchronized() const { return synchronized_; }
  double momentum() const { return momentum_; }
  double epsilon() const { return epsilon_; }
  bool center() const { return center_; }
  bool scale() const { return scale_; }
  const float* gamma() const { return gamma_; }  // null without scale
  const float* beta() const { return beta_; }    // null without center
  const float* movingMean() const { return movingMean_; }
  const float* movingVariance() const { return movingVar_; }

 private:
  // Per channel sums over the n rows of x: [sum x (C), sum x^2 (C), count].
  std::vector<double> moments(const float* x, int64_t n) const;

  double momentum_, epsilon_;
  bool center_, scale_, synchronized_;
  float *gamma_ = nullptr, *beta_ = nullptr, *movingMean_ = nullptr, *movingVar_ = nullptr;
  float *dgamma_ = nullptr, *dbeta_ = nullptr;
  // The last training forward's normalisation: per channel mean and 1/sqrt(var + eps), and the
  // number of values the statistics were taken over (this shard's, or the global batch's).
  std::vector<float> mean_, invStd_;
  double count_ = 0;
};

}  // namespace ml
