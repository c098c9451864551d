// The live dashboard. Every chart gets addData per event; frames come at the budget's rate and
// replot only the charts that can be seen.
#include "DashboardView.h"

#include <algorithm>
#include <map>
#include "ReflowGrid.h"

#include <QAction>
#include <QGridLayout>
#include <QLabel>
#include <QProgressBar>
#include <QSlider>
#include <QSpinBox>
#include <QThread>
#include <QToolBar>
#include <QToolButton>
#include <QVBoxLayout>

#include "ProjectDocument.h"
#include "RunHeadline.h"
#include "Theme.h"
#include "charts/DeviceCharts.h"
#include "charts/LossScaleChart.h"
#include "charts/MetricChart.h"
#include "charts/TimelineChart.h"
#include "nn/BatchNorm.h"
#include "nn/Summary.h"
#include "store/RunStore.h"

namespace mlui {

static QString q(const std::string& s) { return QString::fromStdString(s); }

static QString hex(uint64_t v) { return QStringLiteral("0x%1").arg(v, 16, 16, QLatin1Char('0')); }

DashboardView::DashboardView(ProjectDocument* doc, TrainingSession* session, std::function<QString()> storePath, QWidget* parent)
    : QWidget(parent), doc_(doc), session_(session), storePath_(std::move(storePath)) {
  auto* root = new QVBoxLayout(this);
  root->setContentsMargins(0, 0, 0, 0);
  root->setSpacing(0);

  // Run bar.
  auto* bar = new QToolBar(this);
  bar->setObjectName(QStringLiteral("RunBar"));
  bar->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  bar->setIconSize(QSize(18, 18));
  train_ = bar->addAction(icon(QStringLiteral("play")), tr("Train"));
  train_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
  train_->setToolTip(tr("Start training the project (Ctrl+R)"));
  pause_ = bar->addAction(icon(QStringLiteral("pause")), tr("Pause"));
  pause_->setCheckable(true);
  pause_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_P));
  stop_ = bar->addAction(icon(QStringLiteral("stop")), tr("Stop"));
  stop_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Period));
  stop_->setToolTip(tr("Stop after the current step; the run is kept as cancelled (Ctrl+.)"));
  for (QAction* a : {train_, pause_, stop_})
    if (auto* b = qobject_cast<QToolButton*>(bar->widgetForAction(a))) setRole(b, "runButton");
  bar->addSeparator();
  bar->addWidget(new QLabel(tr(" Stop after "), bar));
  maxSteps_ = new QSpinBox(bar);
  maxSteps_->setRange(0, 100000000);
  maxSteps_->setSpecialValueText(tr("all epochs"));
  maxSteps_->setSuffix(tr(" steps"));
  maxSteps_->setToolTip(tr("Stop after this many optimizer steps (0: run every epoch)"));
  bar->addWidget(maxSteps_);
  bar->addSeparator();
  bar->addWidget(new QLabel(tr(" Smoothing "), bar));
  smoothing_ = new QSlider(Qt::Horizontal, bar);
  smoothing_->setRange(0, 99);
  smoothing_->setValue(85);
  smoothing_->setFixedWidth(130);
  smoothing_->setToolTip(tr("Smoothing of the per-step curves (exponential moving average)"));
  smoothing_->setAccessibleName(tr("Curve smoothing"));
  bar->addWidget(smoothing_);
  root->addWidget(bar);

  auto* body = new QWidget(this);
  auto* v = new QVBoxLayout(body);
  v->setContentsMargins(14, 10, 14, 10);
  v->setSpacing(8);
  root->addWidget(body, 1);

  headline_ = new RunHeadline(body);
  v->addWidget(headline_);

  straggler_ = new QLabel(body);
  straggler_->setObjectName(QStringLiteral("StragglerBanner"));
  straggler_->setWordWrap(true);
  straggler_->setTextFormat(Qt::PlainText);
  setRole(straggler_, "fitBanner");
  straggler_->hide();
  v->addWidget(straggler_);

  sync_ = new QLabel(tr("Replica sync check: appears after the first epoch — equal weight checksums on every "
                        "replica prove the copies are identical."),
                     body);
  sync_->setObjectName(QStringLiteral("SyncCheck"));
  sync_->setWordWrap(true);
  sync_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  setRole(sync_, "syncIdle");
  v->addWidget(new SteadyLabelHolder(sync_, body));  // it changes every epoch: no layout pass each time
  bnNote_ = new QLabel(body);
  bnNote_->setObjectName(QStringLiteral("BatchNormNote"));
  bnNote_->setWordWrap(true);
  setRole(bnNote_, "bannerInfo");
  bnNote_->hide();
  v->addWidget(bnNote_);

  // Charts.
  loss_ = new MetricChart(tr("Loss"), tr("step"), tr("loss"), QStringLiteral("loss"), trainColor(), true, body);
  accuracy_ = new MetricChart(tr("Accuracy"), tr("step"), tr("accuracy (%)"), QStringLiteral("accuracy"),
                              QColor(0x59, 0xA1, 0x4F), true, body);
  accuracy_->setFixedValueRange(0, 100);
  accuracy_->setUnit(QStringLiteral("%"));
  throughput_ = new MetricChart(tr("Throughput"), tr("step"), tr("samples / s"), QStringLiteral("throughput"),
                                QColor(0xB0, 0x7A, 0xA1), false, body);
  throughput_->setUnit(tr("samples/s"));
  util_ = new UtilizationChart(body);
  breakdown_ = new StepBreakdownChart(body);
  timeline_ = new TimelineChart(body);
  lossScale_ = new LossScaleChart(body);
  gpuNumbers_ = new QLabel(body);
  gpuNumbers_->setObjectName(QStringLiteral("GpuNumbers"));
  gpuNumbers_->setWordWrap(true);
  setRole(gpuNumbers_, "caption");
  shareNumbers_ = new QLabel(body);
  shareNumbers_->setObjectName(QStringLiteral("SyncShare"));
  shareNumbers_->setWordWrap(true);
  setRole(shareNumbers_, "caption");
  phaseLegend_ = new QLabel(body);
  phaseLegend_->setObjectName(QStringLiteral("PhaseLegend"));
  phaseLegend_->setWordWrap(true);
  setRole(phaseLegend_, "caption");
  updatePhaseLegend(false);

  auto wrap = [this, body](QWidget* chart, QLabel* caption) {
    auto* w = new QWidget(body);
    auto* l = new QVBoxLayout(w);
    l->setContentsMargins(0, 0, 0, 0);
    l->setSpacing(2);
    l->addWidget(chart, 1);
    const bool steady = caption == shareNumbers_ || caption == gpuNumbers_;  // new text every second
    l->addWidget(steady ? static_cast<QWidget*>(new SteadyLabelHolder(caption, w)) : caption);
    return w;
  };
  // Three charts a row on a wide window, two or one on a narrow one.
  auto* grid = chartGrid_ = new ReflowGrid(3, body);
  grid->setSpacing(10);
  for (QWidget* w :
       {static_cast<QWidget*>(loss_), static_cast<QWidget*>(accuracy_), wrap(util_, gpuNumbers_), wrap(breakdown_, shareNumbers_),
        static_cast<QWidget*>(throughput_), wrap(timeline_, phaseLegend_), static_cast<QWidget*>(lossScale_)})
    grid->addWidget(w);
  grid->setItemVisible(lossScale_, false);
  v->addWidget(grid, 1);

  renderLater_ = new QTimer(this);
  renderLater_->setSingleShot(true);
  connect(renderLater_, &QTimer::timeout, this, &DashboardView::render);
  connect(session_, &TrainingSession::runEnded, this, [this] {
    budget_.setLoad(0, QThread::idealThreadCount());  // the cores are free again: full rate
    sinceNumbers_.invalidate();                       // the final numbers, now
    render();
  });
  connect(train_, &QAction::triggered, this, &DashboardView::startTraining);
  connect(pause_, &QAction::toggled, session_, &TrainingSession::setPaused);
  connect(stop_, &QAction::triggered, session_, &TrainingSession::stop);
  connect(smoothing_, &QSlider::valueChanged, this, [this](int v) {
    loss_->setSmoothing(v / 100.0);
    accuracy_->setSmoothing(v / 100.0);
    throughput_->setSmoothing(v / 100.0);
    updateNumbers();
  });
  loss_->setSmoothing(0.85);
  accuracy_->setSmoothing(0.85);
  throughput_->setSmoothing(0.85);
  accuracy_->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignBottom | Qt::AlignRight);
  connect(session_, &TrainingSession::stateChanged, this, &DashboardView::onStateChanged);
  connect(session_, &TrainingSession::eventsArrived, this, &DashboardView::onEvents);
  onStateChanged(session_->state());
  updateNumbers();
}

