// mixed_float16's dynamic loss scale per step (a log2 axis: the scale moves in powers of two) with
// every skipped step marked where it happened: the halving after an overflow, the doubling after
// the growth interval. Shown on the dashboard only for runs with loss scaling.
#pragma once
#include <vector>

#include "charts/LiveChart.h"

namespace mlui {

class LossScaleChart : public LiveChart {
  Q_OBJECT
 public:
  explicit LossScaleChart(QWidget* parent = nullptr);
  // The step's scale (what its loss was multiplied by) and whether its update was skipped.
  void addStep(double step, double scale, bool skipped);
  void clearData() override;

  QCPGraph* scaleGraph() const { return scale_; }
  QCPGraph* skippedGraph() const { return skipped_; }
  int skippedCount() const { return skippedCount_; }
  double lastScale() const { return lastScale_; }

 protected:
  void rescaleToData() override;
  void syncData() override;

 private:
  QCPGraph* scale_;
  QCPGraph* skipped_;
  // Only the steps where the scale changed (and the last step, to extend the line) are plotted.
  std::vector<std::pair<double, double>> pendingScale_, pendingSkipped_;
  double lastStep_ = 0, lastScale_ = 0, lo_ = 0, hi_ = 0;
  bool endPoint_ = false;  // the graph's last point only extends the line to lastStep_
  int skippedCount_ = 0;
};

}  // namespace mlui
