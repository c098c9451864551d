// Checkpoints (.mlck): everything a run needs to go on exactly where it was — the weights, the
// optimizer's slots and step counter, the data position (epoch, step within it, the shuffle key),
// the RNG keys, the epoch's running sums and the run's id. Written atomically (temporary file,
// fsync, rename) beside the run store, in <store>.checkpoints/run-<id>/, with an FNV-1a checksum
// over every byte, so a damaged or foreign file is refused with the reason before anything changes.
//   8 bytes "MLCHKPT1" | u32 version | u32 L | L bytes JSON header | u64 P | P x f32 parameters |
//   u32 S | S x (u64 n | n x f32 slot) | u64 FNV-1a of every byte between the magic and itself
// (from version 2 with the standard offset basis, so any FNV-1a tool verifies it). A checkpoint
// whose header values no run can have, or whose weights hold NaN or infinity, is refused.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ml {

inline constexpr uint32_t kCheckpointVersion = 2;  // 1: the FNV-1a checksum started from kFnvLegacyBasis
inline constexpr int kCheckpointsKept = 3;

// Where the training loop is and its running figures, so a resumed run reports what an
// uninterrupted one would.
struct TrainPosition {
  int64_t step = 0;         // optimizer steps done
  int epoch = 1;            // the epoch in progress (from 1)
  int64_t stepInEpoch = 0;  // its steps done
  double wall = 0;          // training seconds so far (the resumed run's clock goes on from here)
  double epochStart = 0;    // wall time the epoch began
  double lossSum = 0, metricSum = 0, arTime = 0, waitTime = 0, allTime = 0;
  int64_t samples = 0;
  std::optional<double> lastValLoss, lastValMetric;
  double bestLoss = 0;  // early stopping
  int sinceBest = 0;
};

struct Checkpoint {
  int64_t runId = 0;
  nlohmann::json architecture;  // architectureJson(model)
  std::string optimizer;        // "adam"
  uint64_t seed = 0;            // keys the shuffle (seed, epoch) and dropout (seed, step, sample)
  uint64_t shuffleKey = 0;      // the key of the epoch in progress, checked on load
  int64_t globalBatch = 0;
  int replicas = 0;
  std::string devices;  // "cpu:3"
  TrainPosition at;
  std::vector<float> params;
  std::vector<std::vector<float>> optimizerSlots;  // optimizerSlots()'s order
  int64_t optimizerIterations = 0;
  // mixed_float16 with loss scaling: the next step's scale and the finite steps since it last
  // changed, so a resumed run goes on with the scale it had (absent: no loss scaling).
  std::optional<double> lossScale;
  int64_t lossScaleGoodSteps = 0;
};

// Returns the checksum written. Throws UserError naming the file when it cannot be written, or
// naming the layer when the weights hold NaN or infinity.
uint64_t saveCheckpoint(const Checkpoint& c, const std::string& path);
// Throws UserError: missing file, not a checkpoint, other version, truncated, damaged (checksum,
// header values), NaN or infinite weights or optimizer state (naming the layer).
Checkpoint loadCheckpoint(const std::string& path);

// Files of a run live in checkpointFolder(store, id) (store/RunStore.h).
std::string checkpointFile(const std::string& folder, int64_t step);  // folder/step-00000042.mlck

}  // namespace ml
