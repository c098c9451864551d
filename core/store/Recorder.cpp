// The recorder's thread: wait, drain, and commit a batch when it is due; see Recorder.h.
// Batches are flushed early on RunStarted (so runId() appears quickly) and RunFinished.
#include "store/Recorder.h"

#include <algorithm>
#include <cstdio>
#include <type_traits>
#include <variant>

#include "store/HostInfo.h"

namespace ml {

Recorder::Recorder(const std::string& storePath, std::shared_ptr<Channel> channel, RecorderOptions options)
    : store_(RunStore::open(storePath)), channel_(std::move(channel)), options_(std::move(options)) {
  if (options_.host.is_null()) options_.host = hostInfo();
  thread_ = std::thread([this] { loop(); });
}

Recorder::~Recorder() { stop(); }

void Recorder::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::optional<int64_t> Recorder::runId() const {
  std::lock_guard lock(mu_);
  return runId_;
}

std::optional<int64_t> Recorder::waitForRunId(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return runId_.has_value() || !error_.empty(); });
  return runId_;
}

std::string Recorder::error() const {
  std::lock_guard lock(mu_);
  return error_;
}

int64_t Recorder::committedStep() const {
  std::lock_guard lock(mu_);
  return committedStep_;
}

bool Recorder::waitForStep(int64_t step, std::chrono::milliseconds timeout) {
  // Every event published before this call is among the first `target` the channel queued.
  const uint64_t target = channel_->pushed();
  std::unique_lock lock(mu_);
  if (failureSignalled_ || ended_) return false;
  if (committedThrough_ < target) {
    wantThrough_ = std::max(wantThrough_, target);
    lock.unlock();
    channel_->wake();  // the thread may be waiting for events, not for us
    cv_.notify_all();
    lock.lock();
    cv_.wait_for(lock, timeout, [&] { return committedThrough_ >= target || failureSignalled_ || ended_; });
  }
  return error_.empty() && committedThrough_ >= target && committedStep_ >= step;
}

bool Recorder::failureRecorded() const {
  std::lock_guard lock(mu_);
  return failureMarked_;
}

void Recorder::fail(const std::string& what) {
  {
    std::lock_guard lock(mu_);
    if (!error_.empty()) return;
    error_ = what;
  }
  // The trainer is stopped before a waiter learns of the failure, so that it finds the reason set.
  if (options_.onFailure) options_.onFailure("the run store " + store_.path() + " could not record the run: " + what);
  {
    std::lock_guard lock(mu_);
    failureSignalled_ = true;
  }
  cv_.notify_all();
}

// Best effort: the disk may still be full, and then the next opening of the store marks the run
// interrupted (its process is gone) with the steps it holds.
void Recorder::markFailed() {
  std::optional<int64_t> run;
  RunFinished f;
  {
    std::lock_guard lock(mu_);
    if (failureMarked_ || !runId_) return;
    run = runId_;
    f.steps = committedStep_;
    f.message = "recording failed after step " + std::to_string(committedStep_) + " (" + error_ + "); the store holds steps 1.." +
                std::to_string(committedStep_);
  }
  f.status = RunStatus::Failed;
  try {
    auto tx = store_.transaction();
    store_.finishRun(*run, f);
    tx.commit();
    std::lock_guard lock(mu_);
    failureMarked_ = true;
    finished_ = true;
  } catch (const std::exception&) {
  }
}

bool Recorder::syncWanted() const {
  std::lock_guard lock(mu_);
  return stop_ || (error_.empty() && wantThrough_ > committedThrough_);  // after a failure nothing more commits
}

void Recorder::loop() {
  using Clock = std::chrono::steady_clock;
  std::vector<Event> pending;
  auto lastFlush = Clock::now();
  for (;;) {
    if (!syncWanted()) channel_->waitFor(options_.wait);
    bool stopping = false;
    {
      std::lock_guard lock(mu_);
      stopping = stop_;
    }
    const bool sync = syncWanted();          // read before draining: the drain holds what the waiter published
    const bool closed = channel_->closed();  // likewise: nothing arrives after the close
    size_t before = pending.size();
    drained_ += channel_->drain(pending);
    bool urgent = sync;
    for (size_t i = before; i < pending.size(); ++i)
      urgent |= !std::holds_alternative<StepEvent>(pending[i]) && !std::holds_alternative<DeviceSample>(pending[i]) &&
                !std::holds_alternative<EpochEvent>(pending[i]);
    auto now = Clock::now();
    if (!pending.empty() && (urgent || stopping || closed || now - lastFlush >= options_.commitEvery)) {
      flush(pending);
      lastFlush = now;
    }
    if (stopping || closed) {
      drained_ += channel_->drain(pending);  // what arrived while flushing; later events are not ours
      flush(pending);
      break;
    }
    // Let a batch build up until its commit is due; stop() or a waiter wakes us early.
    if (!pending.empty()) {
      auto due = lastFlush + options_.commitEvery - Clock::now();
      if (due > Clock::duration::zero()) {
        std::unique_lock lock(mu_);
        cv_.wait_for(lock, std::min<Clock::duration>(due, options_.wait),
                     [&] { return stop_ || (error_.empty() && wantThrough_ > committedThrough_); });
      }
    }
  }
  {
    std::lock_guard lock(mu_);
    ended_ = true;  // nobody waits for a recorder that has stopped
  }
  cv_.notify_all();
  finishUnfinished();
}

