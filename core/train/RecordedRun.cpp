// RecordedRun (RecordedRun.h): the hub, the trainer and the recorder of one run, wired once.
#include "train/RecordedRun.h"

#include <chrono>

#include "Error.h"
#include "store/Recorder.h"

namespace ml {

namespace {
// How long the trainer waits for the store before it goes on without (a store that slow is
// reported by the recorder itself).
constexpr std::chrono::seconds kStoreWait{10};
// The recorder's queue: a store that falls behind for a while (a slow disk) loses nothing.
constexpr size_t kRecorderQueue = size_t{1} << 18;
}  // namespace

RecordedRun::RecordedRun(Project project, std::shared_ptr<const DataSplit> data, RecordedRunOptions options)
    : options_(std::move(options)), hub_(options_.hub ? *options_.hub : ownHub_) {
  TrainerOptions to = options_.trainer;
  to.record = options_.storePath.empty() ? nullptr : this;
  try {
    trainer_ = std::make_unique<Trainer>(std::move(project), std::move(data), hub_, std::move(to));
  } catch (const UserError& e) {
    if (options_.source.empty()) throw;
    throw UserError(options_.source + ": " + e.what(), e.field());
  }
  if (options_.storePath.empty()) return;
  // The recorder opens its own connection now, so that a bad or read-only store fails before
  // training; a write that fails later stops the run with the reason.
  RecorderOptions ro;
  ro.onFailure = [this](const std::string& why) { trainer_->abort(why); };
  auto channel = hub_.subscribe(kRecorderQueue);
  try {
    recorder_ = std::make_unique<Recorder>(options_.storePath, channel, std::move(ro));
  } catch (...) {
    channel->close();  // a shared hub keeps its subscribers: this one takes nothing more
    throw;
  }
  channels_.push_back(channel);
}

RecordedRun::~RecordedRun() {
  if (recorder_) recorder_->stop();      // its failure callback reaches the trainer: stopped first
  for (auto& c : channels_) c->close();  // a run built but never run: a shared hub's other runs go on
}

std::shared_ptr<Channel> RecordedRun::subscribe(size_t capacity) {
  auto channel = hub_.subscribe(capacity);
  std::lock_guard lock(channelsMu_);
  channels_.push_back(channel);
  return channel;
}

RecordedRun::Result RecordedRun::run() { return end(trainer_->run()); }

RecordedRun::Result RecordedRun::abandon(const std::string& why) {
  RunFinished f;
  f.status = RunStatus::Failed;
  f.message = why;
  hub_.publish(f);  // the recorder marks the stored run failed with it
  return end(f);
}

RecordedRun::Result RecordedRun::end(RunFinished finished) {
  std::lock_guard endLock(endMu_);
  if (ended_) return *ended_;
  {
    std::lock_guard lock(channelsMu_);
    for (auto& c : channels_) c->close();
  }
  Result r;
  r.finished = std::move(finished);
  if (recorder_) {
    recorder_->stop();  // writes what is queued
    r.runId = recorder_->runId();
    r.recordingError = recorder_->error();
    r.failureRecorded = recorder_->failureRecorded();
    r.committedStep = recorder_->committedStep();
    // A run the store could not keep whole is not reported as finished.
    if (!r.recordingError.empty() && r.finished.status != RunStatus::Failed) {
      r.finished.status = RunStatus::Failed;
      r.finished.message = "the run store " + options_.storePath + " could not record the run: " + r.recordingError;
    }
  }
  ended_ = r;
  return r;
}

std::optional<int64_t> RecordedRun::awaitRunId() { return recorder_ ? recorder_->waitForRunId(kStoreWait) : std::nullopt; }

bool RecordedRun::awaitStep(int64_t step) {
  // A minute: a store that stays silent that long fails the checkpoint rather than leave one ahead
  // of the stored steps; a step goes on after it (the store catches up or fails).
  return !recorder_ || recorder_->waitForStep(step, std::chrono::seconds(60));
}

}  // namespace ml
