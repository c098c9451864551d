// The dashboard's title, stat cards and progress, from the run's figures.
#include "RunHeadline.h"

#include <QFrame>
#include <QLabel>
#include <QProgressBar>
#include <QThread>
#include <QVBoxLayout>

#include "ReflowGrid.h"
#include "Theme.h"
#include "nn/Summary.h"

namespace mlui {

static QString q(const std::string& s) { return QString::fromStdString(s); }

QString durationText(double s) {
  if (s < 1) return QStringLiteral("%1 ms").arg(s * 1000, 0, 'f', s < 0.01 ? 1 : 0);  // a tiny run is not "0.0 s"
  if (s < 60) return QStringLiteral("%1 s").arg(s, 0, 'f', 1);
  const int m = static_cast<int>(s) / 60;
  if (m < 60) return QStringLiteral("%1 min %2 s").arg(m).arg(static_cast<int>(s) % 60);
  return QStringLiteral("%1 h %2 min").arg(m / 60).arg(m % 60);
}

RunHeadline::RunHeadline(QWidget* parent) : QWidget(parent) {
  auto* v = new QVBoxLayout(this);
  v->setContentsMargins(0, 0, 0, 0);
  v->setSpacing(8);
  title_ = new QLabel(this);
  title_->setObjectName(QStringLiteral("RunTitle"));
  title_->setTextFormat(Qt::RichText);
  title_->setWordWrap(true);
  v->addWidget(new SteadyLabelHolder(title_, this));  // set at each start and end of a run: no layout pass
  cards_ = new ReflowGrid(7, this);                   // seven cards in one row, or two rows on a narrow window
  cards_->setObjectName(QStringLiteral("StatCards"));
  cards_->setSpacing(8);
  cards_->addWidget(statCard(tr("Step"), &stepValue_, tr("Optimizer updates done / planned: one update per global batch")), 0);
  cards_->addWidget(statCard(tr("Epoch"), &epochValue_, tr("Passes over the training set done / planned")), 0);
  cards_->addWidget(statCard(tr("Loss (smoothed)"), &lossValue_,
                             tr("Training loss of the latest steps, smoothed as set by the Smoothing slider")),
                    0);
  cards_->addWidget(statCard(tr("Validation"), &valValue_, tr("The metric on the held-out data at the end of the latest epoch")),
                    0);
  cards_->addWidget(statCard(tr("Throughput"), &speedValue_,
                             tr("Training samples per second over all devices: of the latest steps while the run trains, of "
                                "the whole run's step time once it ends (validation and pauses left out)"),
                             &speedCaption_),
                    0);
  cards_->addWidget(statCard(tr("Sync overhead"), &syncShareValue_,
                             tr("Share of each replica's step time spent in all-reduce not hidden behind backward, in the "
                                "sharded optimizer's all-gather, and waiting for the slowest replica")),
                    0);
  cards_->addWidget(statCard(tr("Elapsed / left"), &timeValue_,
                             tr("Training time so far (paused time excluded) and the estimate for the remaining steps; "
                                "once the run ends, its whole time"),
                             &timeCaption_),
                    0);
  v->addWidget(cards_);
  progress_ = new QProgressBar(this);
  progress_->setTextVisible(false);
  progress_->setFixedHeight(6);
  progress_->setRange(0, 1);
  progress_->setValue(0);
  v->addWidget(progress_);
  showIdle();
  update(0, 0);
}

QWidget* RunHeadline::statCard(const QString& caption, QLabel** value, const QString& tip, QLabel** captionLabel) {
  auto* card = new QFrame(this);
  card->setToolTip(tip);
  setRole(card, "card");
  auto* l = new QVBoxLayout(card);
  l->setContentsMargins(10, 6, 10, 6);
  l->setSpacing(0);
  auto* c = new QLabel(caption, card);
  setRole(c, "caption");
  *value = new QLabel(QStringLiteral("—"), card);
  setRole(*value, "bigNumber");
  (*value)->setObjectName(QStringLiteral("stat_") + caption.section(QLatin1Char(' '), 0, 0));
  l->addWidget(c);
  l->addWidget(*value);
  if (captionLabel) *captionLabel = c;
  return card;
}

void RunHeadline::setIdleReason(const QString& reason) {
  idleReason_ = reason;
  if (!shown_) showIdle();
}

void RunHeadline::showIdle() {
  setRole(title_, idleReason_.isEmpty() ? "" : "error");
  setSteadyWrappedText(
      title_, idleReason_.isEmpty()
                  ? tr("No run yet — press Train (Ctrl+R) to train the project and watch the replicas.")
                  : tr("Train is off: %1").arg(idleReason_.toHtmlEscaped().replace(QLatin1Char('\n'), QStringLiteral("<br>"))));
}

void RunHeadline::start(const ml::RunStarted& e, const QString& metric, int accumulate) {
  shown_ = true;
  started_ = e;
  figures_ = ml::figuresFor(e, QThread::idealThreadCount());
  haveStep_ = false;
  speedEma_ = 0;
  lastValMetric_.reset();
  lastValLoss_.reset();
  isAccuracy_ = metric.startsWith(QLatin1String("acc")) || metric == QLatin1String("binary_accuracy");
  speedCaption_->setText(tr("Throughput"));
  timeCaption_->setText(tr("Elapsed / left"));
  progress_->setRange(0, static_cast<int>(std::max<int64_t>(1, e.totalSteps)));
  progress_->setValue(0);
  setRole(title_, "");
  QString text = tr("<b>%1</b> · %2 · lr %3")
                     .arg(q(e.runName).toHtmlEscaped(), q(ml::shardSentence(e.replicas, e.globalBatch, accumulate)))
                     .arg(e.lr, 0, 'g', 4);
  if (e.resumeRun) text += tr(" · resumed after step %1").arg(e.resumeStep);
  setSteadyWrappedText(title_, text);
  update(0, 0);
}

void RunHeadline::addStep(const ml::StepEvent& e) {
  figures_.addStep(e);
  if (e.stepTime > 0) {
    const double sps = static_cast<double>(e.samples) / e.stepTime;
    speedEma_ = haveStep_ ? 0.9 * speedEma_ + 0.1 * sps : sps;
  }
  last_ = e;
  haveStep_ = true;
}

void RunHeadline::addEpoch(const ml::EpochEvent& e) {
  lastValLoss_ = e.valLoss;
  lastValMetric_ = e.valMetric;
}

void RunHeadline::finish(const ml::RunFinished& e) {
  figures_.finish(e);
  setSteadyWrappedText(
      title_,
      title_->text().section(QStringLiteral(" — "), 0, 0) +
          tr(" — %1 after %2 steps, %3").arg(q(ml::toString(e.status))).arg(e.steps).arg(durationText(figures_.elapsedSeconds)));
  speedCaption_->setText(tr("Throughput (run)"));
  timeCaption_->setText(tr("Elapsed"));
}

void RunHeadline::update(double smoothedLoss, double syncShare) {
  if (!haveStep_) {
    for (QLabel* l : {stepValue_, epochValue_, lossValue_, valValue_, speedValue_, syncShareValue_, timeValue_}) {
      releaseSteadyText(l);
      l->setText(QStringLiteral("—"));
    }
    return;
  }
  setSteadyText(stepValue_, QStringLiteral("%1 / %2").arg(last_.step).arg(started_.totalSteps));
  setSteadyText(epochValue_, QStringLiteral("%1 / %2").arg(last_.epoch).arg(started_.epochs));
  setSteadyText(lossValue_, QString::number(smoothedLoss, 'f', 4));
  if (lastValMetric_)
    setSteadyText(valValue_, isAccuracy_ ? QStringLiteral("%1%").arg(*lastValMetric_ * 100, 0, 'f', 1)
                                         : QString::number(*lastValMetric_, 'f', 4));
  else if (lastValLoss_)
    setSteadyText(valValue_, tr("loss %1").arg(*lastValLoss_, 0, 'f', 4));
  else
    setSteadyText(valValue_, QStringLiteral("—"));
  const double speed = figures_.ended ? figures_.samplesPerSec() : speedEma_;
  setSteadyText(speedValue_, tr("%1/s").arg(q(ml::withThousands(static_cast<int64_t>(speed)))));
  setSteadyText(syncShareValue_, QStringLiteral("%1%").arg(syncShare * 100, 0, 'f', 1));
  const double elapsed = figures_.elapsedSeconds;
  if (figures_.ended) {
    setSteadyText(timeValue_, durationText(elapsed));
  } else {
    const double left = last_.step > 0 ? elapsed / static_cast<double>(last_.step) *
                                             static_cast<double>(std::max<int64_t>(0, started_.totalSteps - last_.step))
                                       : 0;
    setSteadyText(timeValue_, QStringLiteral("%1 / %2").arg(durationText(elapsed), durationText(left)));
  }
  progress_->setValue(static_cast<int>(last_.step));
}

}  // namespace mlui
