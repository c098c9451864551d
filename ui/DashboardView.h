// The live dashboard: Train / Pause / Stop, headline numbers, and the charts — loss, accuracy,
// utilization per device, step-time breakdown, throughput, a timeline of the last steps — plus
// the replica sync check. It consumes telemetry batches from TrainingSession (one per frame).
#pragma once
#include <functional>
#include <vector>

#include <QElapsedTimer>
#include <QTimer>
#include <QWidget>

#include "TrainingSession.h"
#include "charts/FrameBudget.h"
#include "project/Project.h"
#include "telemetry/Events.h"

class QAction;
class QLabel;
class QProgressBar;
class QSlider;
class QSpinBox;

namespace mlui {

class ProjectDocument;
class MetricChart;
class UtilizationChart;
class StepBreakdownChart;
class TimelineChart;
class LiveChart;
class LossScaleChart;
class ReflowGrid;
class RunHeadline;

class DashboardView : public QWidget {
  Q_OBJECT
 public:
  QLabel* stragglerBanner() const { return straggler_; }
  DashboardView(ProjectDocument* doc, TrainingSession* session, std::function<QString()> storePath, QWidget* parent = nullptr);

  QAction* trainAction() const { return train_; }
  QAction* pauseAction() const { return pause_; }
  QAction* stopAction() const { return stop_; }
  void setMaxSteps(int steps);

  MetricChart* lossChart() const { return loss_; }
  MetricChart* accuracyChart() const { return accuracy_; }
  MetricChart* throughputChart() const { return throughput_; }
  UtilizationChart* utilizationChart() const { return util_; }
  StepBreakdownChart* breakdownChart() const { return breakdown_; }
  TimelineChart* timelineChart() const { return timeline_; }
  // mixed_float16 with loss scaling: shown from the run's first step, hidden for other runs.
  LossScaleChart* lossScaleChart() const { return lossScale_; }
  QLabel* phaseLegend() const { return phaseLegend_; }
  QLabel* syncLabel() const { return sync_; }
  QLabel* syncShareLabel() const;  // the Sync overhead card's value
  RunHeadline* headline() const { return headline_; }
  // Shown when a validation figure arrives while BatchNormalization's moving averages still hold
  // much of their start values (validation uses them): why validation lags training.
  QLabel* batchNormNote() const { return bnNote_; }
  QLabel* shareNumbersLabel() const { return shareNumbers_; }
  // Below the utilization chart: where its figures come from; on GPUs with NVML, each GPU's latest
  // utilization, memory and temperature.
  QLabel* gpuNumbersLabel() const { return gpuNumbers_; }
  std::vector<LiveChart*> charts() const;

  void onEvents(const std::vector<ml::Event>& events);
  // Redraws every chart now (also after a run ends and when the page is shown).
  void render();
  // Another run (a lesson, a scaling experiment) uses the cores: Train is disabled meanwhile.
  void setExternalRun(bool busy);
  // Why Train cannot start now (the model does not fit the data, ...); empty when it can.
  void setBlockedReason(const QString& reason);
  const QString& blockedReason() const { return blocked_; }
  // The redraw budget: the frame rate it settled on, the measured cost per frame, the totals.
  const FrameBudget& frameBudget() const { return budget_; }

 protected:
  void showEvent(QShowEvent* e) override;

 private:
  void showLossScale(bool on);
  void startTraining();
  void onStateChanged(TrainingSession::State s);
  void onRunStarted(const ml::RunStarted& e);
  void onStraggler(const ml::WatchdogWarning& w);
  void onStep(const ml::StepEvent& e);
  void onEpoch(const ml::EpochEvent& e);
  void onFinished(const ml::RunFinished& e);
  void updateNumbers();
  void updateIdleReason();
  bool isAccuracyMetric() const;
  // A resumed run: its stored steps up to the checkpoint, drawn before the new ones.
  void showStoredHistory(int64_t runId, int64_t upToStep);
  void updateBatchNormNote(const ml::EpochEvent& e);

  ProjectDocument* doc_;
  TrainingSession* session_;
  std::function<QString()> storePath_;
  QAction *train_, *pause_, *stop_;
  QSpinBox* maxSteps_;
  QSlider* smoothing_;
  RunHeadline* headline_;
  QLabel* bnNote_;
  QLabel* sync_;
  QLabel* straggler_;  // the watchdog's straggler warning, hidden until one arrives
  MetricChart* loss_;
  MetricChart* accuracy_;
  MetricChart* throughput_;
  UtilizationChart* util_;
  StepBreakdownChart* breakdown_;
  TimelineChart* timeline_;
  LossScaleChart* lossScale_;
  ReflowGrid* chartGrid_;
  QLabel* shareNumbers_;
  QLabel* gpuNumbers_;
  void updateGpuNumbers();
  QLabel* phaseLegend_;
  bool legendHasNetwork_ = false;
  void updatePhaseLegend(bool network);

  ml::RunStarted started_;
  ml::Project runProject_;  // the project the run trains (from RunStarted)
  ml::StepEvent last_;
  std::vector<std::string> deviceNames_;
  QString metricName_ = QStringLiteral("accuracy");
  // Rendering budget: while the run's replicas use every core, frames are spaced so that drawing
  // takes ~2% of one core (never under 4 fps); the headline numbers change ~3 times a second.
  FrameBudget budget_;
  QElapsedTimer sinceRender_, sinceNumbers_;
  QElapsedTimer sinceShare_;  // the word-wrapped share sentence: at most once a second
  // The sync check's newest sentence and role: shown at most once a second while the replicas
  // agree (a small model ends several epochs a second), at once when they differ.
  QString pendingSync_;
  const char* pendingSyncRole_ = nullptr;
  QElapsedTimer sinceSync_;
  void showPendingSync();
  QTimer* renderLater_;
  bool dirty_ = false;
  bool externalBusy_ = false;
  QString blocked_;
  void updateTrainTip();
};

}  // namespace mlui
