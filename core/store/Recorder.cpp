// The recorder's thread: wait, drain, and commit a batch when it is due; see Recorder.h.
// Batches are flushed early on RunStarted (so runId() appears quickly) and RunFinished.
#include "store/Recorder.h"

#include <type_traits>
#include <variant>

#include "store/HostInfo.h"

namespace ml {

Recorder::Recorder(const std::string& storePath, std::shared_ptr<Channel> channel,
                   RecorderOptions options)
    : store_(RunStore::open(storePath)), channel_(std::move(channel)),
      options_(std::move(options)) {
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
  cv_.wait_for(lock, timeout, [&] { return runId_.has_value(); });
  return runId_;
}

std::string Recorder::error() const {
  std::lock_guard lock(mu_);
  return error_;
}

void Recorder::loop() {
  using Clock = std::chrono::steady_clock;
  std::vector<Event> pending;
  auto lastFlush = Clock::now();
  for (;;) {
    bool open = channel_->waitFor(options_.wait);
    size_t before = pending.size();
    channel_->drain(pending);
    bool urgent = false;
    for (size_t i = before; i < pending.size(); ++i)
      urgent |= !std::holds_alternative<StepEvent>(pending[i]) &&
                !std::holds_alternative<DeviceSample>(pending[i]) &&
                !std::holds_alternative<EpochEvent>(pending[i]);
    bool stopping;
    {
      std::lock_guard lock(mu_);
      stopping = stop_;
    }
    auto now = Clock::now();
    if (!pending.empty() &&
        (urgent || stopping || !open || now - lastFlush >= options_.commitEvery)) {
      flush(pending);
      lastFlush = now;
    }
    if (stopping || !open) {
      channel_->drain(pending);  // what arrived while flushing; later events are not ours
      flush(pending);
      break;
    }
    // Let a batch build up until its commit is due; stop() wakes us early.
    if (!pending.empty()) {
      auto due = lastFlush + options_.commitEvery - Clock::now();
      if (due > Clock::duration::zero()) {
        std::unique_lock lock(mu_);
        cv_.wait_for(lock, std::min<Clock::duration>(due, options_.wait), [&] { return stop_; });
      }
    }
  }
  finishUnfinished();
}

void Recorder::flush(std::vector<Event>& pending) {
  if (pending.empty()) return;
  std::optional<int64_t> run;
  bool finished;
  {
    std::lock_guard lock(mu_);
    run = runId_;
    finished = finished_;
  }
  try {
    auto tx = store_.transaction();
    for (Event& e : pending) write(e, run, finished);
    tx.commit();
    written_.fetch_add(pending.size(), std::memory_order_relaxed);
    {
      std::lock_guard lock(mu_);
      runId_ = run;
      finished_ = finished;
    }
    cv_.notify_all();
  } catch (const std::exception& ex) {
    // Keep consuming so the channel never fills; the caller reads error() after stop().
    std::lock_guard lock(mu_);
    if (error_.empty()) error_ = ex.what();
  }
  pending.clear();
}

void Recorder::write(Event& e, std::optional<int64_t>& run, bool& finished) {
  std::visit(
      [&](auto& ev) {
        using T = std::decay_t<decltype(ev)>;
        if constexpr (std::is_same_v<T, RunStarted>) {
          if (run && !finished)
            store_.finishRun(*run, RunStatus::Interrupted,
                             "a new run started on the same channel before this one finished");
          run = store_.createRun(ev, options_.host);
          finished = false;
        } else if (!run) {
          return;  // nothing to attach it to: telemetry from before the recorder started
        } else if constexpr (std::is_same_v<T, StepEvent>) {
          store_.appendSteps(*run, std::span<const StepEvent>(&ev, 1));
        } else if constexpr (std::is_same_v<T, EpochEvent>) {
          store_.appendEpochs(*run, std::span<const EpochEvent>(&ev, 1));
        } else if constexpr (std::is_same_v<T, DeviceSample>) {
          store_.appendDeviceSamples(*run, std::span<const DeviceSample>(&ev, 1));
        } else if constexpr (std::is_same_v<T, RunFinished>) {
          store_.finishRun(*run, ev);
          store_.setDroppedEvents(*run, channel_->dropped());
          finished = true;
        }
      },
      e);
}

void Recorder::finishUnfinished() {
  std::optional<int64_t> run;
  {
    std::lock_guard lock(mu_);
    if (finished_ || !runId_) return;
    run = runId_;
    finished_ = true;
  }
  try {
    store_.finishRun(*run, RunStatus::Interrupted,
                     "recording stopped before the run reported that it finished");
    store_.setDroppedEvents(*run, channel_->dropped());
  } catch (const std::exception& ex) {
    std::lock_guard lock(mu_);
    if (error_.empty()) error_ = ex.what();
  }
}

}  // namespace ml
