#include "learn/RunSequence.h"

#include <chrono>
#include <memory>

#include "store/Recorder.h"

namespace ml {

void RunSequence::requestCancel() {
  cancel_.store(true);
  std::lock_guard lock(mu_);
  if (trainer_) trainer_->requestCancel();
}

RunSequence::Result RunSequence::run(Trainer& trainer, TelemetryHub& hub, const std::string& storePath) {
  std::shared_ptr<Channel> recordCh;
  std::unique_ptr<Recorder> recorder;
  if (!storePath.empty()) {
    recordCh = hub.subscribe();
    RecorderOptions options;
    options.onFailure = [&trainer](const std::string& why) { trainer.abort(why); };  // nothing unrecorded goes on
    recorder = std::make_unique<Recorder>(storePath, recordCh, std::move(options));
    // A failed write stops the run within one step (Trainer.h).
    trainer.setAwaitRecorded([rec = recorder.get()](int64_t step) { return rec->waitForStep(step, std::chrono::seconds(60)); });
  }
  {
    std::lock_guard lock(mu_);
    trainer_ = &trainer;
  }
  if (cancel_.load()) trainer.requestCancel();
  Result r;
  r.finished = trainer.run();
  trainer.setAwaitRecorded({});  // the recorder goes below
  {
    std::lock_guard lock(mu_);
    trainer_ = nullptr;
  }
  if (recorder) {
    recorder->stop();
    r.runId = recorder->runId();
    recordCh->close();
    // A run the store could not keep whole is not reported as finished.
    if (const std::string err = recorder->error(); !err.empty() && r.finished.status != RunStatus::Failed) {
      r.finished.status = RunStatus::Failed;
      r.finished.message = "the run store " + storePath + " could not record the run: " + err;
    }
  }
  return r;
}

}  // namespace ml
