// Shared behaviour of the live charts.
#include "charts/LiveChart.h"

#include <limits>
#include <vector>

#include "Theme.h"
#include "charts/FrameBudget.h"

namespace mlui {

void LiveGraph::drawLinePlot(QCPPainter* painter, const QVector<QPointF>& lines) const {
  const QPen pen = painter->pen();
  if (pen.style() != Qt::SolidLine || pen.color().alpha() == 0 || painter->modes().testFlag(QCPPainter::pmVectorized) ||
      lines.size() < 2) {
    QCPGraph::drawLinePlot(painter, lines);  // dashes, PDF and SVG export: QCustomPlot's own way
    return;
  }
  applyDefaultAntialiasingHint(painter);
  // The runs between NaNs (a pause breaks the line), found once for every copy below.
  std::vector<std::pair<int, int>> runs;
  const int n = static_cast<int>(lines.size());
  for (int from = 0; from < n;) {
    while (from < n && (qIsNaN(lines[from].x()) || qIsNaN(lines[from].y()))) ++from;
    int to = from;
    while (to < n && !qIsNaN(lines[to].x()) && !qIsNaN(lines[to].y())) ++to;
    if (to - from >= 2) runs.emplace_back(from, to - from);
    from = to;
  }
  QPen thin = pen;
  thin.setWidth(0);  // cosmetic, one pixel
  painter->setPen(thin);
  // A 2-pixel pen: the line, one pixel right and one pixel down; wider pens likewise.
  const int width = std::max(1, static_cast<int>(std::lround(pen.widthF())));
  for (int dx = 0; dx < width; ++dx)
    for (int dy = 0; dy < width; ++dy) {
      if (dx > 0 && dy > 0) continue;
      painter->translate(dx, dy);
      for (const auto& [from, count] : runs) painter->drawPolyline(lines.constData() + from, count);
      painter->translate(-dx, -dy);
    }
  painter->setPen(pen);
}

LiveChart::LiveChart(const QString& title, const QString& xLabel, const QString& yLabel, const QString& fileStem, QWidget* parent)
    : QCustomPlot(parent) {
  styleChart(this, title, xLabel, yLabel);
  setAccessibleName(title);
  interaction_ = new ChartInteraction(this, fileStem);
  interaction_->setRescale([this] { rescaleToData(); });
  setMinimumHeight(170);
  // The chart fills its whole rectangle (a white background), so a frame repaints the chart alone,
  // not the dashboard, page and window behind it as well.
  setAttribute(Qt::WA_OpaquePaintEvent);
  // The title is drawn with the axes (it changes only with them); "main" holds the graphs.
  if (auto* title = qobject_cast<QCPTextElement*>(plotLayout()->element(0, 0))) title->setLayer(QStringLiteral("axes"));
  setFrameLayers({QStringLiteral("main")});
  connect(this, &QCustomPlot::afterReplot, this, [this] {
    ++replots_;
    fullFrame_ = false;
    drawnX_ = xAxis->range();
    drawnY_ = yAxis->range();
  });
}

void LiveChart::setFrameLayers(const QStringList& names) {
  for (QCPLayer* l : frameLayers_) l->setMode(QCPLayer::lmLogical);
  frameLayers_.clear();
  for (const QString& n : names)
    if (QCPLayer* l = layer(n)) {
      l->setMode(QCPLayer::lmBuffered);
      frameLayers_.push_back(l);
    }
  fullFrame_ = true;
}

void LiveChart::redrawSoon() {
  if (live_)
    fullFrame_ = true;
  else
    replot(QCustomPlot::rpQueuedReplot);
}

void LiveChart::setLive(bool live, double totalSteps) {
  live_ = live;
  runSteps_ = live ? std::max(0.0, totalSteps) : 0;
  fullFrame_ = true;
}

double LiveChart::stepAxisEnd(double lastStep) const {
  const double fit = std::max(1.0, lastStep * 1.02);
  return live_ ? steppedSpan(fit, runSteps_ * 1.02, 16) : fit;
}

double LiveChart::steppedSpan(double needed, double total, double unit) {
  needed = std::max(needed, 0.0);
  if (total > 0 && needed <= total) {
    double span = total;
    for (int k = 0; k < 5 && span / 2 >= needed; ++k) span /= 2;
    return span;
  }
  double span = unit > 0 ? unit : 1.0;
  while (span < needed) span *= 2;
  return span;
}

bool LiveChart::stickyRange(QCPAxis* axis, double lo, double hi, double pad, double minFill) {
  const QCPRange r = axis->range();
  if (hi > lo && lo >= r.lower && hi <= r.upper && (hi - lo) >= minFill * r.size()) return false;
  const QCPRange before = r;
  padRange(axis, lo, hi, pad);
  return axis->range() != before;
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
  if (fullFrame_ || xAxis->range() != drawnX_ || yAxis->range() != drawnY_ || hasInvalidatedPaintBuffers()) {
    replot(QCustomPlot::rpRefreshHint);  // into the buffers now; the paint joins the window's next one
    ++fullFrames_;
  } else {
    for (QCPLayer* l : frameLayers_) l->replot();  // its buffer only, then an update() of the widget
    ++dataFrames_;
    ++replots_;
  }
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
