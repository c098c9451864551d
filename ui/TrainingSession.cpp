// The worker thread of a training run and the display-rate pump of its telemetry.
#include "TrainingSession.h"

#include <chrono>
#include <thread>

#include <QCoreApplication>
#include <QFileInfo>

#include "DataCache.h"
#include "Error.h"
#include "WorkersLauncher.h"
#include "export/ExportJob.h"
#include "store/Recorder.h"
#include "store/RunStore.h"
#include "telemetry/Channel.h"
#include "train/Resume.h"
#include "train/Trainer.h"

namespace mlui {

TrainingSession::TrainingSession(std::shared_ptr<DataCache> cache, QObject* parent)
    : QObject(parent), link_(std::make_shared<Link>()), cache_(std::move(cache)) {
  link_->self = this;
  timer_.setInterval(40);  // display rate: 25 frames per second whatever the step rate
  timer_.setTimerType(Qt::CoarseTimer);
  connect(&timer_, &QTimer::timeout, this, &TrainingSession::poll);
}

TrainingSession::~TrainingSession() {
  {
    std::lock_guard lock(link_->mu);  // a thread left behind never reaches this session again
    link_->self = nullptr;
  }
  cancel_.store(true);
  {
    std::lock_guard lock(mu_);
    if (trainer_) trainer_->requestCancel();
  }
  if (worker_.joinable()) worker_.join();
}

QString TrainingSession::stateText(State s) {
  switch (s) {
    case State::Idle: return tr("Ready");
    case State::Preparing: return tr("Preparing");
    case State::Running: return tr("Training");
    case State::Paused: return tr("Paused");
    case State::Stopping: return tr("Stopping");
  }
  return {};
}

void TrainingSession::setState(State s) {
  if (s == state_) return;
  state_ = s;
  Q_EMIT stateChanged(s);
}

void TrainingSession::recordUiFrame(double ms) {
  uiFrames_.fetch_add(1, std::memory_order_relaxed);
  uiDrawUs_.fetch_add(static_cast<int64_t>(ms * 1000.0), std::memory_order_relaxed);
}

uint64_t TrainingSession::droppedEvents() const {
  std::lock_guard lock(mu_);
  return channel_ ? channel_->dropped() : 0;
}

bool TrainingSession::start(const ml::Project& project, const QString& storePath, int64_t maxSteps) {
  return launch(project, std::nullopt, storePath, maxSteps);
}

bool TrainingSession::resume(int64_t runId, const QString& storePath) { return launch(std::nullopt, runId, storePath, 0); }

bool TrainingSession::launch(std::optional<ml::Project> projectIn, std::optional<int64_t> resumeId, const QString& storePath,
                             int64_t maxSteps) {
  if (isActive()) return false;
  if (worker_.joinable()) worker_.join();  // the previous worker has already posted its end
  cancel_.store(false);
  paused_.store(false);
  workersRun_.store(false);
  lastRunId_.reset();
  uiFrames_.store(0);
  uiDrawUs_.store(0);
  {
    std::lock_guard lock(mu_);
    channel_.reset();
  }
  setState(State::Preparing);
  Q_EMIT statusMessage(tr("Loading data…"));
  const std::string store = storePath.toStdString();
  // A project of several workers is trained by mirrorlab-cli (it starts mpirun): the one beside
  // the studio, or $MIRRORLAB_CLI.
  QString cliPath = qEnvironmentVariable("MIRRORLAB_CLI");
  if (cliPath.isEmpty()) cliPath = QCoreApplication::applicationDirPath() + QStringLiteral("/mirrorlab-cli");
  const std::string cli = cliPath.toStdString();
  const uint64_t gen = ++gen_;
  worker_ = std::thread([this, gen, link = link_, projectIn, resumeId, store, maxSteps, cli, cache = cache_] {
    // After run() returns: whether this session still waits for this thread (not let go, not destroyed).
    auto live = [&] {
      std::lock_guard lock(link->mu);
      return link->self != nullptr && gen_.load() == gen;
    };
    std::optional<ml::RunFinished> finished;
    std::optional<int64_t> runId;
    QString error;
    try {
      ml::TrainerOptions options;
      ml::Project project;
      if (projectIn) project = *projectIn;
      if (resumeId) {
        auto rs = ml::RunStore::open(store);
        ml::ResumeSource src = ml::findResume(rs, *resumeId);
        project = src.project;
        options.resume = std::move(src.checkpoint);
      }
      if (project.distribute.workers > 1 && !resumeId) {
        // Local MPI workers: their run is followed in the store and shown like any other.
        ml::TelemetryHub hub;
        auto uiChannel = hub.subscribe(1 << 16);
        {
          std::lock_guard lock(mu_);
          channel_ = uiChannel;
        }
        const int workers = project.distribute.workers;
        workersRun_.store(true);
        QMetaObject::invokeMethod(
            this,
            [this, workers] {
              Q_EMIT statusMessage(tr("Training as %1 workers under mpirun (mirrorlab-cli)…").arg(workers));
              if (state_ == State::Preparing) setState(State::Running);
            },
            Qt::QueuedConnection);
        const WorkersRun r = runWorkersFollowingStore(cli, project, store, maxSteps, hub, cancel_);
        hub.closeAll();
        finished = r.finished;
        runId = r.runId;
        QMetaObject::invokeMethod(
            this, [this, gen, finished, runId, error] { onWorkerDone(gen, finished, runId, error); }, Qt::QueuedConnection);
        return;
      }
      auto data = cache->get(project);
      if (!cancel_.load()) {
        QMetaObject::invokeMethod(
            this, [this] { Q_EMIT statusMessage(tr("Building the replicas…")); }, Qt::QueuedConnection);
        ml::TelemetryHub hub;
        auto uiChannel = hub.subscribe(1 << 16);
        options.maxSteps = maxSteps;
        options.sampleInterval = 0.05;  // two utilization points per frame-pair: smooth lines
        // Checkpoints beside the store, as on the command line; the run's id is the recorder's.
        ml::Recorder* rec = nullptr;
        options.checkpointStore = store;
        options.runId = [&rec]() -> std::optional<int64_t> {
          return rec ? rec->waitForRunId(std::chrono::seconds(10)) : std::nullopt;
        };
        options.awaitRecorded = [&rec](int64_t step) { return !rec || rec->waitForStep(step, std::chrono::seconds(60)); };
        // An injected kill would take the studio with it: the run stops as failed instead, resumable.
        ml::Trainer* self = nullptr;
        options.onKill = [&self] {
          if (self)
            self->abort(
                "an injected kill stopped the run (a command-line process would have died here); resume it from the Runs screen");
        };
        ml::Trainer trainer(project, data, hub, options);
        self = &trainer;
        // The recorder opens its own connection here, off the UI thread; a bad store fails now.
        // A store that cannot be written stops the run with the reason (shown, and on the run's row).
        ml::RecorderOptions recorderOptions;
        recorderOptions.onFailure = [&trainer](const std::string& why) { trainer.abort(why); };
        ml::Recorder recorder(store, hub.subscribe(1 << 18), std::move(recorderOptions));
        rec = &recorder;
        {
          std::lock_guard lock(mu_);
          channel_ = uiChannel;
          trainer_ = &trainer;
          hub_ = &hub;
          recorder_ = &recorder;
        }
        if (paused_.load()) trainer.setPaused(true);
        if (cancel_.load()) trainer.requestCancel();
        QMetaObject::invokeMethod(
            this,
            [this] {
              if (state_ == State::Preparing) setState(State::Running);
            },
            Qt::QueuedConnection);
        finished = trainer.run();
        if (!live()) {  // let go while stuck (abandon recorded the run): touch nothing of the session
          hub.closeAll();
          recorder.stop();
          return;
        }
        {
          std::lock_guard lock(mu_);
          trainer_ = nullptr;
          hub_ = nullptr;
          recorder_ = nullptr;
        }
        hub.closeAll();
        recorder.stop();
        runId = recorder.runId();
        if (!recorder.error().empty())
          error = QString::fromStdString("The run store reported: " + recorder.error());
        else if (runId)
          storeUiCost(store, *runId);
        // A finished run keeps its weights, so the Runs screen can export the trained model.
        if (runId && finished->status == ml::RunStatus::Finished) {
          try {
            ml::keepRunWeights(store, *runId, trainer.strategy().model(0));
          } catch (const std::exception& e) {
            error = QString::fromStdString(std::string("The run's weights were not kept: ") + e.what());
          }
        }
      }
    } catch (const std::exception& e) {  // ml::UserError and anything unexpected: shown, never a crash
      if (!live()) return;
      std::lock_guard lock(mu_);
      trainer_ = nullptr;
      hub_ = nullptr;
      recorder_ = nullptr;
      error = QString::fromStdString(e.what());
    }
    std::lock_guard lock(link->mu);  // the session cannot go away while the end is posted
    if (link->self)
      QMetaObject::invokeMethod(
          link->self, [s = link->self, gen, finished, runId, error] { s->onWorkerDone(gen, finished, runId, error); },
          Qt::QueuedConnection);
  });
  timer_.start();
  return true;
}

// On the worker thread, after the recorder closed: the frames drawn while the run trained.
void TrainingSession::storeUiCost(const std::string& store, int64_t runId) {
  try {
    ml::RunStore::open(store).setUiCost(runId, uiFrames_.load(), static_cast<double>(uiDrawUs_.load()) / 1000.0);
  } catch (const std::exception& e) {  // the run itself is stored; only this figure is missing
    qWarning("could not store the studio's drawing cost of run %lld: %s", static_cast<long long>(runId), e.what());
  }
}

void TrainingSession::setPaused(bool paused) {
  if (state_ != State::Running && state_ != State::Paused && state_ != State::Preparing) return;
  if (workersRun_.load()) {
    Q_EMIT statusMessage(tr("Pausing does not reach the workers of a multi-worker run: Stop ends it"));
    Q_EMIT stateChanged(state_);  // the Pause button shows the state again
    return;
  }
  paused_.store(paused);
  {
    std::lock_guard lock(mu_);
    if (trainer_) trainer_->setPaused(paused);
  }
  if (state_ != State::Preparing) setState(paused ? State::Paused : State::Running);
}

void TrainingSession::stop() {
  if (!isActive()) return;
  cancel_.store(true);
  {
    std::lock_guard lock(mu_);
    if (trainer_) trainer_->requestCancel();
  }
  setState(State::Stopping);
  Q_EMIT statusMessage(tr("Stopping after the current step…"));
}

void TrainingSession::poll() {
  std::shared_ptr<ml::Channel> ch;
  std::string stuck;
  {
    std::lock_guard lock(mu_);
    ch = channel_;
    if (trainer_) stuck = trainer_->stuckFor(5.0);
  }
  if (ch) {
    batch_.clear();
    if (ch->drain(batch_) > 0) Q_EMIT eventsArrived(batch_);
  }
  if (!stuck.empty()) abandon(stuck);
}

void TrainingSession::abandon(const std::string& why) {
  ml::RunFinished f;
  f.status = ml::RunStatus::Failed;
  f.message = why + " (the stuck replica did not return: its thread is left behind and the studio can train again)";
  std::optional<int64_t> runId;
  {
    std::lock_guard lock(mu_);
    if (!trainer_) return;
    gen_.fetch_add(1);  // from now on the thread is a stranger to this session
    if (recorder_) runId = recorder_->waitForRunId(std::chrono::milliseconds(500));
    if (hub_) hub_->publish(f);  // the recorder (still running there) marks the run failed
    trainer_ = nullptr;
    hub_ = nullptr;
    recorder_ = nullptr;
  }
  poll();  // the events up to the end, then this channel is done
  {
    std::lock_guard lock(mu_);
    channel_.reset();
  }
  timer_.stop();
  worker_.detach();
  lastRunId_ = runId;
  setState(State::Idle);
  Q_EMIT runEnded(f, runId);
}

void TrainingSession::onWorkerDone(uint64_t gen, std::optional<ml::RunFinished> finished, std::optional<int64_t> runId,
                                   QString error) {
  if (gen != gen_.load()) return;  // a thread left behind by abandon()
  {
    std::lock_guard lock(mu_);
    trainer_ = nullptr;  // already null: keeps poll() from looking at a finished run
  }
  poll();  // the last events (RunFinished) before saying it ended
  timer_.stop();
  if (worker_.joinable()) worker_.join();  // it has finished: this returns at once
  lastRunId_ = runId;
  setState(State::Idle);
  if (finished) {
    Q_EMIT runEnded(*finished, runId);
    if (!error.isEmpty()) Q_EMIT runFailed(error);
  } else if (!error.isEmpty()) {
    Q_EMIT runFailed(error);
  } else {
    ml::RunFinished f;
    f.status = ml::RunStatus::Cancelled;
    f.message = "stopped before training started";
    Q_EMIT runEnded(f, std::nullopt);
  }
}

}  // namespace mlui
