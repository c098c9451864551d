#include "nn/Loss.h"

#include <algorithm>
#include <cmath>

#include "Error.h"

namespace ml {

static constexpr float kEps = 1e-7f;  // Keras' epsilon for clipping probabilities

Loss Loss::make(const std::string& name, bool fromLogits) {
  Loss l;
  l.fromLogits_ = fromLogits;
  if (name == "sparse_categorical_crossentropy") l.kind_ = LossKind::SparseCategoricalCrossentropy;
  else if (name == "categorical_crossentropy") l.kind_ = LossKind::CategoricalCrossentropy;
  else if (name == "mean_squared_error" || name == "mse") l.kind_ = LossKind::MeanSquaredError;
  else
    throw UserError("training.loss: unknown loss '" + name +
                    "' (allowed: sparse_categorical_crossentropy, categorical_crossentropy, mean_squared_error)");
  return l;
}

std::string Loss::name() const {
  switch (kind_) {
    case LossKind::SparseCategoricalCrossentropy: return "sparse_categorical_crossentropy";
    case LossKind::CategoricalCrossentropy: return "categorical_crossentropy";
    case LossKind::MeanSquaredError: return "mean_squared_error";
  }
  return "";
}

// Target distribution of row r as a callable t(j).
static inline float targetAt(LossKind kind, const float* targets, int64_t r, int64_t j, int64_t k) {
  if (kind == LossKind::SparseCategoricalCrossentropy) return static_cast<int64_t>(targets[r]) == j ? 1.0f : 0.0f;
  return targets[r * k + j];
}

double Loss::compute(const float* pred, const float* targets, int64_t n, int64_t k, float* grad) const {
  double total = 0;
  if (kind_ == LossKind::MeanSquaredError) {
    for (int64_t r = 0; r < n; ++r) {
      double s = 0;
      for (int64_t j = 0; j < k; ++j) {
        const float d = pred[r * k + j] - targets[r * k + j];
        s += static_cast<double>(d) * d;
        if (grad) grad[r * k + j] = 2.0f * d / static_cast<float>(k);
      }
      total += s / static_cast<double>(k);
    }
    return total;
  }
  for (int64_t r = 0; r < n; ++r) {
    const float* p = pred + r * k;
    float* g = grad ? grad + r * k : nullptr;
    if (fromLogits_) {
      // log-softmax with the max subtracted; grad = softmax - target.
      const float mx = *std::max_element(p, p + k);
      double sum = 0;
      for (int64_t j = 0; j < k; ++j) sum += std::exp(static_cast<double>(p[j] - mx));
      const double logSum = std::log(sum) + mx;
      for (int64_t j = 0; j < k; ++j) {
        const float t = targetAt(kind_, targets, r, j, k);
        if (t != 0.0f) total -= t * (p[j] - logSum);
        if (g) g[j] = static_cast<float>(std::exp(p[j] - logSum)) - t;
      }
    } else if (fused_) {
      // p is a softmax output; the gradient w.r.t. its logits is p - target (sum of targets = 1).
      for (int64_t j = 0; j < k; ++j) {
        const float t = targetAt(kind_, targets, r, j, k);
        if (t != 0.0f) total -= t * std::log(std::clamp(p[j], kEps, 1.0f - kEps));
        if (g) g[j] = p[j] - t;
      }
    } else {
      // Keras on probabilities: normalise rows to sum 1, clip, -sum t log p.
      double s = 0;
      for (int64_t j = 0; j < k; ++j) s += p[j];
      const float inv = static_cast<float>(1.0 / std::max(s, 1e-30));
      float tSum = 0;
      for (int64_t j = 0; j < k; ++j) tSum += targetAt(kind_, targets, r, j, k);
      for (int64_t j = 0; j < k; ++j) {
        const float t = targetAt(kind_, targets, r, j, k);
        const float q = p[j] * inv;
        const bool clipped = q < kEps || q > 1.0f - kEps;
        if (t != 0.0f) total -= t * std::log(std::clamp(q, kEps, 1.0f - kEps));
        // d/dp_j of -sum_i t_i log(p_i / S) = -t_j / p_j + tSum / S (the clip stops the first term).
        if (g) g[j] = (clipped || t == 0.0f ? 0.0f : -t / p[j]) + tSum * inv;
      }
    }
  }
  return total;
}

MetricKind parseMetric(const std::string& name) {
  if (name == "accuracy" || name == "acc") return MetricKind::Accuracy;
  if (name == "mae" || name == "mean_absolute_error") return MetricKind::MeanAbsoluteError;
  throw UserError("training.metrics: unknown metric '" + name + "' (allowed: accuracy, mae)");
}

const char* toString(MetricKind m) {
  switch (m) {
    case MetricKind::Accuracy: return "accuracy";
    case MetricKind::MeanAbsoluteError: return "mae";
    case MetricKind::None: return "none";
  }
  return "none";
}

double metricSum(MetricKind m, const float* pred, const float* targets, int64_t n, int64_t k, int64_t targetDim) {
  double s = 0;
  for (int64_t r = 0; r < n; ++r) {
    const float* p = pred + r * k;
    if (m == MetricKind::Accuracy) {
      const int64_t guess = std::max_element(p, p + k) - p;
      int64_t truth;
      if (targetDim == 1) truth = static_cast<int64_t>(targets[r]);
      else truth = std::max_element(targets + r * targetDim, targets + (r + 1) * targetDim) - (targets + r * targetDim);
      s += guess == truth ? 1.0 : 0.0;
    } else if (m == MetricKind::MeanAbsoluteError) {
      double e = 0;
      for (int64_t j = 0; j < k; ++j) e += std::fabs(p[j] - targets[r * targetDim + j]);
      s += e / static_cast<double>(k);
    }
  }
  return s;
}

}  // namespace ml
