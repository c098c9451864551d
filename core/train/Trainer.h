// The training loop around the mirrored strategy: epochs, per-epoch shuffling keyed by seed,
// the learning-rate scaling rule with warm-up, validation, replica checksums, divergence and
// cancellation, and the telemetry events everyone else consumes. The CLI and the studio both
// drive training through this class; it never prints.
#pragma once
#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "data/Dataset.h"
#include "distribute/MirroredStrategy.h"
#include "project/Project.h"
#include "telemetry/Channel.h"
#include "train/Checkpoint.h"
#include "train/RunPlan.h"

namespace ml {

class GpuSampler;

// What the trainer asks of the store that records its run (RecordedRun answers from its
// Recorder): the store's path, beside which checkpoints go; the stored run's id, which names
// them and which the trainer waits for before its first step (a process killed at any step then
// leaves a stored run); and a wait until the store holds every event published so far.
class RunRecord {
 public:
  virtual ~RunRecord() = default;
  virtual const std::string& storePath() const = 0;
  // The stored run's id, once its start is committed (a bounded wait); nullopt: not stored.
  virtual std::optional<int64_t> awaitRunId() = 0;
  // Returns once the store holds every event published so far (through `step`); false when it
  // cannot say so (a failed write: the recorder aborts the run; or a timeout). The trainer calls
  // it after each step, so a store that fails stops the run within one step, and before each
  // checkpoint is written, so that a checkpoint is never ahead of the stored steps: a process
  // killed between the two writes resumes from an older checkpoint (the store drops the rows
  // after it), never with a hole in its history. A checkpoint the store cannot confirm is not
  // written.
  virtual bool awaitStep(int64_t step) = 0;
};

struct TrainerOptions {
  int64_t maxSteps = 0;  // stop after this many updates (0: all epochs)
  std::string runName;
  double sampleInterval = 0.1;  // seconds between device samples
  // GPU runs: seconds between NVML samples of each physical GPU, taken on a thread of their own
  // (GpuTelemetry.h); they replace the computed samples while NVML answers.
  double gpuSampleInterval = 0.5;
  // Early stopping (sweeps): end the run, finished, after this many epochs in a row without a
  // lower validation loss (training loss when there is no validation set); 0: never.
  int stopAfterNoImprovement = 0;
  // The run's record in a store (RecordedRun sets it; not owned): checkpoints (the project's
  // training.checkpoint_every / checkpoint_keep) go beside that store, named by the stored run's
  // id. Null: not recorded, no checkpoints.
  RunRecord* record = nullptr;
  // Go on from this checkpoint (checked against the model, the run and the global batch: a
  // UserError says why it does not fit). The run keeps the checkpoint's run id.
  std::optional<Checkpoint> resume;
  // An injected kill (kill@step=N) sends SIGKILL to this process, as a power cut would. Where the
  // process must survive it (the studio, tests), the run ends failed with this reason instead,
  // resumable from its checkpoints like a killed one.
  std::string killEndsRunWith;
  bool watchdog = true;  // false only to measure what the watchdog costs (bench_telemetry)
  // Several workers (mpirun): this process is one of them and trains its devices as local
  // replicas of one run (see MirroredStrategy). Not owned; null: one process.
  WorkerGroup* workers = nullptr;
};

class Trainer {
 public:
  // The data set is shared so the studio can keep it loaded between runs.
  Trainer(Project project, std::shared_ptr<const DataSplit> data, TelemetryHub& hub, TrainerOptions options = {});
  ~Trainer();

  // Runs to the end on the calling thread. Never throws for run-time failures: they end as a
  // RunFinished event (also returned) with status failed / diverged / cancelled.
  RunFinished run();
  void requestCancel() {
    cancel_.store(true);
    resume();
  }
  // Ends the run at the next step as failed with this reason (the recorder calls it, from its
  // thread, when the store cannot be written: a run nobody can record must not go on as if).
  void abort(const std::string& reason);
  void setPaused(bool paused);
  void resume() { setPaused(false); }
  bool paused() const { return paused_.load(); }