QLabel* DashboardView::syncShareLabel() const { return headline_->syncShareLabel(); }

bool DashboardView::isAccuracyMetric() const {
  return metricName_.startsWith(QLatin1String("acc")) || metricName_ == QLatin1String("binary_accuracy");
}

std::vector<LiveChart*> DashboardView::charts() const {
  return {loss_, accuracy_, util_, breakdown_, throughput_, timeline_, lossScale_};
}

void DashboardView::setMaxSteps(int steps) { maxSteps_->setValue(steps); }

void DashboardView::setExternalRun(bool busy) {
  externalBusy_ = busy;
  onStateChanged(session_->state());
}

void DashboardView::setBlockedReason(const QString& reason) {
  blocked_ = reason;
  onStateChanged(session_->state());
}

// Why Train is off, in the title where "press Train" would stand: the tooltip alone was not seen.
void DashboardView::updateIdleReason() {
  if (externalBusy_)
    headline_->setIdleReason(tr("a lesson or scaling experiment is running on the Learn screen; Train comes back when it ends."));
  else if (!blocked_.isEmpty())
    headline_->setIdleReason(tr("the model does not fit the data (Model screen, where Fit to data fixes it):\n%1").arg(blocked_));
  else
    headline_->setIdleReason(QString());
}

void DashboardView::updateTrainTip() {
  if (externalBusy_)
    train_->setToolTip(tr("A lesson or scaling experiment is running on the Learn screen: wait for it to end"));
  else if (!blocked_.isEmpty())
    train_->setToolTip(tr("Train is off until the model fits the data:\n%1").arg(blocked_));
  else
    train_->setToolTip(tr("Start training the project (Ctrl+R)"));
}

