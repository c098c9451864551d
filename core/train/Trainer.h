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
#include "project/LrScaling.h"
#include "project/Project.h"
#include "telemetry/Channel.h"
#include "train/Checkpoint.h"

namespace ml {

class GpuSampler;

// The batch / learning-rate arithmetic of a run, computed before it starts (also for the UI's
// "what will happen" sentence and warnings).
struct RunPlan {
  int replicas = 1;
  int64_t globalBatch = 0;      // samples per optimizer update
  int64_t microBatch = 0;       // samples per micro-batch (globalBatch / accumulate)
  int64_t perReplicaBatch = 0;  // largest shard of a micro-batch
  int64_t smallestShard = 0;
  int accumulate = 1;
  int64_t trainSamples = 0;
  int64_t stepsPerEpoch = 0;
  int64_t lastBatch = 0;  // samples in the last (partial) update of an epoch
  double baseLr = 0, lr = 0, lrFactor = 1;
  std::string lrRule;  // none | linear | sqrt
  LrScaling scaling;   // the rule applied to this run's global batch
  double warmupEpochs = 0;
  std::vector<int64_t> lrDecayEpochs;  // step decay (Project.h)
  double lrDecayFactor = 0.1;
  // "multiplied by 0.1 after epochs 3 and 7", or empty without a step decay.
  std::string decayPhrase() const;
  std::vector<std::string> warnings;
  std::string sentence() const;  // "4 replicas x 64 = 256 samples per step; learning rate 0.004 (0.001 was set for ...)"
};

// Throws UserError for an impossible configuration (batch larger than the data set, ...).
RunPlan planRun(const Project& p, int replicas, int64_t trainSamples);

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
  // Checkpoints (the project's training.checkpoint_every / checkpoint_keep) go beside this run
  // store, in checkpointFolder(store, run id); "" writes none. runId gives the run's id in that
  // store (the recorder's; it may wait for the recorder to commit the run).
  std::string checkpointStore;
  std::function<std::optional<int64_t>()> runId;
  // Returns once the store holds every event published so far (through `step`); false when it
  // cannot say so (a failed write: the recorder aborts the run; or a timeout). Called after each
  // step, so a store that fails stops the run within one step, and before each checkpoint is
  // written, so that a checkpoint is never ahead of the stored steps: a process killed between
  // the two writes resumes from an older checkpoint (and the store drops the rows after it),
  // never with a hole in its history. A checkpoint the store cannot confirm is not written.
  std::function<bool(int64_t step)> awaitRecorded;
  // Go on from this checkpoint (checked against the model, the run and the global batch: a
  // UserError says why it does not fit). The run keeps the checkpoint's run id.
  std::optional<Checkpoint> resume;
  std::function<void()> onKill;  // an injected kill (kill@step=N); default: SIGKILL to this process
  bool watchdog = true;          // false only to measure what the watchdog costs (bench_telemetry)
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
  // Sets TrainerOptions::awaitRecorded for a recorder made after the trainer; before run().
  void setAwaitRecorded(std::function<bool(int64_t step)> await) { options_.awaitRecorded = std::move(await); }
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
  void restore(const Checkpoint& c);
  void writeCheckpoint(const TrainPosition& at);
  void killNow();  // an injected kill (FaultPlan::killStep)

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
