// Shared behaviour of the live charts.
#include "charts/LiveChart.h"

#include <limits>

#include "Theme.h"
#include "charts/FrameBudget.h"

namespace mlui {

LiveChart::LiveChart(const QString& title, const QString& xLabel, const QString& yLabel, const QString& fileStem, QWidget* parent)
    : QCustomPlot(parent) {
  styleChart(this, title, xLabel, yLabel);
  setAccessibleName(title);
  interaction_ = new ChartInteraction(this, fileStem);
  interaction_->setRescale([this] { rescaleToData(); });
  setMinimumHeight(170);
  connect(this, &QCustomPlot::afterReplot, this, [this] { ++replots_; });
}

bool LiveChart::canBeSeen() const { return isVisible() && !window()->isMinimized() && !visibleRegion().isEmpty(); }

bool LiveChart::drawFrame() {
  if (!canBeSeen()) {
    stale_ = true;  // the data keeps arriving; the drawing waits until someone can see it
    return false;
  }
  stale_ = false;
  syncData();
  if (interaction_->following()) rescaleToData();
  replot(QCustomPlot::rpRefreshHint);  // into the buffer now; the paint joins the window's next one
  return true;
}

double LiveChart::takePaintMs() {
  const double ms = paintMs_;
  paintMs_ = 0;
  return ms;
}

void LiveChart::paintEvent(QPaintEvent* e) {
  const double t0 = FrameBudget::threadCpuMs();
  if (stale_) {  // shown again (scrolled into view, window restored): catch up first
    stale_ = false;
    syncData();
    if (interaction_->following()) rescaleToData();
    replot(QCustomPlot::rpQueuedRefresh);
  }
  QCustomPlot::paintEvent(e);
  paintMs_ += FrameBudget::threadCpuMs() - t0;
}

void LiveChart::refresh() {
  syncData();
  if (interaction_->following()) rescaleToData();
  replot(QCustomPlot::rpQueuedReplot);
}

void LiveChart::rescaleToData() { rescaleAxes(true); }

void LiveChart::syncGraph(QCPGraph* g, StreamingDecimator& d) {
  const auto& pts = d.points();
  size_t from = d.firstChanged();
  if (d.rebuilt()) {
    g->data()->clear();
    from = 0;
  } else if (from < pts.size()) {
    g->data()->remove(pts[from].x, std::numeric_limits<double>::infinity());
  }
  if (from < pts.size()) {
    QVector<QCPGraphData> tail;
    tail.reserve(static_cast<qsizetype>(pts.size() - from));
    for (size_t i = from; i < pts.size(); ++i) tail.push_back({pts[i].x, pts[i].y});
    g->data()->add(tail, true);
  }
  d.takeChanges();
}

int LiveChart::decimationColumns() const { return std::max(400, width()); }

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
