// One training run as every front end starts it: the studio, the CLI (one process, or each worker
// under mpirun), lessons, scaling experiments and sweeps. A RecordedRun owns the telemetry hub,
// the Trainer and, when a run store is named, the Recorder, and wires them in this one place:
//   events   every consumer subscribes before run() and drains its own channel (the studio's
//            display-rate poll, the CLI's progress line, a sweep's live view); the recorder is one
//            more subscriber. Training never waits for a consumer: a full channel drops and counts.
//   record   the trainer waits for the stored run's id before its first step (a process killed at
//            any step leaves a stored run) and names its checkpoints with it; each step waits for
//            the store's commit of it (a failed write stops the run within one step) and each
//            checkpoint for every event before it (no checkpoint is ahead of the store).
//   failure  a store write that fails stops the run (Trainer::abort with the reason), and the
//            Result says failed: nothing that the store does not hold goes on as if recorded.
//   control  requestCancel, setPaused and abort from any thread, at the next step.
//   lifetime construct (throws UserError before any step: the project does not fit its data, the
//            store cannot be opened), subscribe, run() once, read the Result; destroy after run()
//            returned (or, after abandon(), never touch it again from another thread).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "telemetry/Channel.h"
#include "train/Trainer.h"

namespace ml {

class Recorder;

struct RecordedRunOptions {
  // The run store to record into, with the checkpoints beside it; "" records nothing and
  // writes no checkpoints.
  std::string storePath;
  TrainerOptions trainer;  // its `record` is set by RecordedRun (this run's store)
  // What the trainer's start-up errors concern, put before them ("p.json: global batch 512 is
  // larger than ..."); "" leaves them as they are.
  std::string source;
  // Publish on this hub instead of the run's own: a sequence of runs that one watcher follows
  // from start to end (a lesson's experiments, a scaling experiment). Not owned.
  TelemetryHub* hub = nullptr;
};

class RecordedRun : private RunRecord {
 public:
  struct Result {
    // The end as the trainer published it; failed, with the store's reason, when the store could
    // not keep the run whole.
    RunFinished finished;
    std::optional<int64_t> runId;  // the stored run; nullopt when not recorded
    std::string recordingError;    // the store's first write error; "" when it kept everything
    bool failureRecorded = false;  // after a recordingError: the run's row says failed
    int64_t committedStep = 0;     // the last step the store holds
  };

  RecordedRun(Project project, std::shared_ptr<const DataSplit> data, RecordedRunOptions options);
  ~RecordedRun();
  RecordedRun(const RecordedRun&) = delete;
  RecordedRun& operator=(const RecordedRun&) = delete;

  // A consumer's channel: every event from RunStarted to RunFinished, closed when run() returns.
  std::shared_ptr<Channel> subscribe(size_t capacity = size_t{1} << 16);

  // Trains on the calling thread to the end, then waits until the store holds every event.
  Result run();

  void requestCancel() { trainer_->requestCancel(); }
  void setPaused(bool paused) { trainer_->setPaused(paused); }
  void abort(const std::string& reason) { trainer_->abort(reason); }
  // The watchdog's diagnosis once a replica has been stuck graceSeconds past the run's stop
  // (Trainer::stuckFor): the caller then gives the run up with abandon().
  std::string stuckFor(double graceSeconds) const { return trainer_->stuckFor(graceSeconds); }
  // Gives up a run whose thread cannot return: publishes it failed with `why` (the recorder marks
  // the stored run so), closes the channels and waits until the store holds it. From any thread,
  // while run() is still stuck in another; the caller leaves that thread behind.
  Result abandon(const std::string& why);

  Trainer& trainer() { return *trainer_; }
  const Trainer& trainer() const { return *trainer_; }
  const RunPlan& plan() const { return trainer_->plan(); }
  bool recorded() const { return recorder_ != nullptr; }
  const std::string& storePath() const override { return options_.storePath; }

 private:
  // RunRecord, for the trainer: the recorder's run id and committed steps, waited for (10 s at most).
  std::optional<int64_t> awaitRunId() override;
  bool awaitStep(int64_t step) override;
  Result end(RunFinished finished);

  RecordedRunOptions options_;
  TelemetryHub ownHub_;
  TelemetryHub& hub_;
  std::mutex channelsMu_;
  std::vector<std::shared_ptr<Channel>> channels_;  // every consumer's and the recorder's: closed at the end
  std::unique_ptr<Recorder> recorder_;
  std::mutex endMu_;                  // held through the end: run() and abandon() may both reach it
  std::optional<Result> ended_;       // the first end; a later one returns it
  std::unique_ptr<Trainer> trainer_;  // last: destroyed first, before the hub it publishes on
};

}  // namespace ml
