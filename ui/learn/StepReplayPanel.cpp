// Slow-motion replay of measured steps.
#include "learn/StepReplayPanel.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSlider>
#include <QSpinBox>
#include <QVBoxLayout>

#include <algorithm>

#include "Async.h"
#include "Theme.h"
#include "learn/RunChooser.h"
#include "store/RunStore.h"

namespace mlui {

namespace {
constexpr int64_t kMaxReplaySteps = 500;  // the first steps of a stored run are plenty to replay
constexpr int kLiveKeep = 200;            // the latest live steps kept
}  // namespace

StepReplayPanel::StepReplayPanel(std::function<QString()> storePath, QWidget* parent)
    : QWidget(parent), storePath_(std::move(storePath)) {
  auto* v = new QVBoxLayout(this);
  v->setContentsMargins(14, 10, 14, 10);
  v->setSpacing(8);
  v->addWidget(pageHint(tr("One optimizer step of mirrored training, drawn to the durations that were measured: the "
                           "global batch splits into shards, every replica runs forward and backward on its own "
                           "shard, the gradients are all-reduced, and every replica applies the same update."),
                        this));
  auto* row = new QHBoxLayout;
  row->addWidget(new QLabel(tr("Replay"), this));
  source_ = new QComboBox(this);
  source_->setMinimumWidth(320);
  source_->setAccessibleName(tr("Run to replay"));
  source_->addItem(tr("Latest Train run in this studio (live)"), QVariant::fromValue<qlonglong>(0));
  row->addWidget(source_, 1);
  auto* reload = new QPushButton(icon(QStringLiteral("refresh")), tr("Refresh list"), this);
  row->addWidget(reload);
  v->addLayout(row);
  row = new QHBoxLayout;  // the player on its own row: the window fits 1024 px
  row->addWidget(new QLabel(tr("Step"), this));
  stepBox_ = new QSpinBox(this);
  stepBox_->setRange(0, 0);
  stepBox_->setAccessibleName(tr("Step to show"));
  row->addWidget(stepBox_);
  play_ = new QPushButton(icon(QStringLiteral("play")), tr("Play"), this);
  play_->setToolTip(tr("Replay step after step, continuously"));
  single_ = new QPushButton(tr("Single step"), this);
  single_->setToolTip(tr("Replay one step, then stop"));
  row->addWidget(play_);
  row->addWidget(single_);
  row->addSpacing(12);
  row->addWidget(new QLabel(tr("Slow motion"), this));
  speed_ = new QSlider(Qt::Horizontal, this);
  speed_->setRange(1, 20);  // half-seconds per step
  speed_->setValue(8);
  speed_->setFixedWidth(120);
  speed_->setAccessibleName(tr("Seconds to replay one step"));
  row->addWidget(speed_);
  speedLabel_ = new QLabel(this);
  speedLabel_->setMinimumWidth(210);
  speedLabel_->setWordWrap(true);  // "4.0 s per step: 148148x slower than measured" is wider than its room at 1024 px
  row->addWidget(speedLabel_, 1);
  v->addLayout(row);
  info_ = new QLabel(this);
  info_->setWordWrap(true);
  setRole(info_, "caption");
  v->addWidget(info_);
  diagram_ = new StepDiagram(this);
  v->addWidget(diagram_, 1);

  timer_.setInterval(33);
  timer_.setTimerType(Qt::PreciseTimer);
  connect(&timer_, &QTimer::timeout, this, &StepReplayPanel::tick);
  followLater_.setSingleShot(true);
  connect(&followLater_, &QTimer::timeout, this, &StepReplayPanel::followLive);
  connect(reload, &QPushButton::clicked, this, &StepReplayPanel::refreshRuns);
  connect(source_, &QComboBox::currentIndexChanged, this, &StepReplayPanel::onSourceChanged);
  connect(stepBox_, &QSpinBox::valueChanged, this, [this](int v) {
    if (v - 1 != index_) showStep(v - 1);
  });
  connect(play_, &QPushButton::clicked, this, [this] { isPlaying() && !stopAtEnd_ ? pause() : play(); });
  connect(single_, &QPushButton::clicked, this, &StepReplayPanel::singleStep);
  connect(speed_, &QSlider::valueChanged, this, &StepReplayPanel::updateLabels);
  updateLabels();
}

double StepReplayPanel::secondsPerStep() const { return speed_->value() * 0.5; }

void StepReplayPanel::refreshRuns() {
  const QString path = storePath_();
  runAsync<std::vector<ml::RunSummary>>(
      this, [p = path.toStdString()] { return ml::RunStore::open(p).listRuns(); },
      [this](const Outcome<std::vector<ml::RunSummary>>& r) {
        if (!r.value) {
          Q_EMIT errorOccurred(tr("Cannot read the run store"), r.error);
          Q_EMIT runsListed();
          return;
        }
        const int at = fillRunCombo(source_, *r.value, 1);
        Q_EMIT runsListed();
        // Nothing live to show yet: replay the newest stored run instead of an empty diagram.
        if (at == 0 && live_.empty() && source_->count() > 1) source_->setCurrentIndex(1);
      });
}

void StepReplayPanel::onSourceChanged() {
  const qlonglong id = source_->currentData().toLongLong();
  if (id <= 0) {
    showingLive_ = true;
    pendingLive_ = 0;
    setSteps(live_, liveInfo_, tr("the latest run in this studio"));
    return;
  }
  loadRun(id);
}

void StepReplayPanel::loadRun(int64_t runId) {
  showingLive_ = false;
  selectRunQuietly(source_, runId);
  const int generation = ++loadGeneration_;
  struct Loaded {
    ml::RunDetail detail;
    std::vector<ml::StepEvent> steps;
  };
  runAsync<Loaded>(
      this,
      [p = storePath_().toStdString(), runId] {
        auto store = ml::RunStore::open(p);
        Loaded l{store.loadRun(runId), store.loadSteps(runId, 1, kMaxReplaySteps)};
        return l;
      },
      [this, generation, runId](const Outcome<Loaded>& r) {
        if (generation != loadGeneration_) return;
        if (!r.value) {
          Q_EMIT errorOccurred(tr("Cannot load run %1").arg(runId), r.error);
          Q_EMIT stepsLoaded();
          return;
        }
        StepSceneInfo info = sceneInfoFromConfig(r.value->detail.configJson);
        setSteps(r.value->steps, info, tr("run %1 (%2)").arg(runId).arg(QString::fromStdString(r.value->detail.summary.name)));
        if (autoPlay_ && !steps_.empty()) {
          autoPlay_ = false;
          play();
        }
        Q_EMIT stepsLoaded();
      });
}

void StepReplayPanel::setSteps(std::vector<ml::StepEvent> steps, const StepSceneInfo& info, const QString& source) {
  steps.erase(std::remove_if(steps.begin(), steps.end(), [](const ml::StepEvent& s) { return s.replicas.empty(); }), steps.end());
  steps_ = std::move(steps);
  storedInfo_ = info;
  pause();
  {
    QSignalBlocker block(stepBox_);
    stepBox_->setRange(steps_.empty() ? 0 : 1, static_cast<int>(steps_.size()));
  }
  // The first step pays for thread start-up and first-touch allocations: start on the second.
  showStep(steps_.empty() ? -1 : steps_.size() > 1 ? 1 : 0);
  info_->setText(steps_.empty() ? tr("No steps with per-replica timings in %1 yet.").arg(source)
                                : tr("Replaying %1: %2 steps with per-replica timings, %3 all-reduce.")
                                      .arg(source)
                                      .arg(steps_.size())
                                      .arg(info.algo == QLatin1String("none") ? tr("no") : info.algo));
}

void StepReplayPanel::showStep(int index) {
  if (index < 0 || index >= static_cast<int>(steps_.size())) {
    index_ = -1;
    diagram_->clear();
    updateLabels();
    return;
  }
  index_ = index;
  diagram_->setStep(steps_[static_cast<size_t>(index)], storedInfo_);
  diagram_->setProgress(0);
  {
    QSignalBlocker block(stepBox_);
    stepBox_->setValue(index + 1);
  }
  updateLabels();
}

void StepReplayPanel::onLiveRunStarted(const ml::RunStarted& started) {
  live_.clear();
  liveEnded_.clear();
  liveInfo_ = sceneInfoFromConfig(started.configJson);
  pendingLive_ = 0;
  if (showingLive_) setSteps({}, liveInfo_, tr("the latest run in this studio"));
}

void StepReplayPanel::onLiveEvents(const std::vector<ml::Event>& events) {
  size_t added = 0;
  for (const auto& e : events) {
    if (const auto* s = std::get_if<ml::StepEvent>(&e)) {
      if (s->replicas.empty()) continue;
      live_.push_back(*s);
      ++added;
    } else if (const auto* f = std::get_if<ml::RunFinished>(&e)) {
      liveEnded_ = QString::fromLatin1(ml::toString(f->status));
      if (showingLive_ && !steps_.empty() && isVisible()) describeLive();
    }
  }
  if (static_cast<int>(live_.size()) > kLiveKeep) live_.erase(live_.begin(), live_.end() - kLiveKeep);
  pendingLive_ = std::min(pendingLive_ + added, live_.size());
  if (pendingLive_ == 0 || !showingLive_) return;
  // While training runs at thousands of steps a second, following each batch of events would
  // lay out this panel's labels 25 times a second, hidden or not: a hidden panel catches up when
  // shown, a shown one follows 4 times a second.
  if (!isVisible() || window()->isMinimized()) return;
  if (sinceFollow_.isValid() && sinceFollow_.elapsed() < 250) {
    if (!followLater_.isActive()) followLater_.start(static_cast<int>(250 - sinceFollow_.elapsed()));
    return;
  }
  followLive();
}

void StepReplayPanel::showEvent(QShowEvent* e) {
  QWidget::showEvent(e);
  if (pendingLive_ > 0 && showingLive_)
    followLive();
  else if (showingLive_ && !steps_.empty() && !liveEnded_.isEmpty())
    describeLive();
}

void StepReplayPanel::followLive() {
  followLater_.stop();
  sinceFollow_.start();
  const size_t added = std::min(pendingLive_, live_.size());
  pendingLive_ = 0;
  if (added == 0 || !showingLive_) return;
  // What is shown follows the live steps: append only the new ones, keeping the same window of
  // the latest steps.
  steps_.insert(steps_.end(), live_.end() - static_cast<std::ptrdiff_t>(added), live_.end());
  const int drop = static_cast<int>(steps_.size()) - kLiveKeep;
  if (drop > 0) steps_.erase(steps_.begin(), steps_.begin() + drop);
  storedInfo_ = liveInfo_;
  if (isPlaying()) {  // keep the step on screen; it moved down by what was dropped
    index_ = std::max(0, index_ - std::max(0, drop));
    QSignalBlocker block(stepBox_);
    stepBox_->setRange(1, static_cast<int>(steps_.size()));
    stepBox_->setValue(index_ + 1);
    return;
  }
  {
    QSignalBlocker block(stepBox_);
    stepBox_->setRange(1, static_cast<int>(steps_.size()));
  }
  showStep(static_cast<int>(steps_.size()) - 1);  // when idle, follow the newest step
  diagram_->setProgress(diagram_->duration());
  describeLive();
}

// The header says which run and which step in the same numbers as the Step box (its position
// among the kept steps), and whether that run is still going.
void StepReplayPanel::describeLive() {
  const QString which = liveEnded_.isEmpty() ? tr("the run in progress (Train on the Dashboard)")
                                             : tr("the studio's last Train run (%1)").arg(liveEnded_);
  info_->setText(tr("Live: step %1 of %2, shown as %3 of the latest %4 steps kept. Press Play to replay them in slow motion.")
                     .arg(steps_.back().step)
                     .arg(which)
                     .arg(steps_.size())
                     .arg(steps_.size()));
}

void StepReplayPanel::play() {
  if (steps_.empty()) return;
  if (index_ < 0) showStep(0);
  stopAtEnd_ = false;
  clock_.start();
  timer_.start();
  updateLabels();
}

void StepReplayPanel::pause() {
  timer_.stop();
  stopAtEnd_ = false;
  updateLabels();
}

void StepReplayPanel::singleStep() {
  if (steps_.empty()) return;
  if (index_ < 0)
    showStep(0);
  else if (diagram_->progress() >= diagram_->duration() && index_ + 1 < static_cast<int>(steps_.size()))
    showStep(index_ + 1);
  else if (diagram_->progress() >= diagram_->duration())
    diagram_->setProgress(0);
  stopAtEnd_ = true;
  clock_.start();
  timer_.start();
  updateLabels();
}

void StepReplayPanel::tick() {
  const double dt = clock_.restart() / 1000.0;
  advance(dt);
}

void StepReplayPanel::advance(double seconds) {
  if (index_ < 0 || diagram_->duration() <= 0) return;
  const double perStep = secondsPerStep();
  double t = diagram_->progress() + seconds / perStep * diagram_->duration();
  if (t < diagram_->duration()) {
    diagram_->setProgress(t);
    return;
  }
  if (stopAtEnd_) {
    diagram_->setProgress(diagram_->duration());
    pause();
    return;
  }
  // Continuous: on to the next step (round to the first after the last).
  const int next = index_ + 1 < static_cast<int>(steps_.size()) ? index_ + 1 : 0;
  showStep(next);
}

void StepReplayPanel::updateLabels() {
  const double d = diagram_ ? diagram_->duration() : 0;
  if (d > 0)
    speedLabel_->setText(
        tr("%1 s per step: %2x slower than measured").arg(secondsPerStep(), 0, 'f', 1).arg(secondsPerStep() / d, 0, 'f', 0));
  else
    speedLabel_->setText(tr("%1 s per step").arg(secondsPerStep(), 0, 'f', 1));
  const bool pausable = isPlaying() && !stopAtEnd_;
  if (play_->text().isEmpty() || pausable != (play_->text() == tr("Pause"))) {  // the SVG icon loads only on a change
    play_->setText(pausable ? tr("Pause") : tr("Play"));
    play_->setIcon(icon(pausable ? QStringLiteral("pause") : QStringLiteral("play")));
  }
  play_->setEnabled(!steps_.empty());
  single_->setEnabled(!steps_.empty());
}

}  // namespace mlui