void DashboardView::startTraining() {
  if (session_->isActive() || externalBusy_ || !blocked_.isEmpty()) return;
  session_->start(doc_->project(), storePath_(), maxSteps_->value());
}

void DashboardView::onStateChanged(TrainingSession::State s) {
  const bool active = s != TrainingSession::State::Idle;
  train_->setEnabled(!active && !externalBusy_ && blocked_.isEmpty());
  updateTrainTip();
  updateIdleReason();
  // A run that cannot pause (a multi-worker run) says why on the button and in the status bar.
  const QString noPause = session_->pauseUnavailable();
  pause_->setEnabled((s == TrainingSession::State::Running || s == TrainingSession::State::Paused) && noPause.isEmpty());
  pause_->setToolTip(noPause);  // "": the action's own text
  stop_->setEnabled(active && s != TrainingSession::State::Stopping);
  {
    QSignalBlocker block(pause_);
    pause_->setChecked(s == TrainingSession::State::Paused);
  }
  maxSteps_->setEnabled(!active);
}

void DashboardView::onEvents(const std::vector<ml::Event>& events) {
  for (const auto& e : events) {
    if (const auto* s = std::get_if<ml::StepEvent>(&e))
      onStep(*s);
    else if (const auto* d = std::get_if<ml::DeviceSample>(&e))
      util_->addSample(*d);
    else if (const auto* pa = std::get_if<ml::RunPaused>(&e))
      util_->addPause(*pa);
    else if (const auto* ep = std::get_if<ml::EpochEvent>(&e))
      onEpoch(*ep);
    else if (const auto* st = std::get_if<ml::RunStarted>(&e))
      onRunStarted(*st);
    else if (const auto* f = std::get_if<ml::RunFinished>(&e))
      onFinished(*f);
    else if (const auto* w = std::get_if<ml::WatchdogWarning>(&e))
      onStraggler(*w);
  }
  dirty_ = true;
  if (!isVisible() || window()->isMinimized()) return;  // drawn when the page is shown again
  const qint64 due = budget_.intervalMs();
  if (!sinceRender_.isValid() || sinceRender_.elapsed() >= due)
    render();
  else if (!renderLater_->isActive())
    renderLater_->start(static_cast<int>(due - sinceRender_.elapsed()));
}

