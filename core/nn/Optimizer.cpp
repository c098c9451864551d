#include "nn/Optimizer.h"

#include <algorithm>
#include <cmath>

#include "Error.h"
#include "FieldNames.h"

namespace ml {

std::unique_ptr<Optimizer> Optimizer::make(const OptimizerSpec& spec, int64_t n) {
  if (spec.name == "sgd") return std::make_unique<Sgd>(spec, n);
  if (spec.name == "adam") return std::make_unique<Adam>(spec, n);
  if (spec.name == "rmsprop") return std::make_unique<RmsProp>(spec, n);
  throw UserError(fieldInWords("training.optimizer.name") + ": unknown optimizer '" + spec.name +
                  "' (allowed: sgd, adam, rmsprop)");
}

void Optimizer::restore(const std::vector<std::vector<float>>& slots, int64_t iterations) {
  const auto mine = stateBuffers();
  if (slots.size() != mine.size())
    throw UserError("the checkpoint holds " + std::to_string(slots.size()) + " optimizer slot(s) but " + name() + " has " +
                    std::to_string(mine.size()));
  for (size_t i = 0; i < mine.size(); ++i)
    if (slots[i].size() != mine[i].size())
      throw UserError("optimizer slot " + std::to_string(i) + " of the checkpoint has " + std::to_string(slots[i].size()) +
                      " values, " + name() + " needs " + std::to_string(mine[i].size()));
  // The buffers are this optimizer's own non-const vectors; stateBuffers() only hands out views.
  for (size_t i = 0; i < mine.size(); ++i) std::copy(slots[i].begin(), slots[i].end(), const_cast<float*>(mine[i].data()));
  iterations_ = iterations;
}

void Sgd::beginStep(float lr) {
  lr_ = lr;
  ++iterations_;
}

void Sgd::update(size_t offset, std::span<float> p, std::span<const float> g, float scale) {
  const size_t n = p.size();
  const float lr = lr_;
  float* __restrict pp = p.data();
  const float* __restrict gg = g.data();
  if (momentum_ == 0.0f) {
    for (size_t i = 0; i < n; ++i) pp[i] -= lr * (gg[i] * scale);
  } else {
    float* __restrict v = velocity_.data() + offset;
    const float m = momentum_;
    if (nesterov_) {
      for (size_t i = 0; i < n; ++i) {
        const float gi = gg[i] * scale;
        v[i] = m * v[i] - lr * gi;
        pp[i] += m * v[i] - lr * gi;
      }
    } else {
      for (size_t i = 0; i < n; ++i) {
        v[i] = m * v[i] - lr * (gg[i] * scale);
        pp[i] += v[i];
      }
    }
  }
}

void Adam::beginStep(float lr) {
  ++iterations_;
  const double t = static_cast<double>(iterations_);
  alpha_ = static_cast<float>(lr * std::sqrt(1.0 - std::pow(b2_, t)) / (1.0 - std::pow(b1_, t)));
}

void Adam::update(size_t offset, std::span<float> p, std::span<const float> g, float scale) {
  const float alpha = alpha_;
  const float b1 = static_cast<float>(b1_), b2 = static_cast<float>(b2_);
  const float c1 = 1.0f - b1, c2 = 1.0f - b2, eps = eps_;
  const size_t n = p.size();
  float* __restrict pp = p.data();
  const float* __restrict gg = g.data();
  float* __restrict m = m_.data() + offset;
  float* __restrict v = v_.data() + offset;
  for (size_t i = 0; i < n; ++i) {
    const float gi = gg[i] * scale;
    m[i] = b1 * m[i] + c1 * gi;
    v[i] = b2 * v[i] + c2 * gi * gi;
    pp[i] -= alpha * m[i] / (std::sqrt(v[i]) + eps);
  }
}

void RmsProp::beginStep(float lr) {
  lr_ = lr;
  ++iterations_;
}

void RmsProp::update(size_t offset, std::span<float> p, std::span<const float> g, float scale) {
  const size_t n = p.size();
  const float lr = lr_;
  float* __restrict pp = p.data();
  const float* __restrict gg = g.data();
  float* __restrict v = v_.data() + offset;
  const float rho = rho_, c = 1.0f - rho_, eps = eps_;
  if (momentum_ == 0.0f) {
    for (size_t i = 0; i < n; ++i) {
      const float gi = gg[i] * scale;
      v[i] = rho * v[i] + c * gi * gi;
      pp[i] -= lr * gi / std::sqrt(v[i] + eps);
    }
  } else {
    float* __restrict mom = mom_.data() + offset;
    for (size_t i = 0; i < n; ++i) {
      const float gi = gg[i] * scale;
      v[i] = rho * v[i] + c * gi * gi;
      mom[i] = momentum_ * mom[i] + lr * gi / std::sqrt(v[i] + eps);
      pp[i] -= mom[i];
    }
  }
}

}  // namespace ml
