// The one learning-rate scaling rule of Mirrorlab: the rate scales with the global batch relative
// to the batch it was chosen for. The trainer, the studio's sentence, the CLI, the lessons and the
// exported programs all take it from here, so they cannot disagree.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ml {

struct TrainingSpec;

// How the rate follows the global batch: not at all, in proportion, or by the square root.
enum class LrRule { None, Linear, Sqrt };
const char* toString(LrRule r);  // "none", "linear", "sqrt": the file's names
std::optional<LrRule> parseLrRule(std::string_view name);
inline constexpr const char* kLrRuleNames = "none, linear, sqrt";

struct LrScaling {
  LrRule rule = LrRule::None;
  double baseLr = 0;           // the rate in the project
  int64_t referenceBatch = 0;  // the global batch baseLr was chosen for
  int64_t globalBatch = 0;     // the global batch of this run
  double factor = 1;           // linear: global / reference; sqrt: its square root; none: 1
  double lr = 0;               // baseLr x factor
  // In words, naming both batches: "0.01 was set for a global batch of 16; the global batch is 48,
  // so linear scaling gives 0.01 x 3 = 0.03".
  std::string explain() const;
};

// The reference batch of a project: training.lr_reference_batch, or when that is 0 the batch_size
// field (per device or global), i.e. the global batch of one device (per-device mode) or the global
// batch itself (global mode).
int64_t lrReferenceBatch(const TrainingSpec& t);
double lrScaleFactor(LrRule rule, double globalBatch, double referenceBatch);
LrScaling scaleLearningRate(const TrainingSpec& t, int64_t globalBatch);

// The same rule as a Python expression for exported programs; it reads the variables named
// global_batch, REFERENCE_BATCH and LR_SCALING.
std::string lrScalingPython();

}  // namespace ml