void DashboardView::render() {
  renderLater_->stop();
  const double cpu0 = FrameBudget::threadCpuMs();
  sinceRender_.restart();
  dirty_ = false;
  breakdown_->updateBars();
  timeline_->updateBars();
  updatePhaseLegend(timeline_->barCount(Phase::Network) > 0);
  bool drew = false;
  for (LiveChart* c : charts()) drew = c->drawFrame() || drew;
  if (!sinceNumbers_.isValid() || sinceNumbers_.elapsed() >= 300) {
    sinceNumbers_.restart();
    updateNumbers();
  }
  // This frame's replots and labels plus the paints of the last one, in CPU time: what drawing costs.
  double ms = FrameBudget::threadCpuMs() - cpu0;
  for (LiveChart* c : charts()) ms += c->takePaintMs();
  if (!drew) return;
  budget_.recordFrame(ms);
  if (session_->isActive()) session_->recordUiFrame(ms);
}

void DashboardView::showEvent(QShowEvent* e) {
  QWidget::showEvent(e);
  if (dirty_) render();
}

// The watchdog named a straggler: say which replica, on which device, in which phase, and what
// it costs the others, until the next run starts.
void DashboardView::onStraggler(const ml::WatchdogWarning& w) {
  straggler_->setText(tr("Straggler: replica %1 (%2) reaches the all-reduce %3 ms after the others, in %4 (median of the "
                         "last steps; a replica's compute takes %5 ms). Every other replica waits for it at each step.")
                          .arg(w.replica)
                          .arg(QString::fromStdString(w.device))
                          .arg(w.lateSeconds * 1e3, 0, 'f', 1)
                          .arg(QString::fromStdString(w.phase))
                          .arg(w.typicalSeconds * 1e3, 0, 'f', 1));
  straggler_->setToolTip(QString::fromStdString(w.message));
  straggler_->show();
}

// The timeline's colours (input first: each micro-batch starts with it); Network (several workers)
// only while the timeline draws it.
void DashboardView::updatePhaseLegend(bool network) {
  if (legendHasNetwork_ == network && !phaseLegend_->text().isEmpty()) return;
  legendHasNetwork_ = network;
  QStringList parts;
  for (Phase p : {Phase::Input, Phase::Forward, Phase::Backward, Phase::Wait, Phase::AllReduce, Phase::Network, Phase::Optimizer,
                  Phase::AllGather})
    if (p != Phase::Network || network)
      parts << QStringLiteral("<span style='color:%1'>&#9632;</span> %2").arg(phaseColor(p).name(), phaseName(p));
  phaseLegend_->setText(parts.join(QStringLiteral("&nbsp;&nbsp; ")));
}

