// Records a run into the store from the telemetry channel, on its own thread, so training never
// waits for the disk. Events are written in one transaction per batch, committed at least every
// commitEvery (0.5 s): a SIGKILL loses at most about the last second. A trainer that waits for
// each step (waitForStep) has each committed at once instead. A batch that cannot be
// written (full disk) ends the recording: onFailure stops the run, and the run's row is marked
// failed with the reason and the last step the store holds.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/RunStore.h"
#include "telemetry/Channel.h"

namespace ml {

struct RecorderOptions {
  std::chrono::milliseconds wait{200};         // longest wait for events before looking again
  std::chrono::milliseconds commitEvery{500};  // longest time an event stays uncommitted
  nlohmann::json host;                         // stored with each run; hostInfo() when null
  // Called once, on the recorder's thread, when a write fails (disk full, I/O error): the caller
  // stops the run (Trainer::abort), since going on would report a run the store does not hold.
  std::function<void(const std::string& reason)> onFailure;
};

class Recorder {
 public:
  // Opens its own connection to the store at storePath now, in the caller's thread, so that a
  // bad or read-only store fails (UserError) before training starts; then starts the thread.
  Recorder(const std::string& storePath, std::shared_ptr<Channel> channel, RecorderOptions options = {});
  ~Recorder();  // stop()
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Writes everything still queued, marks a run that never finished as interrupted, joins.
  // Call it after training has pushed its last event (RunFinished).
  void stop();

  // The stored id of the current run, once its RunStarted is committed.
  std::optional<int64_t> runId() const;
  // Waits until the run is committed; nullopt after the timeout or as soon as a write failed.
  std::optional<int64_t> waitForRunId(std::chrono::milliseconds timeout) const;
  // The first write error (disk full, ...), or "" when every batch was written. After it the
  // recorder writes nothing more but the run's status: failed, with what the store holds.
  std::string error() const;
  // The last step of the current run that is committed in the store (0: none).
  int64_t committedStep() const;
  // Blocks until the store holds every event published to the channel before the call (the
  // steps up to `step`, and the epoch rows and samples before them), asking the recorder to commit
  // now instead of at its next due time. The trainer waits here after each step, so a failed write
  // stops it within one step, and before each checkpoint, so that no checkpoint is ever ahead of
  // the stored steps. False after the timeout or once a write failed (then onFailure has run).
  bool waitForStep(int64_t step, std::chrono::milliseconds timeout);
  // True when, after an error, the run's row could still be marked failed with the reason.
  bool failureRecorded() const;
  uint64_t eventsWritten() const { return written_.load(std::memory_order_relaxed); }
  const std::string& storePath() const { return store_.path(); }

 private:
  void loop();
  bool syncWanted() const;  // stop() or a waiter: commit now
  void flush(std::vector<Event>& pending);
  void write(Event& e, std::optional<int64_t>& run, bool& finished);
  void finishUnfinished();
  void fail(const std::string& what);
  void markFailed();

  RunStore store_;
  std::shared_ptr<Channel> channel_;
  RecorderOptions options_;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;  // runId_ set, a batch committed, a commit asked for, or stop requested
  std::optional<int64_t> runId_;
  bool finished_ = true;  // the current run got its RunFinished
  bool stop_ = false;
  // Events are counted as the channel queued them (Channel::pushed): waitForStep wants the first
  // wantThrough_ committed; the thread commits at once while committedThrough_ is short of it.
  uint64_t wantThrough_ = 0;
  uint64_t drained_ = 0;           // the thread's: events taken from the channel
  uint64_t committedThrough_ = 0;  // of them, committed (all, once a flush leaves none pending)
  std::string error_;
  bool failureSignalled_ = false;  // error_ is set and onFailure has returned
  bool ended_ = false;             // the thread has left its loop: it commits nothing more
  int64_t committedStep_ = 0;
  bool failureMarked_ = false;
  std::atomic<uint64_t> written_{0};
  int64_t lastStepSeen_ = 0;  // the recorder thread's: the last step row (a pause follows it; the run's steps)
  std::thread thread_;
};

}  // namespace ml
