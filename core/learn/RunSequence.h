// Recorded runs one after another on the caller's thread (a lesson's experiments, a scaling
// experiment, a sweep worker's points), any of them cancellable from another thread:
// requestCancel() stops the running one between steps and every later one.
#pragma once
#include <atomic>
#include <mutex>

#include "train/RecordedRun.h"

namespace ml {

class RunSequence {
 public:
  // Runs `run` to its end (RecordedRun::run), cancelled at once if the sequence already is.
  RecordedRun::Result run(RecordedRun& run);
  void requestCancel();
  bool cancelled() const { return cancel_.load(); }

 private:
  std::atomic<bool> cancel_{false};
  std::mutex mu_;
  RecordedRun* running_ = nullptr;
};

}  // namespace ml