void DashboardView::onRunStarted(const ml::RunStarted& e) {
  straggler_->hide();
  started_ = e;
  // The run's own project (a resumed run's is the stored one, not the open document).
  try {
    runProject_ = ml::Project::fromJson(nlohmann::json::parse(e.projectJson));
  } catch (const std::exception&) {
    runProject_ = doc_->project();
  }
  bnNote_->hide();
  deviceNames_.clear();
  budget_.reset();
  budget_.setLoad(e.replicas, QThread::idealThreadCount());
  for (const auto& d : e.devices) deviceNames_.push_back(d.substr(0, d.find(' ')));
  // Several workers on one host: "vm/worker2/cpu:1" says the host on every lane; "worker2/cpu:1" fits.
  if (e.workers > 1 && !e.hosts.empty() &&
      std::all_of(e.hosts.begin(), e.hosts.end(), [&](const std::string& h) { return h == e.hosts[0]; }))
    for (auto& n : deviceNames_)
      if (n.rfind(e.hosts[0] + "/", 0) == 0) n = n.substr(e.hosts[0].size() + 1);
  if (deviceNames_.empty())
    for (int i = 0; i < e.replicas; ++i) deviceNames_.push_back("replica " + std::to_string(i));
  for (LiveChart* c : charts()) {
    c->setLive(true, static_cast<double>(e.totalSteps));
    c->clearData();  // drawn by the frame after these events, not by a replot of its own
  }
  showLossScale(false);  // until a step says it has a loss scale
  util_->setDevices(deviceNames_);
  breakdown_->setDevices(deviceNames_);
  timeline_->setDevices(deviceNames_);
  const auto& metrics = runProject_.training.metrics;
  metricName_ = metrics.empty() ? QStringLiteral("accuracy") : q(metrics.front());
  const bool isAccuracy = isAccuracyMetric();
  accuracy_->setUnit(isAccuracy ? QStringLiteral("%") : QString());
  if (auto* t = qobject_cast<QCPTextElement*>(accuracy_->plotLayout()->element(0, 0)))
    t->setText(isAccuracy ? tr("Accuracy") : metricName_.toUpper());
  accuracy_->yAxis->setLabel(isAccuracy ? tr("accuracy (%)") : metricName_);
  if (isAccuracy) accuracy_->setFixedValueRange(0, 100);
  headline_->start(e, metricName_, runProject_.training.accumulate);
  setRole(sync_, "syncIdle");
  setSteadyWrappedText(sync_, tr("Replica sync check: waiting for the end of epoch %1…").arg(e.resumeEpochsDone + 1));
  pendingSyncRole_ = nullptr;
  sinceSync_.invalidate();  // the first epoch's check shows at once
  if (e.resumeRun) showStoredHistory(*e.resumeRun, e.resumeStep);
}

// Seven charts go 4 + 3 where the window is wide enough, not 3 + 3 + 1 below the fold.
void DashboardView::showLossScale(bool on) {
  chartGrid_->setMaxColumns(on ? 4 : 3);
  chartGrid_->setItemVisible(lossScale_, on);
}

void DashboardView::onStep(const ml::StepEvent& e) {
  const double step = static_cast<double>(e.step);
  loss_->addStep(step, e.loss);
  accuracy_->addStep(step, isAccuracyMetric() ? e.metric * 100.0 : e.metric);
  if (e.stepTime > 0) throughput_->addStep(step, static_cast<double>(e.samples) / e.stepTime);
  headline_->addStep(e);
  breakdown_->addStep(e);
  timeline_->addStep(e);
  if (e.lossScale > 0) {
    if (lossScale_->isHidden()) showLossScale(true);
    lossScale_->addStep(step, e.lossScale, e.skipped);
  }
  last_ = e;
}

