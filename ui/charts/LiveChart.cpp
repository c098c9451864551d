// Shared behaviour of the live charts.
#include "charts/LiveChart.h"

#include "Theme.h"

namespace mlui {

LiveChart::LiveChart(const QString& title, const QString& xLabel, const QString& yLabel, const QString& fileStem,
                     QWidget* parent)
    : QCustomPlot(parent) {
  styleChart(this, title, xLabel, yLabel);
  setAccessibleName(title);
  interaction_ = new ChartInteraction(this, fileStem);
  interaction_->setRescale([this] { rescaleToData(); });
  setMinimumHeight(170);
}

void LiveChart::refresh() {
  if (interaction_->following()) rescaleToData();
  replot(QCustomPlot::rpQueuedReplot);
}

void LiveChart::rescaleToData() { rescaleAxes(true); }

void LiveChart::padRange(QCPAxis* axis, double lo, double hi, double pad) {
  if (!(hi > lo)) {
    const double c = lo, w = std::max(1e-9, std::abs(c) * 0.1 + 1e-3);
    axis->setRange(c - w, c + w);
    return;
  }
  const double d = (hi - lo) * pad;
  axis->setRange(lo - d, hi + d);
}

}  // namespace mlui
