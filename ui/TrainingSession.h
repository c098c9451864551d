// Runs one training at a time on a worker thread (load data, build an ml::RecordedRun, train; or,
// for a project of several workers, have mirrorlab-cli train it and relay worker 1's events) and
// hands the telemetry to the UI: a 40 ms timer drains the UI's channel and emits the batch once,
// so charts redraw at display rate whatever the step rate. The UI thread never waits on training
// or on disk; cancel and pause are flags the trainer checks between steps.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <QObject>
#include <QString>
#include <QTimer>

#include "project/Project.h"
#include "telemetry/Events.h"

namespace ml {
class Channel;
class RecordedRun;
struct TrainerOptions;
}  // namespace ml

namespace mlui {

class DataCache;

class TrainingSession : public QObject {
  Q_OBJECT
 public:
  enum class State { Idle, Preparing, Running, Paused, Stopping };
  Q_ENUM(State)

  TrainingSession(std::shared_ptr<DataCache> cache, QObject* parent = nullptr);
  ~TrainingSession() override;  // cancels a running training and joins its thread

  // storePath: where the run is recorded. maxSteps 0: all epochs.
  bool start(const ml::Project& project, const QString& storePath, int64_t maxSteps = 0);
  // Continues stored run runId from its newest checkpoint (the core checks it; a refusal arrives
  // as runFailed with the reason, and nothing is changed).
  bool resume(int64_t runId, const QString& storePath);
  void setPaused(bool paused);
  // Why Pause cannot hold the current run, for the Pause button's tooltip and the status bar;
  // "" when it can. The workers of a multi-worker run cannot pause together: Stop ends it.
  QString pauseUnavailable() const;
  void stop();
  State state() const { return state_; }
  bool isActive() const { return state_ != State::Idle; }
  std::optional<int64_t> lastRunId() const { return lastRunId_; }
  uint64_t droppedEvents() const;
  static QString stateText(State s);
  // A view drew one frame of this run, taking `ms`: the totals are stored with the run when it
  // ends (ui_frames, ui_draw_ms), so its speed says whether drawing competed with it.
  void recordUiFrame(double ms);

 Q_SIGNALS:
  void stateChanged(mlui::TrainingSession::State state);
  void statusMessage(const QString& message);
  // A batch of telemetry, in order (emitted on the UI thread; connect directly).
  void eventsArrived(const std::vector<ml::Event>& events);
  // The run could not start (data set, model, store): the message names the problem.
  void runFailed(const QString& message);
  // The run ended (finished, cancelled, diverged, failed); runId is its id in the store.
  void runEnded(const ml::RunFinished& finished, std::optional<int64_t> runId);

 private:
  // What a training thread hands back: the run's end and id, or the error that stopped it.
  struct Outcome {
    std::optional<ml::RunFinished> finished;
    std::optional<int64_t> runId;
    QString error;
  };
  bool launch(std::optional<ml::Project> project, std::optional<int64_t> resumeId, const QString& storePath, int64_t maxSteps);
  // On the worker thread. trainHere: nullopt when the session let the run go while it was stuck
  // (abandon()), after which the thread touches nothing of the session.
  struct Link;
  std::optional<Outcome> trainHere(const ml::Project& project, ml::TrainerOptions options, const std::string& store,
                                   int64_t maxSteps, const std::shared_ptr<Link>& link, uint64_t gen);
  Outcome trainWorkers(const ml::Project& project, const std::string& store, int64_t maxSteps, const std::string& cli);
  void keepWeights(ml::RecordedRun& run, const std::string& store, int64_t runId, Outcome& out);
  void poll();
  void storeUiCost(const std::string& store, int64_t runId);
  void setState(State s);
  void onWorkerDone(uint64_t gen, Outcome outcome);
  // A replica that no release reaches (the watchdog stopped the run and run() has not returned 5 s
  // later): the run is recorded failed with the diagnosis, its thread is left behind, and the
  // studio can train again.
  void abandon(const std::string& why);

  // What a training thread may still reach after the session let it go (abandon) or was
  // destroyed: self is null then, and gen tells a left-behind thread from the current one.
  struct Link {
    std::mutex mu;
    TrainingSession* self = nullptr;
  };
  // Whether the thread of generation gen is still the session's current one (checked through the
  // link: the session may be gone).
  static bool current(const std::shared_ptr<Link>& link, uint64_t gen);
  std::shared_ptr<Link> link_;
  std::atomic<uint64_t> gen_{0};  // the current training thread's number

  std::shared_ptr<DataCache> cache_;
  State state_ = State::Idle;
  QTimer timer_;
  std::thread worker_;
  mutable std::mutex mu_;  // guards channel_ and run_ (set by the worker)
  std::shared_ptr<ml::Channel> channel_;
  ml::RecordedRun* run_ = nullptr;  // the run training here, while it trains
  std::atomic<bool> cancel_{false}, paused_{false};
  std::atomic<bool> workersRun_{false};  // mirrorlab-cli trains the project's workers (no pause)
  std::atomic<int64_t> uiFrames_{0};
  std::atomic<int64_t> uiDrawUs_{0};  // microseconds: an integer atomic, no CAS loop
  std::optional<int64_t> lastRunId_;
  std::vector<ml::Event> batch_;
};

}  // namespace mlui