void DashboardView::onEpoch(const ml::EpochEvent& e) {
  const double step = static_cast<double>(last_.step);
  if (e.valLoss) loss_->addValidation(step, *e.valLoss);
  if (e.valMetric) accuracy_->addValidation(step, isAccuracyMetric() ? *e.valMetric * 100.0 : *e.valMetric);
  headline_->addEpoch(e);
  updateBatchNormNote(e);
  if (e.inSync && !e.checksums.empty()) {
    pendingSyncRole_ = "syncOk";
    pendingSync_ = e.checksums.size() == 1
                       ? tr("✓ One replica after epoch %1: nothing to keep in sync (weight checksum %2).")
                             .arg(e.epoch)
                             .arg(hex(e.checksums.front()))
                       : tr("✓ Replicas in sync after epoch %1: all %2 replicas have equal weight checksums (%3).")
                             .arg(e.epoch)
                             .arg(e.checksums.size())
                             .arg(hex(e.checksums.front()));
    if (!sinceSync_.isValid() || sinceSync_.elapsed() >= 1000) showPendingSync();
  } else {
    QStringList parts;
    for (size_t i = 0; i < e.checksums.size(); ++i)
      parts << QStringLiteral("%1 %2").arg(i < deviceNames_.size() ? q(deviceNames_[i]) : QString::number(i),
                                           hex(e.checksums[i]));
    pendingSyncRole_ = "syncBad";
    pendingSync_ =
        tr("✗ Replicas differ after epoch %1 — checksum mismatch: %2").arg(e.epoch).arg(parts.join(QStringLiteral(", ")));
    showPendingSync();  // a mismatch is shown at once
  }
}

// Read at once, on this thread: a stored run's curves (no per-replica timings) load in milliseconds,
// and the resumed run's first new step must be drawn after them. The store may already have
// dropped the steps after the checkpoint, or not yet: upToStep keeps the same ones either way.
void DashboardView::showStoredHistory(int64_t runId, int64_t upToStep) {
  std::vector<ml::StepEvent> steps;
  std::vector<ml::EpochEvent> epochs;
  try {
    auto store = ml::RunStore::open(storePath_().toStdString());
    steps = store.loadCurves(runId);
    epochs = store.loadRun(runId).epochs;
  } catch (const std::exception&) {
    return;  // the charts start at the checkpoint instead; the run itself goes on
  }
  std::map<int, int64_t> lastStepOfEpoch;
  for (const ml::StepEvent& e : steps) {
    if (e.step > upToStep) continue;
    const double step = static_cast<double>(e.step);
    loss_->addStep(step, e.loss);
    accuracy_->addStep(step, isAccuracyMetric() ? e.metric * 100.0 : e.metric);
    if (e.stepTime > 0) throughput_->addStep(step, static_cast<double>(e.samples) / e.stepTime);
    headline_->addStep(e);
    last_ = e;
    lastStepOfEpoch[e.epoch] = std::max(lastStepOfEpoch[e.epoch], e.step);
  }
  for (const ml::EpochEvent& e : epochs) {
    if (e.epoch > started_.resumeEpochsDone || !lastStepOfEpoch.count(e.epoch)) continue;
    const double step = static_cast<double>(lastStepOfEpoch[e.epoch]);
    if (e.valLoss) loss_->addValidation(step, *e.valLoss);
    if (e.valMetric) accuracy_->addValidation(step, isAccuracyMetric() ? *e.valMetric * 100.0 : *e.valMetric);
    headline_->addEpoch(e);
  }
}

// Validation normalises with BatchNormalization's moving statistics, which start at mean 0 and
// variance 1 and take many steps to forget that (momentum 0.99: 459 passes to 1%): meanwhile
// validation lags training for a reason that is not overfitting, and the dashboard says so.
void DashboardView::updateBatchNormNote(const ml::EpochEvent& e) {
  double momentum = -1;
  for (const auto& l : runProject_.model.layers)
    if (l.type == "BatchNormalization") momentum = std::max(momentum, l.args.value("momentum", 0.99));
  const int accumulate = std::max(1, runProject_.training.accumulate);
  const int64_t updates = last_.step * accumulate;
  const double left = momentum > 0 ? ml::movingStatsStartShare(momentum, updates) : 0;
  if ((!e.valMetric && !e.valLoss) || left < 0.01) {
    bnNote_->hide();
    return;
  }
  const int64_t settled = (ml::movingStatsSettleUpdates(momentum) + accumulate - 1) / accumulate;
  bnNote_->setText(tr("Validation uses BatchNormalization's moving mean and variance (momentum %1), which after %2 steps "
                      "still hold %3% of their starting values (mean 0, variance 1): validation lags training until about "
                      "step %4, when that share falls under 1%. Training accuracy uses each batch's own statistics.")
                       .arg(momentum)
                       .arg(last_.step)
                       .arg(left * 100, 0, 'f', 0)
                       .arg(settled));
  bnNote_->show();
}

