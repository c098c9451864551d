// The scaling experiment: the same model for 1, 2, 4, ... devices, keeping the global or the
// per-device batch, each a real (optionally stored) run; a row per device count with the median
// step time, samples/s, speed-up against the first row, efficiency and sync share, and a sentence
// that explains the result. `mirrorlab-cli scale` and the studio's Learn panel both run this.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/Dataset.h"
#include "learn/RunSequence.h"
#include "project/Project.h"
#include "telemetry/Channel.h"
#include "train/Trainer.h"

namespace ml {

enum class BatchPolicy { KeepGlobal, KeepPerDevice };
// "global" | "per-device"; throws UserError otherwise.
BatchPolicy parseBatchPolicy(const std::string& s);
const char* toString(BatchPolicy p);

struct ScalingOptions {
  std::string devices = "cpu:1,2,4";  // a sweep: cpu:1,2,4 (see parseDeviceSweep)
  BatchPolicy keep = BatchPolicy::KeepGlobal;
  int64_t steps = 200;        // optimizer updates per device count
  std::string storePath;      // record each row as a run there; "" records nothing
  std::string runNamePrefix;  // "" -> "<project name> scale"
};

struct ScalingRow {
  std::string devices;  // "cpu:2"
  int replicas = 1;
  int64_t globalBatch = 0;
  int64_t perReplicaBatch = 0;  // the largest shard
  double stepSeconds = 0;       // median over the steps after a short warm-up
  double samplesPerSecond = 0;  // global batch / median step time
  double syncShare = 0;         // (all-reduce + wait) / replica step time, summed over replicas
  double allreduceShare = 0;
  double waitShare = 0;
  double speedup = 1;            // samples/s against the first row
  double efficiency = 1;         // speed-up / (replicas / replicas of the first row)
  int threadsPerReplica = 1;     // one replica's thread team; several replicas: 1 each
  int hostCores = 0;             // this machine's logical cores (0: unknown)
  std::string note;              // why the speed-up is above what the cores allow (store/RunFigures.h)
  int64_t steps = 0;             // steps run
  std::optional<int64_t> runId;  // when recorded
};

struct ScalingResult {
  std::vector<ScalingRow> rows;  // the finished rows, in order
  bool completed = false;        // every row ran to its steps
  std::string message;           // why not completed
  std::string explanation;       // explainScaling(rows, ...)
};

class ScalingExperiment {
 public:
  // Throws UserError for a bad sweep or a batch the data cannot hold (before anything runs).
  ScalingExperiment(Project base, std::shared_ptr<const DataSplit> data, ScalingOptions options);

  // Every row's events in turn (each run begins with RunStarted). Closed when run() returns.
  TelemetryHub& hub() { return hub_; }
  // Called on run()'s thread: before row i trains (with the project as it will run) and after.
  std::function<void(size_t index, const Project& project, const RunPlan& plan)> onRowStarted;
  std::function<void(size_t index, const ScalingRow& row)> onRowFinished;

  // The projects of the rows, as they will run.
  const std::vector<Project>& projects() const { return projects_; }
  // Runs every row on the calling thread; a failed or cancelled run ends the experiment with
  // completed = false and the rows measured so far.
  ScalingResult run();
  void requestCancel();

 private:
  Project base_;
  std::shared_ptr<const DataSplit> data_;
  ScalingOptions options_;
  std::vector<Project> projects_;
  TelemetryHub hub_;
  RunSequence runs_;
};

// The row of one finished run from its steps (the first 10% of steps, at most 10, are warm-up).
ScalingRow scalingRowFromSteps(const std::string& devices, const RunPlan& plan, const std::vector<StepEvent>& steps);
// Fills speedup and efficiency against rows[0].
void computeSpeedups(std::vector<ScalingRow>& rows);
// One or two sentences: how far from ideal the largest row is, and why (sync share growth,
// devices beyond the host's cores, a per-device batch that grew the work).
std::string explainScaling(const std::vector<ScalingRow>& rows, BatchPolicy keep, int hostCores);

}  // namespace ml
