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
#include "store/RunStore.h"
#include "telemetry/Channel.h"
#include "train/RecordedRun.h"
#include "train/Resume.h"

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
    if (run_) run_->requestCancel();
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

bool TrainingSession::current(const std::shared_ptr<Link>& link, uint64_t gen) {
  std::lock_guard lock(link->mu);
  return link->self != nullptr && link->self->gen_.load() == gen;
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
  // A project of several workers is trained by mirrorlab-cli (it starts mpirun); a resumed run
  // goes on in this process.
  workersRun_.store(projectIn && projectIn->distribute.workers > 1 && !resumeId);
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
  // The mirrorlab-cli beside the studio, or $MIRRORLAB_CLI.
  QString cliPath = qEnvironmentVariable("MIRRORLAB_CLI");
  if (cliPath.isEmpty()) cliPath = QCoreApplication::applicationDirPath() + QStringLiteral("/mirrorlab-cli");
  const std::string cli = cliPath.toStdString();
  const uint64_t gen = ++gen_;
  worker_ = std::thread([this, gen, link = link_, projectIn, resumeId, store, maxSteps, cli] {
    Outcome out;
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
      if (workersRun_.load()) {
        out = trainWorkers(project, store, maxSteps, cli);
      } else if (auto here = trainHere(project, std::move(options), store, maxSteps, link, gen)) {
        out = std::move(*here);
      } else {
        return;  // let go while stuck: abandon() ended the run
      }
    } catch (const std::exception& e) {  // ml::UserError and anything unexpected: shown, never a crash
      if (!current(link, gen)) return;
      std::lock_guard lock(mu_);
      run_ = nullptr;
      out.error = QString::fromStdString(e.what());
    }
    std::lock_guard lock(link->mu);  // the session cannot go away while the end is posted
    if (link->self)
      QMetaObject::invokeMethod(
          link->self, [s = link->self, gen, out] { s->onWorkerDone(gen, out); }, Qt::QueuedConnection);
  });
  timer_.start();
  return true;
}

std::optional<TrainingSession::Outcome> TrainingSession::trainHere(const ml::Project& project, ml::TrainerOptions options,
                                                                   const std::string& store, int64_t maxSteps,
                                                                   const std::shared_ptr<Link>& link, uint64_t gen) {
  auto data = cache_->get(project);
  if (cancel_.load()) return Outcome{};  // stopped before training started
  QMetaObject::invokeMethod(
      this, [this] { Q_EMIT statusMessage(tr("Building the replicas…")); }, Qt::QueuedConnection);
  ml::RecordedRunOptions ro;
  ro.storePath = store;  // recorded, with its checkpoints beside the store, as on the command line
  ro.trainer = std::move(options);
  ro.trainer.maxSteps = maxSteps;
  ro.trainer.sampleInterval = 0.05;  // two utilization points per frame-pair: smooth lines
  // An injected kill would take the studio with it: the run stops as failed instead, resumable.
  ro.trainer.killEndsRunWith =
      "an injected kill stopped the run (a command-line process would have died here); resume it from the Runs screen";
  // Built here, off the UI thread: a project that does not fit or a bad store fails now.
  ml::RecordedRun run(project, data, std::move(ro));
  auto uiChannel = run.subscribe(1 << 16);
  {
    std::lock_guard lock(mu_);
    channel_ = uiChannel;
    run_ = &run;
  }
  if (paused_.load()) run.setPaused(true);
  if (cancel_.load()) run.requestCancel();
  QMetaObject::invokeMethod(
      this,
      [this] {
        if (state_ == State::Preparing) setState(State::Running);
      },
      Qt::QueuedConnection);
  const ml::RecordedRun::Result r = run.run();
  if (!current(link, gen)) return std::nullopt;  // `this` may be gone: touch nothing of it
  {
    std::lock_guard lock(mu_);
    run_ = nullptr;
  }
  Outcome out{r.finished, r.runId, {}};
  if (!r.recordingError.empty())
    out.error = QString::fromStdString("The run store reported: " + r.recordingError);
  else if (r.runId)
    storeUiCost(store, *r.runId);
  if (r.runId && r.finished.status == ml::RunStatus::Finished) keepWeights(run, store, *r.runId, out);
  return out;
}

// A finished run keeps its weights, so the Runs screen can export the trained model.
void TrainingSession::keepWeights(ml::RecordedRun& run, const std::string& store, int64_t runId, Outcome& out) {
  try {
    ml::keepRunWeights(store, runId, run.trainer().strategy().model(0));
  } catch (const std::exception& e) {
    out.error = QString::fromStdString(std::string("The run's weights were not kept: ") + e.what());
  }
}

