// Trainings run one after another on the caller's thread (a lesson's experiments, a scaling
// sweep), each recorded into the run store when a path is given, and any of them cancellable from
// another thread: requestCancel() stops the running one between steps and every later one.
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "telemetry/Channel.h"
#include "train/Trainer.h"

namespace ml {

class RunSequence {
 public:
  struct Result {
    RunFinished finished;
    std::optional<int64_t> runId;  // when recorded
  };
  // Runs trainer to its end, recording its events (published on hub) into storePath unless it is
  // empty. Throws UserError when the store cannot be opened.
  Result run(Trainer& trainer, TelemetryHub& hub, const std::string& storePath);
  void requestCancel();
  bool cancelled() const { return cancel_.load(); }

 private:
  std::atomic<bool> cancel_{false};
  std::mutex mu_;
  Trainer* trainer_ = nullptr;  // the running one
};

}  // namespace ml