void DashboardView::showPendingSync() {
  if (!pendingSyncRole_) return;
  sinceSync_.restart();
  setRole(sync_, pendingSyncRole_);
  setSteadyWrappedText(sync_, pendingSync_);
  pendingSyncRole_ = nullptr;
}

void DashboardView::onFinished(const ml::RunFinished& e) {
  for (LiveChart* c : charts()) c->setLive(false);  // the last frame fits the axes to the data
  sinceNumbers_.invalidate();                       // the next frame shows the final numbers, whatever their timers say
  sinceShare_.invalidate();
  headline_->finish(e);
}

// NVML's latest figures per physical GPU; otherwise what the computed line is, and on GPUs why
// NVML is not used (the run's telemetry line).
void DashboardView::updateGpuNumbers() {
  const auto& gpus = util_->latestGpuSamples();
  if (gpus.empty()) {
    setSteadyWrappedText(gpuNumbers_, started_.telemetry.empty()
                                          ? tr("Share of each replica's step time spent computing (forward, backward, update).")
                                          : q(started_.telemetry) + QLatin1Char('.'));
    return;
  }
  QStringList parts;
  for (const auto& [gpu, s] : gpus) {
    QString p = tr("gpu:%1 %2% busy · %3").arg(gpu).arg(s.utilization * 100, 0, 'f', 0).arg(gpuSampleText(s));
    if (s.gpuReplicas > 1) p += tr(" (one GPU for %1 replicas)").arg(s.gpuReplicas);
    parts << p;
  }
  setSteadyWrappedText(gpuNumbers_, tr("NVML: %1").arg(parts.join(QStringLiteral("; "))));
}

void DashboardView::updateNumbers() {
  if (headline_->figures().steps == 0) {
    headline_->update(0, 0);
    setSteadyWrappedText(shareNumbers_, tr("Compute, exposed all-reduce and waiting for the slowest replica, per device."));
    updateGpuNumbers();
    return;
  }
  const double ar = breakdown_->allreduceShare() * 100, wait = breakdown_->waitShare() * 100;
  const double net = breakdown_->networkShare() * 100;   // several workers only
  const double ag = breakdown_->allgatherShare() * 100;  // the sharded optimizer only
  headline_->update(loss_->lastSmoothed(), (ar + net + ag + wait) / 100);
  if (pendingSyncRole_ && (!sinceSync_.isValid() || sinceSync_.elapsed() >= 1000 || !session_->isActive())) showPendingSync();
  // Once a second is enough for a 20-step mean (and a sentence that changes faster is hard to read).
  if (!sinceShare_.isValid() || sinceShare_.elapsed() >= 1000) {
    sinceShare_.restart();
    const double in = breakdown_->inputShare() * 100;  // the rows gathered (and copied to a GPU)
    QString parts = in > 0 ? tr("input %1% · ").arg(in, 0, 'f', 1) : QString();
    parts += tr("compute %1% · all-reduce %2%").arg(100 - in - ar - net - ag - wait, 0, 'f', 1).arg(ar, 0, 'f', 1);
    if (net > 0) parts += tr(" · network %1%").arg(net, 0, 'f', 1);
    if (ag > 0) parts += tr(" · all-gather %1%").arg(ag, 0, 'f', 1);
    parts += tr(" · waiting %1%").arg(wait, 0, 'f', 1);
    setSteadyWrappedText(shareNumbers_, tr("Of each replica's step time (last 20 steps): %1").arg(parts));
    updateGpuNumbers();
  }
}

}  // namespace mlui