// Worker 1 records the run and keeps its weights (mirrorlab-cli train --keep-weights); its events
// arrive here as they happen and go to the dashboard like a local run's.
TrainingSession::Outcome TrainingSession::trainWorkers(const ml::Project& project, const std::string& store, int64_t maxSteps,
                                                       const std::string& cli) {
  ml::TelemetryHub hub;
  {
    std::lock_guard lock(mu_);
    channel_ = hub.subscribe(1 << 16);
  }
  const int workers = project.distribute.workers;
  QMetaObject::invokeMethod(
      this,
      [this, workers] {
        if (state_ == State::Preparing) setState(State::Running);
        Q_EMIT statusMessage(tr("Training as %1 workers under mpirun (mirrorlab-cli). %2").arg(workers).arg(pauseUnavailable()));
      },
      Qt::QueuedConnection);
  const WorkersRun r = runWorkers(cli, project, store, maxSteps, hub, cancel_);
  hub.closeAll();
  Outcome out{r.finished, r.runId, QString::fromStdString(r.error)};
  if (r.runId) storeUiCost(store, *r.runId);
  return out;
}

// On the worker thread, after the recorder closed: the frames drawn while the run trained.
void TrainingSession::storeUiCost(const std::string& store, int64_t runId) {
  try {
    ml::RunStore::open(store).setUiCost(runId, uiFrames_.load(), static_cast<double>(uiDrawUs_.load()) / 1000.0);
  } catch (const std::exception& e) {  // the run itself is stored; only this figure is missing
    qWarning("could not store the studio's drawing cost of run %lld: %s", static_cast<long long>(runId), e.what());
  }
}

QString TrainingSession::pauseUnavailable() const {
  if (workersRun_.load() && isActive())
    return tr("Pause is off for a multi-worker run: its workers cannot pause together. Stop ends the run.");
  return {};
}

void TrainingSession::setPaused(bool paused) {
  if (state_ != State::Running && state_ != State::Paused && state_ != State::Preparing) return;
  if (const QString why = pauseUnavailable(); !why.isEmpty()) {
    Q_EMIT statusMessage(why);
    Q_EMIT stateChanged(state_);  // the Pause button shows the state again
    return;
  }
  paused_.store(paused);
  {
    std::lock_guard lock(mu_);
    if (run_) run_->setPaused(paused);
  }
  if (state_ != State::Preparing) setState(paused ? State::Paused : State::Running);
}

void TrainingSession::stop() {
  if (!isActive()) return;
  cancel_.store(true);
  {
    std::lock_guard lock(mu_);
    if (run_) run_->requestCancel();
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
    if (run_) stuck = run_->stuckFor(5.0);
  }
  if (ch) {
    batch_.clear();
    if (ch->drain(batch_) > 0) {
      // The run's events are here: it runs, even if the queued "running" from its thread is not
      // delivered yet (a loaded machine can train many steps before the UI thread looks).
      if (state_ == State::Preparing) setState(State::Running);
      Q_EMIT eventsArrived(batch_);
    }
  }
  if (!stuck.empty()) abandon(stuck);
}

void TrainingSession::abandon(const std::string& why) {
  ml::RecordedRun::Result r;
  {
    std::lock_guard lock(mu_);
    if (!run_) return;
    gen_.fetch_add(1);  // from now on the thread is a stranger to this session
    // Recorded failed (the recorder's last write) and the channels closed; the thread stays stuck.
    r = run_->abandon(why + " (the stuck replica did not return: its thread is left behind and the studio can train again)");
    run_ = nullptr;
  }
  poll();  // the events up to the end, then this channel is done
  {
    std::lock_guard lock(mu_);
    channel_.reset();
  }
  timer_.stop();
  worker_.detach();
  lastRunId_ = r.runId;
  setState(State::Idle);
  Q_EMIT runEnded(r.finished, r.runId);
}

void TrainingSession::onWorkerDone(uint64_t gen, Outcome out) {
  if (gen != gen_.load()) return;  // a thread left behind by abandon()
  {
    std::lock_guard lock(mu_);
    run_ = nullptr;  // already null: keeps poll() from looking at a finished run
  }
  poll();  // the last events (RunFinished) before saying it ended
  timer_.stop();
  if (worker_.joinable()) worker_.join();  // it has finished: this returns at once
  lastRunId_ = out.runId;
  setState(State::Idle);
  if (out.finished) {
    Q_EMIT runEnded(*out.finished, out.runId);
    if (!out.error.isEmpty()) Q_EMIT runFailed(out.error);
  } else if (!out.error.isEmpty()) {
    Q_EMIT runFailed(out.error);
  } else {
    ml::RunFinished f;
    f.status = ml::RunStatus::Cancelled;
    f.message = "stopped before training started";
    Q_EMIT runEnded(f, std::nullopt);
  }
}

}  // namespace mlui