  const RunPlan& plan() const { return plan_; }
  MirroredStrategy& strategy() { return *strategy_; }
  const Project& project() const { return project_; }
  nlohmann::json effectiveConfig() const;
  std::vector<std::string> startLines() const;
  const FaultPlan& faults() const { return strategy_->faults(); }
  // The watchdog's diagnosis when it stopped the run for a hang and run() has still not returned
  // graceSeconds later (a replica that no release reaches): the caller records the run failed
  // with it and leaves instead of waiting forever. Empty otherwise.
  std::string stuckFor(double graceSeconds) const;

 private:
  double wall() const;
  void checkFitsData(const Loss& loss, MetricKind metric) const;
  void restore(const Checkpoint& c);
  void writeCheckpoint(const TrainPosition& at);
  std::string abortReason() const;

  // run()'s parts (TrainLoop.cpp), in the order a step meets them. Loop is one run's state.
  struct Loop;
  struct Stepped;
  void startRun(Loop& L);
  RunStarted startedEvent(const Loop& L) const;
  void beginEpoch(Loop& L);
  static void nextEpoch(Loop& L);
  std::optional<RunFinished> stopVotes(Loop& L);
  double scheduledLr(const Loop& L) const;
  Stepped step(Loop& L);
  RunFinished diverged(const Loop& L, const StepResult& r) const;
  void publishStep(Loop& L, Stepped& st);
  void sampleUtilization(Loop& L, double now);
  TrainPosition position(const Loop& L) const;
  void checkpointAfterStep(const Loop& L);
  void checkpointAfterEpoch(const Loop& L);
  void killFault(int64_t step);
  void killNow();  // an injected kill (FaultPlan::killStep)
  std::optional<RunFinished> endEpoch(Loop& L);
  EpochEvent epochFigures(const Loop& L) const;
  std::optional<RunFinished> syncCheck(const Loop& L, EpochEvent& ep);
  void evaluateValidation(Loop& L, EpochEvent& ep);
  std::optional<RunFinished> earlyStop(Loop& L, const EpochEvent& ep);
  RunFinished finish(const Loop& L, RunFinished end);

  Project project_;
  std::shared_ptr<const DataSplit> data_;
  TelemetryHub& hub_;
  TrainerOptions options_;
  RunPlan plan_;
  std::unique_ptr<MirroredStrategy> strategy_;
  std::atomic<bool> cancel_{false}, paused_{false};
  mutable std::mutex abortMu_;
  std::string abortReason_;  // set by abort(): the run ends failed instead of cancelled
  std::mutex pauseMu_;
  std::condition_variable pauseCv_;
  std::optional<int64_t> runId_;    // for checkpoints, once known
  std::atomic<int64_t> hangNs_{0};  // steady time the watchdog stopped the run (0: it did not)
  int64_t t0_ = 0;
  // Real time spent paused: wall() leaves it out. Written on the training thread under clockMu_,
  // which the NVML sampler's thread holds while it reads the clock and publishes (inPause_: skip).
  int64_t pausedNs_ = 0;
  std::mutex clockMu_;
  bool inPause_ = false;
  void waitWhilePaused();
  // NVML telemetry (GpuTelemetry.cpp): set up with the strategy, running from RunStarted to
  // RunFinished; telemetryLine_ is the start line that says where device samples come from.
  void setUpGpuTelemetry();
  void startGpuTelemetry();
  void stopGpuTelemetry();
  bool nvmlSampling() const;  // NVML samples replace the computed ones (until NVML fails)
  std::string telemetryLine_;
  std::string teamNote_;                    // why a single CPU replica runs on one thread (nn/TeamSize.h); "" otherwise
  std::unique_ptr<GpuSampler> gpuSampler_;  // last: stopped before the members its thread uses
};

// Evaluates a data set (all samples, in order) with the strategy.
EvalResult evaluateAll(MirroredStrategy& s, const Dataset& data, float* outputs = nullptr);
// Per-epoch shuffle: a permutation of [0, n) keyed by (seed, epoch), independent of replicas.
std::vector<int64_t> epochOrder(int64_t n, uint64_t seed, int epoch);

}  // namespace ml
