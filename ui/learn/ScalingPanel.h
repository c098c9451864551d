// The one-click scaling experiment: the current model on 1, 2, 4, ... devices (keeping the
// global or the per-device batch), each a stored run, then speed-up against the ideal line,
// efficiency and sync share, with a sentence that explains the result. The runs happen on a
// worker thread; each finished device count appears at once.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <QWidget>

#include "learn/ScalingExperiment.h"
#include "project/Project.h"

class QComboBox;
class QCPBars;
class QCPGraph;
class QCustomPlot;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableWidget;

namespace mlui {

class DataCache;

class ScalingPanel : public QWidget {
  Q_OBJECT
 public:
  ScalingPanel(std::function<ml::Project()> project, std::shared_ptr<DataCache> cache, std::function<QString()> storePath,
               QWidget* parent = nullptr);
  ~ScalingPanel() override;  // cancels a running experiment and joins its thread

  // Starts with the fields' settings; false (and an error signal) when it cannot start.
  bool start();
  void stop();
  bool isRunning() const { return worker_.joinable() && running_; }
  void setDevices(const QString& sweep);
  void setKeep(ml::BatchPolicy keep);
  void setSteps(int steps);
  // Another run (the dashboard's or a lesson's) is using the cores: starting is disabled.
  void setOtherRunActive(bool active);

  const std::vector<ml::ScalingRow>& rows() const { return rows_; }
  QCustomPlot* speedupChart() const { return speedup_; }
  QCustomPlot* efficiencyChart() const { return efficiency_; }
  QCPGraph* measuredGraph() const { return measured_; }
  QCPGraph* idealGraph() const { return ideal_; }
  QCPBars* efficiencyBars() const { return effBars_; }
  QCPBars* syncBars() const { return syncBars_; }
  QTableWidget* table() const { return table_; }
  QString explanation() const;

 Q_SIGNALS:
  void started();
  void rowFinished(int index);
  void finished(bool completed, const QString& message);
  void errorOccurred(const QString& title, const QString& message);
  void runningChanged(bool running);

 private:
  void onRow(const ml::ScalingRow& row, int index);
  void onDone(const ml::ScalingResult& result, const QString& error);
  void rebuildCharts();
  void updateButtons();

  std::function<ml::Project()> project_;
  std::shared_ptr<DataCache> cache_;
  std::function<QString()> storePath_;
  QLineEdit* devices_;
  QComboBox* keep_;
  QSpinBox* steps_;
  QPushButton* run_;
  QPushButton* stop_;
  QProgressBar* progress_;
  QLabel* status_;
  QLabel* explanation_;
  QCustomPlot* speedup_;
  QCustomPlot* efficiency_;
  QCPGraph* measured_;
  QCPGraph* ideal_;
  QCPBars* effBars_;
  QCPBars* syncBars_;
  QTableWidget* table_;
  std::vector<ml::ScalingRow> rows_;
  ml::BatchPolicy keepUsed_ = ml::BatchPolicy::KeepGlobal;
  std::thread worker_;
  std::mutex mu_;
  ml::ScalingExperiment* experiment_ = nullptr;  // the running one (guarded by mu_)
  std::atomic<bool> cancel_{false};
  bool running_ = false, otherActive_ = false;
  int plannedRows_ = 0;
};

}  // namespace mlui
