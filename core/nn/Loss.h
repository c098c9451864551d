// Losses and metrics over a batch. Everything returns SUMS over the rows, not means: replicas
// produce sums over their shards, the all-reduce adds them, and the sum is divided by the
// global batch once (see the mirrored step in DESIGN.md).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ml {

// The values are the CUDA plugin's ABI: append only.
enum class LossKind { SparseCategoricalCrossentropy, CategoricalCrossentropy, MeanSquaredError, BinaryCrossentropy };

// Keras' names: sparse_categorical_crossentropy | categorical_crossentropy | mean_squared_error
// (also read as "mse") | binary_crossentropy (targets 0/1 per output; mean over the outputs of a
// sample, as Keras). Text is read once, at the edge (the project reader); below it a loss is its kind.
const char* toString(LossKind k);
std::optional<LossKind> parseLossKind(std::string_view name);
inline constexpr const char* kLossNames =
    "sparse_categorical_crossentropy, categorical_crossentropy, binary_crossentropy, mean_squared_error";

class Loss {
 public:
  static Loss make(LossKind kind, bool fromLogits);

  LossKind kind() const { return kind_; }
  bool fromLogits() const { return fromLogits_; }
  bool isClassification() const { return kind_ != LossKind::MeanSquaredError; }
  std::string name() const { return toString(kind_); }
  // Targets per sample the loss expects: 1 (class index) for sparse CE, k for the others.
  int64_t targetDim(int64_t outputs) const { return kind_ == LossKind::SparseCategoricalCrossentropy ? 1 : outputs; }

  // Set when the model's output is a softmax (sigmoid for binary_crossentropy) and the loss takes
  // probabilities: the gradient is then taken with respect to the activation's input (p - y),
  // which is exact and stable.
  void setFusedSoftmax(bool on) { fused_ = on; }
  bool fusedSoftmax() const { return fused_; }

  // pred (n, k), targets (n, targetDim) -> returns sum of losses; grad (n, k) = d(sum)/d(pred)
  // (or d/d(logits) when fused). grad may be null for evaluation.
  double compute(const float* pred, const float* targets, int64_t n, int64_t k, float* grad) const;

 private:
  LossKind kind_ = LossKind::SparseCategoricalCrossentropy;
  bool fromLogits_ = false;
  bool fused_ = false;
};

// BinaryAccuracy thresholds probabilities at 0.5; BinaryAccuracyLogits (binary_accuracy with a
// from_logits loss) thresholds logits at 0, the same decision.
enum class MetricKind { Accuracy, MeanAbsoluteError, None, BinaryAccuracy, BinaryAccuracyLogits };

// The main metric of a project: accuracy for classification, mae for regression.
std::optional<MetricKind> metricNamed(const std::string& name);  // accuracy | acc | binary_accuracy | mae | mean_absolute_error
inline constexpr const char* kMetricNames = "accuracy, binary_accuracy, mae";
MetricKind parseMetric(const std::string& name);
// The metric a project's name means with its loss, as Keras picks it: "accuracy" is
// binary_accuracy with binary_crossentropy; "" is the loss's default metric.
MetricKind metricFor(const std::string& name, const Loss& loss);
const char* toString(MetricKind m);
// Sum over rows: correct predictions (accuracy) or absolute errors averaged over outputs (mae).
double metricSum(MetricKind m, const float* pred, const float* targets, int64_t n, int64_t k, int64_t targetDim);

}  // namespace ml
