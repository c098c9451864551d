// The dashboard's head: the run's title line, seven stat cards (step, epoch, loss, validation,
// throughput, sync overhead, elapsed) and the progress bar. Its figures come from core's
// RunFigures, fed every step, so the cards and the title agree with the Runs screen: after a run
// the throughput is the run's own (samples over step time) and the elapsed time is its end's.
#pragma once
#include <optional>

#include <QWidget>

#include "store/RunFigures.h"
#include "telemetry/Events.h"

class QLabel;
class QProgressBar;

namespace mlui {

class ReflowGrid;

class RunHeadline : public QWidget {
  Q_OBJECT
 public:
  explicit RunHeadline(QWidget* parent = nullptr);

  // Why Train waits (the model does not fit the data, another run uses the cores), shown in the
  // title until a run is shown; empty: the invitation to press Train.
  void setIdleReason(const QString& reason);
  // metric: the project's first metric ("accuracy", "mae"); accumulate: micro-batches per step.
  void start(const ml::RunStarted& e, const QString& metric, int accumulate);
  void addStep(const ml::StepEvent& e);
  void addEpoch(const ml::EpochEvent& e);
  void finish(const ml::RunFinished& e);
  // The cards' values: the smoothed loss (the loss chart's) and the sync share of the latest steps.
  void update(double smoothedLoss, double syncShare);

  const ml::RunFigures& figures() const { return figures_; }
  QLabel* title() const { return title_; }
  QLabel* throughputLabel() const { return speedValue_; }
  QLabel* elapsedLabel() const { return timeValue_; }
  QLabel* elapsedCaption() const { return timeCaption_; }
  QLabel* syncShareLabel() const { return syncShareValue_; }
  ReflowGrid* cards() const { return cards_; }

 private:
  QWidget* statCard(const QString& caption, QLabel** value, const QString& tip, QLabel** captionLabel = nullptr);
  void showIdle();

  QLabel* title_;
  ReflowGrid* cards_;
  QLabel *stepValue_, *epochValue_, *lossValue_, *valValue_, *speedValue_, *syncShareValue_, *timeValue_;
  QLabel *speedCaption_, *timeCaption_;
  QProgressBar* progress_;
  QString idleReason_;
  bool shown_ = false;  // a run has been shown since the dashboard was made
  ml::RunStarted started_;
  ml::RunFigures figures_;
  ml::StepEvent last_;
  bool haveStep_ = false;
  double speedEma_ = 0;
  std::optional<double> lastValMetric_, lastValLoss_;
  bool isAccuracy_ = true;
};

// "850 ms", "4.2 s", "3 min 12 s": a run's time.
QString durationText(double seconds);

}  // namespace mlui
