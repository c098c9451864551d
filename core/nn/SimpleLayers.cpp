#include "nn/SimpleLayers.h"

#include <algorithm>

#include "Error.h"
#include "random/Rng.h"

namespace ml {

Shape ActivationLayer::build(const Shape& input) {
  inputShape = outputShape = input;
  return outputShape;
}

void ActivationLayer::forward(const float* x, float* y, int64_t n, const StepContext&) {
  const int64_t k = outFeatures();
  std::copy(x, x + n * k, y);
  activationForward(act_, y, n, k);
}

void ActivationLayer::backward(const float*, const float* y, float* dy, float* dx, int64_t n, const StepContext&) {
  if (!dx) return;
  if (fusedSoftmax_) {  // set only for softmax+CE or sigmoid+BCE (configureLoss)
    std::copy(dy, dy + n * outFeatures(), dx);
    return;
  }
  activationBackward(act_, y, dy, dx, n, outFeatures());
}

Shape Flatten::build(const Shape& input) {
  inputShape = input;
  outputShape = {numel(input)};
  return outputShape;
}

void Flatten::forward(const float* x, float* y, int64_t n, const StepContext&) {
  if (x != y) std::copy(x, x + n * inFeatures(), y);
}

void Flatten::backward(const float*, const float*, float* dy, float* dx, int64_t n, const StepContext&) {
  if (dx && dx != dy) std::copy(dy, dy + n * inFeatures(), dx);
}

Shape Reshape::build(const Shape& input) {
  const std::string who = "layer '" + name + "' (Reshape)";
  int64_t known = 1, unknown = -1;
  for (size_t i = 0; i < target_.size(); ++i) {
    if (target_[i] == -1 && unknown < 0)
      unknown = static_cast<int64_t>(i);
    else if (target_[i] <= 0)
      throw UserError(who + ": its Target shape " + shapeToString(target_, false) +
                      " must hold positive sizes (and at most one -1)");
    else
      known *= target_[i];
  }
  const int64_t total = numel(input);
  Shape out = target_;
  if (unknown >= 0) {
    if (total % known != 0)
      throw UserError(who + ": its input " + shapeToString(input) + " has " + std::to_string(total) +
                      " values, which do not divide into " + shapeToString(target_, false) +
                      ": choose a Target shape whose sizes multiply to " + std::to_string(total));
    out[static_cast<size_t>(unknown)] = total / known;
  } else if (known != total) {
    throw UserError(who + ": its input " + shapeToString(input) + " has " + std::to_string(total) +
                    " values but its Target shape " + shapeToString(target_, false) + " holds " + std::to_string(known) +
                    ": choose sizes that multiply to " + std::to_string(total) + " (or use -1 for one of them)");
  }
  if (target_.empty()) throw UserError(who + ": its Target shape is empty: give the shape of one sample, e.g. [28, 28, 1]");
  inputShape = input;
  outputShape = out;
  return outputShape;
}

void Reshape::forward(const float* x, float* y, int64_t n, const StepContext&) {
  if (x != y) std::copy(x, x + n * inFeatures(), y);
}

void Reshape::backward(const float*, const float*, float* dy, float* dx, int64_t n, const StepContext&) {
  if (dx && dx != dy) std::copy(dy, dy + n * inFeatures(), dx);
}

Shape Dropout::build(const Shape& input) {
  if (!(rate_ >= 0.0 && rate_ < 1.0))
    throw UserError("layer '" + name + "' (Dropout): rate must be in [0, 1), got " + std::to_string(rate_));
  inputShape = outputShape = input;
  return outputShape;
}

void Dropout::forward(const float* x, float* y, int64_t n, const StepContext& ctx) {
  const int64_t k = outFeatures();
  if (!ctx.training || rate_ == 0.0) {
    std::copy(x, x + n * k, y);
    return;
  }
  mask_.resize(static_cast<size_t>(n * k));
  const uint32_t threshold = static_cast<uint32_t>(rate_ * 65536.0);
  const float scale = static_cast<float>(1.0 / (1.0 - rate_));
  for (int64_t r = 0; r < n; ++r) {
    const uint64_t id = ctx.sampleIds ? static_cast<uint64_t>(ctx.sampleIds[r]) : static_cast<uint64_t>(r);
    const uint64_t base = hashKeys(ctx.seed ^ salt_, ctx.step, id);
    for (int64_t j0 = 0; j0 < k; j0 += 4) {
      uint64_t bits = splitmix64(base + static_cast<uint64_t>(j0));
      for (int64_t j = j0; j < std::min(k, j0 + 4); ++j, bits >>= 16) {
        const bool keep = static_cast<uint32_t>(bits & 0xFFFF) >= threshold;
        mask_[static_cast<size_t>(r * k + j)] = keep;
        y[r * k + j] = keep ? x[r * k + j] * scale : 0.0f;
      }
    }
  }
}

void Dropout::backward(const float*, const float*, float* dy, float* dx, int64_t n, const StepContext& ctx) {
  if (!dx) return;
  const int64_t total = n * outFeatures();
  if (!ctx.training || rate_ == 0.0) {
    std::copy(dy, dy + total, dx);
    return;
  }
  const float scale = static_cast<float>(1.0 / (1.0 - rate_));
  for (int64_t i = 0; i < total; ++i) dx[i] = mask_[static_cast<size_t>(i)] ? dy[i] * scale : 0.0f;
}

}  // namespace ml
