#include "learn/RunSequence.h"

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
    recorder = std::make_unique<Recorder>(storePath, recordCh);
  }
  {
    std::lock_guard lock(mu_);
    trainer_ = &trainer;
  }
  if (cancel_.load()) trainer.requestCancel();
  Result r;
  r.finished = trainer.run();
  {
    std::lock_guard lock(mu_);
    trainer_ = nullptr;
  }
  if (recorder) {
    recorder->stop();
    r.runId = recorder->runId();
    recordCh->close();
  }
  return r;
}

}  // namespace ml
