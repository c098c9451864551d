// Curves of several stored runs on one chart: train (smoothed, per step) or validation (per
// epoch) loss or metric, against step, epoch, samples seen or wall time.
#pragma once
#include <vector>

#include "charts/LiveChart.h"
#include "store/RunStore.h"

namespace mlui {

struct RunCurves {
  ml::RunDetail detail;
  std::vector<ml::StepEvent> steps;  // loadCurves: every step, without per-replica timings
};

class OverlayChart : public LiveChart {
  Q_OBJECT
 public:
  enum class XAxis { Step, Epoch, Samples, WallTime };
  enum class Series { TrainLoss, ValLoss, TrainMetric, ValMetric };
  explicit OverlayChart(QWidget* parent = nullptr);
  void setRuns(const std::vector<RunCurves>& runs);
  void setAxes(XAxis x, Series s);
  void clearData() override;
  static QColor runColor(int i);

 private:
  void rebuild();
  std::vector<RunCurves> runs_;
  XAxis x_ = XAxis::Step;
  Series s_ = Series::TrainLoss;
};

}  // namespace mlui
