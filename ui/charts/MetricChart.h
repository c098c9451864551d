// A per-step curve with an adjustable smoothing (raw steps thin and light, the smoothed curve
// bold) and optional per-epoch validation points: loss, accuracy and throughput use it.
#pragma once
#include <vector>

#include "charts/LiveChart.h"

namespace mlui {

class MetricChart : public LiveChart {
  Q_OBJECT
 public:
  MetricChart(const QString& title, const QString& xLabel, const QString& yLabel, const QString& fileStem, const QColor& color,
              bool withValidation, QWidget* parent = nullptr);

  void addStep(double step, double value);
  void addValidation(double step, double value);
  // 0 = raw, 0.99 = very smooth (an exponential moving average, bias-corrected).
  void setSmoothing(double s);
  void setFixedValueRange(double lo, double hi) {
    fixedLo_ = lo;
    fixedHi_ = hi;
    fixed_ = true;
  }
  void setUnit(const QString& unit) { unit_ = unit; }
  void clearData() override;

  QCPGraph* trainGraph() const { return raw_; }
  QCPGraph* smoothGraph() const { return smooth_; }
  QCPGraph* validationGraph() const { return val_; }
  double lastSmoothed() const { return lastSmoothed_; }
  // Steps received (the graphs hold them decimated to min/max per pixel column once they are long).
  size_t stepCount() const { return keys_.size(); }

 protected:
  void rescaleToData() override;
  void resizeEvent(QResizeEvent* e) override;
  void syncData() override;

 private:
  double smoothNext(double v);

  QCPGraph* raw_;
  QCPGraph* smooth_;
  QCPGraph* val_ = nullptr;
  std::vector<double> keys_, values_;
  StreamingDecimator rawCols_, smoothCols_;
  double smoothing_ = 0.6, ema_ = 0, weight_ = 0, lastSmoothed_ = 0;
  double lo_ = 0, hi_ = 0;
  bool fixed_ = false;
  double fixedLo_ = 0, fixedHi_ = 1;
  QString unit_;
};

}  // namespace mlui