void Recorder::flush(std::vector<Event>& pending) {
  if (pending.empty()) return;
  std::optional<int64_t> run;
  bool finished, failed;
  int64_t lastStep;
  {
    std::lock_guard lock(mu_);
    run = runId_;
    finished = finished_;
    failed = !error_.empty();
    lastStep = committedStep_;
  }
  if (failed) {
    // Nothing more after a failed batch (a hole in the steps would pass for a complete run);
    // keep consuming so the channel never fills, and mark the run once it has ended.
    for (const Event& e : pending)
      if (std::holds_alternative<RunFinished>(e)) markFailed();
    pending.clear();
    return;
  }
  try {
    auto tx = store_.transaction();
    for (Event& e : pending) {
      write(e, run, finished);
      if (const auto* st = std::get_if<StepEvent>(&e)) lastStep = std::max(lastStep, st->step);
      if (const auto* rs = std::get_if<RunStarted>(&e)) lastStep = rs->resumeRun ? rs->resumeStep : 0;
    }
    tx.commit();
    written_.fetch_add(pending.size(), std::memory_order_relaxed);
    {
      std::lock_guard lock(mu_);
      runId_ = run;
      finished_ = finished;
      committedStep_ = lastStep;
      committedThrough_ = drained_;  // pending held every event drained and not yet committed
    }
    cv_.notify_all();
  } catch (const std::exception& ex) {
    // The transaction rolled back: the store holds what earlier batches committed.
    const bool ended =
        std::any_of(pending.begin(), pending.end(), [](const Event& e) { return std::holds_alternative<RunFinished>(e); });
    fail(ex.what());
    if (ended) markFailed();
  }
  pending.clear();
}

void Recorder::write(Event& e, std::optional<int64_t>& run, bool& finished) {
  std::visit(
      [&](auto& ev) {
        using T = std::decay_t<decltype(ev)>;
        if constexpr (std::is_same_v<T, RunStarted>) {
          if (run && !finished)
            store_.finishRun(*run, RunStatus::Interrupted, "a new run started on the same channel before this one finished");
          lastStepSeen_ = ev.resumeRun ? ev.resumeStep : 0;
          if (ev.resumeRun) {
            store_.resumeRun(*ev.resumeRun, ev.resumeStep, ev.resumeEpochsDone, ev.resumeWall);
            run = *ev.resumeRun;
          } else {
            run = store_.createRun(ev, options_.host);
          }
          finished = false;
        } else if (!run) {
          return;  // nothing to attach it to: telemetry from before the recorder started
        } else if constexpr (std::is_same_v<T, StepEvent>) {
          store_.appendSteps(*run, std::span<const StepEvent>(&ev, 1));
          lastStepSeen_ = ev.step;
        } else if constexpr (std::is_same_v<T, EpochEvent>) {
          store_.appendEpochs(*run, std::span<const EpochEvent>(&ev, 1));
        } else if constexpr (std::is_same_v<T, DeviceSample>) {
          store_.appendDeviceSamples(*run, std::span<const DeviceSample>(&ev, 1));
        } else if constexpr (std::is_same_v<T, CheckpointSaved>) {
          char hex[17];
          std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(ev.checksum));
          store_.addArtifact(*run, ev.path, "checkpoint", hex, ev.bytes);
          for (const auto& gone : ev.removed) store_.removeArtifact(*run, gone);
        } else if constexpr (std::is_same_v<T, RunPaused>) {
          // Events arrive in the order they happened: the pause follows the last step recorded.
          store_.addEvent(*run, RunEvent{"pause", lastStepSeen_, ev.wallTime, ev.seconds, std::nullopt, {}});
        } else if constexpr (std::is_same_v<T, WatchdogWarning>) {
          store_.addEvent(*run, RunEvent{"straggler", ev.step, ev.wallTime, ev.lateSeconds, ev.replica, ev.message});
        } else if constexpr (std::is_same_v<T, RunFinished>) {
          // The run's step count is what the store holds: the last step row (a failed step, or
          // one of another worker that never reached the store, is not counted).
          RunFinished f = ev;
          f.steps = lastStepSeen_;
          store_.finishRun(*run, f);
          store_.setDroppedEvents(*run, channel_->dropped());
          finished = true;
        }
      },
      e);
}

void Recorder::finishUnfinished() {
  std::optional<int64_t> run;
  bool failed;
  {
    std::lock_guard lock(mu_);
    failed = !error_.empty();
    if (!failed && (finished_ || !runId_)) return;
    run = runId_;
    if (!failed) finished_ = true;
  }
  if (failed) {
    markFailed();
    return;
  }
  try {
    store_.finishRun(*run, RunStatus::Interrupted, "recording stopped before the run reported that it finished");
    store_.setDroppedEvents(*run, channel_->dropped());
  } catch (const std::exception& ex) {
    fail(ex.what());
  }
}

}  // namespace ml
