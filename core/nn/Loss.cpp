#include "nn/Loss.h"

#include <algorithm>
#include <cmath>

#include "Error.h"
#include "Field.h"
#include "Names.h"

namespace ml {

static constexpr float kEps = 1e-7f;  // Keras' epsilon for clipping probabilities

Loss Loss::make(LossKind kind, bool fromLogits) {
  Loss l;
  l.kind_ = kind;
  l.fromLogits_ = fromLogits;
  return l;
}

const char* toString(LossKind k) {
  switch (k) {
    case LossKind::SparseCategoricalCrossentropy: return "sparse_categorical_crossentropy";
    case LossKind::CategoricalCrossentropy: return "categorical_crossentropy";
    case LossKind::MeanSquaredError: return "mean_squared_error";
    case LossKind::BinaryCrossentropy: return "binary_crossentropy";
  }
  return "";
}

std::optional<LossKind> parseLossKind(std::string_view name) {
  if (name == "mse") return LossKind::MeanSquaredError;  // Keras' alias
  const LossKind all[] = {LossKind::SparseCategoricalCrossentropy, LossKind::CategoricalCrossentropy, LossKind::MeanSquaredError,
                          LossKind::BinaryCrossentropy};
  return fromName(name, all);
}

// Target distribution of row r as a callable t(j).
static inline float targetAt(LossKind kind, const float* targets, int64_t r, int64_t j, int64_t k) {
  if (kind == LossKind::SparseCategoricalCrossentropy) return static_cast<int64_t>(targets[r]) == j ? 1.0f : 0.0f;
  return targets[r * k + j];
}

// Binary cross-entropy, the mean over the k outputs of a sample. On logits z: max(z, 0) - z t +
// log(1 + e^-|z|), gradient sigmoid(z) - t; fused (p is a sigmoid output): gradient p - t with
// respect to the sigmoid's input; on probabilities: clipped like Keras, gradient -t/p + (1-t)/(1-p).
static double binaryCrossentropy(const float* pred, const float* targets, int64_t n, int64_t k, float* grad, bool logits,
                                 bool fused) {
  double total = 0;
  const float invK = 1.0f / static_cast<float>(k);
  for (int64_t i = 0; i < n * k; ++i) {
    const float p = pred[i], t = targets[i];
    double l;
    float g;
    if (logits) {
      l = std::max(p, 0.0f) - static_cast<double>(p) * t + std::log1p(std::exp(-std::fabs(static_cast<double>(p))));
      g = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(p)))) - t;
    } else {
      const float q = std::clamp(p, kEps, 1.0f - kEps);
      l = -(t * std::log(static_cast<double>(q)) + (1.0 - t) * std::log(1.0 - static_cast<double>(q)));
      const bool clipped = p < kEps || p > 1.0f - kEps;
      g = fused ? p - t : (clipped ? 0.0f : -t / p + (1.0f - t) / (1.0f - p));
    }
    total += l / static_cast<double>(k);
    if (grad) grad[i] = g * invK;
  }
  return total;
}

double Loss::compute(const float* pred, const float* targets, int64_t n, int64_t k, float* grad) const {
  if (kind_ == LossKind::BinaryCrossentropy) return binaryCrossentropy(pred, targets, n, k, grad, fromLogits_, fused_);
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

std::optional<MetricKind> metricNamed(const std::string& name) {
  if (name == "accuracy" || name == "acc") return MetricKind::Accuracy;
  if (name == "mae" || name == "mean_absolute_error") return MetricKind::MeanAbsoluteError;
  if (name == "binary_accuracy") return MetricKind::BinaryAccuracy;
  return std::nullopt;
}

MetricKind parseMetric(const std::string& name) {
  if (const auto m = metricNamed(name)) return *m;
  throw fieldError("training.metrics", ": unknown metric '" + name + "' (allowed: " + kMetricNames + ")");
}

MetricKind metricFor(const std::string& name, const Loss& loss) {
  const bool binary = loss.kind() == LossKind::BinaryCrossentropy;
  MetricKind m =
      name.empty() ? (loss.isClassification() ? MetricKind::Accuracy : MetricKind::MeanAbsoluteError) : parseMetric(name);
  if (m == MetricKind::Accuracy && binary) m = MetricKind::BinaryAccuracy;
  if (m == MetricKind::BinaryAccuracy && binary && loss.fromLogits()) m = MetricKind::BinaryAccuracyLogits;
  return m;
}

const char* toString(MetricKind m) {
  switch (m) {
    case MetricKind::Accuracy: return "accuracy";
    case MetricKind::MeanAbsoluteError: return "mae";
    case MetricKind::None: return "none";
    case MetricKind::BinaryAccuracy:
    case MetricKind::BinaryAccuracyLogits: return "binary_accuracy";
  }
  return "none";
}

double metricSum(MetricKind m, const float* pred, const float* targets, int64_t n, int64_t k, int64_t targetDim) {
  double s = 0;
  for (int64_t r = 0; r < n; ++r) {
    const float* p = pred + r * k;
    if (m == MetricKind::BinaryAccuracy || m == MetricKind::BinaryAccuracyLogits) {
      // The share of a sample's outputs on the right side of the threshold (Keras: mean over outputs).
      const float threshold = m == MetricKind::BinaryAccuracy ? 0.5f : 0.0f;
      int64_t right = 0;
      for (int64_t j = 0; j < k; ++j) right += (p[j] > threshold) == (targets[r * targetDim + j] > 0.5f) ? 1 : 0;
      s += static_cast<double>(right) / static_cast<double>(k);
    } else if (m == MetricKind::Accuracy) {
      const int64_t guess = std::max_element(p, p + k) - p;
      int64_t truth;
      if (targetDim == 1)
        truth = static_cast<int64_t>(targets[r]);
      else
        truth = std::max_element(targets + r * targetDim, targets + (r + 1) * targetDim) - (targets + r * targetDim);
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
