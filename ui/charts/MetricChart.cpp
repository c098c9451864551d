// Per-step curves: addData per frame, setData only when the smoothing changes.
#include "charts/MetricChart.h"

#include <cmath>

#include "Theme.h"

namespace mlui {

MetricChart::MetricChart(const QString& title, const QString& xLabel, const QString& yLabel, const QString& fileStem,
                         const QColor& color, bool withValidation, QWidget* parent)
    : LiveChart(title, xLabel, yLabel, fileStem, parent) {
  raw_ = addLiveGraph();
  raw_->setName(tr("train (per step)"));
  // The raw steps are a pale band behind the smoothed curve (a blend with white, not alpha:
  // alpha on dense graphs is slow).
  const QColor light = QColor::fromRgbF(0.78 + 0.22 * color.redF(), 0.78 + 0.22 * color.greenF(), 0.78 + 0.22 * color.blueF());
  raw_->setPen(QPen(light, 1));
  raw_->setAdaptiveSampling(false);  // the decimator already keeps min/max per pixel column
  smooth_ = addLiveGraph();
  smooth_->setName(tr("train (smoothed)"));
  smooth_->setPen(QPen(color, 2));
  smooth_->setAdaptiveSampling(false);
  if (withValidation) {
    val_ = addGraph();
    val_->setName(tr("validation (per epoch)"));
    val_->setPen(QPen(validationColor(), 1.5, Qt::DashLine));
    val_->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, validationColor(), Qt::white, 7));
  }
  legend->setVisible(true);
  axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
  interaction()->setFormatter([this](QCPAbstractPlottable* pl, double key, double value) {
    return QStringLiteral("%1\n%2 %3\n%4%5")
        .arg(pl->name(), xAxis->label().section(QLatin1Char(' '), 0, 0))
        .arg(key, 0, 'f', 0)
        .arg(value, 0, 'g', 5)
        .arg(unit_.isEmpty() ? QString() : QStringLiteral(" ") + unit_);
  });
}

void MetricChart::clearData() {
  raw_->data()->clear();
  smooth_->data()->clear();
  if (val_) val_->data()->clear();
  keys_.clear();
  values_.clear();
  rawCols_.clear();
  smoothCols_.clear();
  ema_ = weight_ = lastSmoothed_ = 0;
  lo_ = hi_ = 0;
  redrawSoon();
}

double MetricChart::smoothNext(double v) {
  // Bias-corrected EMA (as TensorBoard does): the first points are not pulled towards zero.
  ema_ = smoothing_ * ema_ + (1 - smoothing_) * v;
  weight_ = smoothing_ * weight_ + (1 - smoothing_);
  return ema_ / weight_;
}

void MetricChart::addStep(double step, double value) {
  if (!std::isfinite(value)) return;
  if (keys_.empty()) lo_ = hi_ = value;
  lo_ = std::min(lo_, value);
  hi_ = std::max(hi_, value);
  keys_.push_back(step);
  values_.push_back(value);
  rawCols_.add(step, value);
  lastSmoothed_ = smoothNext(value);
  smoothCols_.add(step, lastSmoothed_);  // into the graphs at the next frame (syncData)
}

void MetricChart::syncData() {
  syncGraph(raw_, rawCols_);
  syncGraph(smooth_, smoothCols_);
}

void MetricChart::addValidation(double step, double value) {
  if (!val_ || !std::isfinite(value)) return;
  val_->addData(step, value);
  lo_ = std::min(lo_, value);
  hi_ = std::max(hi_, value);
}

void MetricChart::setSmoothing(double s) {
  smoothing_ = std::clamp(s, 0.0, 0.999);
  ema_ = weight_ = 0;
  smoothCols_.clear();
  for (size_t i = 0; i < keys_.size(); ++i) smoothCols_.add(keys_[i], lastSmoothed_ = smoothNext(values_[i]));
  syncGraph(smooth_, smoothCols_);
  // The raw curve only distracts when smoothing is off.
  raw_->setVisible(smoothing_ > 0.0);
  replot(QCustomPlot::rpQueuedReplot);
}

void MetricChart::resizeEvent(QResizeEvent* e) {
  LiveChart::resizeEvent(e);
  // A new width means new pixel columns (rare: a window resize, not a frame).
  const int cols = decimationColumns();
  if (cols == rawCols_.columns()) return;
  rawCols_.setColumns(cols);
  smoothCols_.setColumns(cols);
  syncGraph(raw_, rawCols_);
  syncGraph(smooth_, smoothCols_);
}

void MetricChart::rescaleToData() {
  if (keys_.empty() && (!val_ || val_->data()->isEmpty())) {
    xAxis->setRange(0, 10);
    if (fixed_) yAxis->setRange(fixedLo_, fixedHi_);
    return;
  }
  double xmax = keys_.empty() ? 1 : keys_.back();
  if (val_ && !val_->data()->isEmpty()) xmax = std::max(xmax, (val_->data()->constEnd() - 1)->key);
  xAxis->setRange(0, stepAxisEnd(xmax));
  if (fixed_) {
    yAxis->setRange(std::min(fixedLo_, lo_), std::max(fixedHi_, hi_));
  } else if (live()) {
    stickyRange(yAxis, lo_, hi_);  // moves when a new extreme leaves the range, not every frame
  } else {
    padRange(yAxis, lo_, hi_);
  }
}

}  // namespace mlui
