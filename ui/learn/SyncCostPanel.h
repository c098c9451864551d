// Expected against measured sync time, and the what-if. For a stored run: the gradient size, the
// all-reduce time measured in the run (exposed, per step) and a ring all-reduce of the same size
// timed on this machine's memory, beside the alpha-beta estimate on a chosen link. The what-if
// predicts step time, speed-up and efficiency for N devices from the run's measured compute —
// every predicted number is labelled "modelled" and drawn dashed, never mixed with measurements.
#pragma once
#include <functional>
#include <optional>

#include <QWidget>

#include "distribute/AllReduce.h"
#include "learn/CostModel.h"
#include "store/RunFigures.h"

class QComboBox;
class QCPGraph;
class QCustomPlot;
class QLabel;
class QLineEdit;
class QSlider;
class QSpinBox;
class QTableWidget;

namespace mlui {

class SyncCostPanel : public QWidget {
  Q_OBJECT
 public:
  SyncCostPanel(std::function<QString()> storePath, QWidget* parent = nullptr);

  void refreshRuns();               // async; selects the newest run when none is chosen
  void loadRun(int64_t runId);      // async: profile, measured sync, host all-reduce timing
  void setLink(const QString& id);  // nvlink | pcie4 | 100gbe | 10gbe | host
  void setDeviceCounts(const QString& counts);
  // Several hosts: device counts are then per host, joined by `crossLink` (a preset id, or a rate
  // such as "10gbit": Ethernet with the shipped calibration's overheads).
  void setHosts(int hosts, const QString& crossLink);
  QLabel* calibrationLabel() const { return calibration_; }

  struct Measured {
    int64_t runId = 0;
    QString runName;
    int replicas = 1;
    int workers = 1;  // the run's
    int64_t bucketBytes = 1 << 20;
    ml::ComputeProfile profile;
    ml::SyncCost sync;                  // per replica and step, means over the run's steps (measured)
    double stepSeconds = 0;             // a replica's step, the same mean (sync.whole)
    ml::HostAllReduceMeasurement host;  // timed now on this machine
    int64_t globalBatch = 0;
    bool perDeviceBatch = false;
    ml::AllReduceDtype wire = ml::AllReduceDtype::Float32;  // how the run's gradients crossed
  };
  const std::optional<Measured>& measured() const { return measured_; }
  const std::optional<ml::WhatIfResult>& whatIf() const { return whatIf_; }
  std::optional<ml::AllReduceEstimate> estimate() const { return estimate_; }
  QTableWidget* table() const { return table_; }
  QCustomPlot* chart() const { return chart_; }
  QLabel* comparisonLabel() const { return compare_; }

 Q_SIGNALS:
  void runsListed();
  void runLoaded();
  void errorOccurred(const QString& title, const QString& message);

 private:
  void recompute();

  std::function<QString()> storePath_;
  QComboBox* source_;
  QComboBox* link_;
  QComboBox* wire_ = nullptr;
  QComboBox* algo_;
  QLineEdit* counts_;
  QSlider* overlap_;
  QSpinBox* hosts_;
  QComboBox* crossLink_;
  QLabel* calibration_;
  QLabel* overlapLabel_;
  QLabel* compare_;
  QLabel* assumptions_;
  QCustomPlot* chart_;
  QCPGraph* ideal_;
  QCPGraph* modelled_;
  QCPGraph* measuredPoint_;
  QTableWidget* table_;
  std::optional<Measured> measured_;
  std::optional<ml::WhatIfResult> whatIf_;
  std::optional<ml::AllReduceEstimate> estimate_;
  int generation_ = 0;
};

}  // namespace mlui
