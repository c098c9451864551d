#include "learn/RunSequence.h"

namespace ml {

void RunSequence::requestCancel() {
  cancel_.store(true);
  std::lock_guard lock(mu_);
  if (running_) running_->requestCancel();
}

RecordedRun::Result RunSequence::run(RecordedRun& run) {
  {
    std::lock_guard lock(mu_);
    running_ = &run;
  }
  if (cancel_.load()) run.requestCancel();
  RecordedRun::Result r = run.run();
  std::lock_guard lock(mu_);
  running_ = nullptr;
  return r;
}

}  // namespace ml
