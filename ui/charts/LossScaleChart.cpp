// The loss scale as a step line: a point where the scale changes, the line carried to the last step.
#include "charts/LossScaleChart.h"

#include <cmath>

#include "Theme.h"

namespace mlui {

LossScaleChart::LossScaleChart(QWidget* parent)
    : LiveChart(tr("Loss scale"), tr("step"), tr("loss scale (log2)"), QStringLiteral("loss-scale"), parent) {
  scale_ = addLiveGraph();
  scale_->setName(tr("loss scale"));
  scale_->setLineStyle(QCPGraph::lsStepLeft);
  scale_->setPen(QPen(QColor(0x4E, 0x79, 0xA7), 2));
  skipped_ = addGraph();
  skipped_->setName(tr("skipped step (inf/NaN gradient)"));
  skipped_->setLineStyle(QCPGraph::lsNone);
  skipped_->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCross, QColor(0xE1, 0x57, 0x59), 9));
  yAxis->setScaleType(QCPAxis::stLogarithmic);
  QSharedPointer<QCPAxisTickerLog> ticker(new QCPAxisTickerLog);
  ticker->setLogBase(2);
  yAxis->setTicker(ticker);
  yAxis->setNumberFormat(QStringLiteral("f"));
  yAxis->setNumberPrecision(0);
  legend->setVisible(true);
  axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignBottom | Qt::AlignRight);
  interaction()->setFormatter([](QCPAbstractPlottable* pl, double key, double value) {
    return QStringLiteral("%1\nstep %2\nscale %3 (2^%4)")
        .arg(pl->name())
        .arg(key, 0, 'f', 0)
        .arg(value, 0, 'g', 6)
        .arg(std::log2(value), 0, 'g', 4);
  });
}

void LossScaleChart::addStep(double step, double scale, bool skipped) {
  if (!(scale > 0) || !std::isfinite(scale)) return;
  if (lastScale_ == 0) lo_ = hi_ = scale;
  if (scale != lastScale_) pendingScale_.emplace_back(step, scale);
  lo_ = std::min(lo_, scale);
  hi_ = std::max(hi_, scale);
  if (skipped) {
    pendingSkipped_.emplace_back(step, scale);
    ++skippedCount_;
  }
  lastStep_ = step;
  lastScale_ = scale;
}

void LossScaleChart::syncData() {
  // The change points, then one end point that carries the line to the newest step (moved each frame).
  auto* d = scale_->data().data();
  if (endPoint_ && !d->isEmpty()) d->remove((d->constEnd() - 1)->key);
  endPoint_ = false;
  for (const auto& [k, v] : pendingScale_) scale_->addData(k, v);
  pendingScale_.clear();
  if (!d->isEmpty() && lastStep_ > (d->constEnd() - 1)->key) {
    scale_->addData(lastStep_, lastScale_);
    endPoint_ = true;
  }
  for (const auto& [k, v] : pendingSkipped_) skipped_->addData(k, v);
  pendingSkipped_.clear();
}

void LossScaleChart::clearData() {
  scale_->data()->clear();
  skipped_->data()->clear();
  pendingScale_.clear();
  pendingSkipped_.clear();
  lastStep_ = lastScale_ = lo_ = hi_ = 0;
  endPoint_ = false;
  skippedCount_ = 0;
  redrawSoon();
}

void LossScaleChart::rescaleToData() {
  if (lastScale_ == 0) {
    xAxis->setRange(0, 10);
    yAxis->setRange(1, 65536);
    return;
  }
  xAxis->setRange(0, stepAxisEnd(lastStep_));
  yAxis->setRange(lo_ / 2, hi_ * 2);  // a power of two of room either side
}

}  // namespace mlui
