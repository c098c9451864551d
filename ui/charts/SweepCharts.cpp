// Heatmaps and scatter of a sweep's results (QCustomPlot): categorical axes (the grid's values),
// NaN cells for points without a result, the best point framed.
#include "charts/SweepCharts.h"

#include <QHBoxLayout>
#include <QVBoxLayout>

#include <qcustomplot.h>

#include <algorithm>
#include <cmath>

#include "Theme.h"
#include "learn/Sweep.h"

namespace mlui {

QString measureName(SweepMeasure m, const QString& metric) {
  switch (m) {
    case SweepMeasure::FinalMetric: return QObject::tr("final validation %1").arg(metric);
    case SweepMeasure::SecondsToTarget: return QObject::tr("seconds to target");
    case SweepMeasure::SamplesToTarget: return QObject::tr("samples to target");
    case SweepMeasure::SamplesPerSec: return QObject::tr("samples/s");
  }
  return {};
}

std::optional<double> measureOf(const ml::SweepPointResult& p, SweepMeasure m) {
  switch (m) {
    case SweepMeasure::FinalMetric: return p.finalValMetric;
    case SweepMeasure::SecondsToTarget: return p.secondsToTarget;
    case SweepMeasure::SamplesToTarget:
      return p.samplesToTarget ? std::optional<double>(static_cast<double>(*p.samplesToTarget)) : std::nullopt;
    case SweepMeasure::SamplesPerSec: return p.samplesPerSec;
  }
  return std::nullopt;
}

namespace {

QString shortValue(double v, SweepMeasure m) {
  switch (m) {
    case SweepMeasure::FinalMetric: return QString::number(v, 'f', 3);
    case SweepMeasure::SecondsToTarget: return QString::number(v, 'f', 2) + QStringLiteral(" s");
    case SweepMeasure::SamplesToTarget:
      return v >= 1e4 ? QString::number(v / 1e3, 'f', 0) + QStringLiteral("k") : QString::number(v, 'f', 0);
    case SweepMeasure::SamplesPerSec:
      return v >= 1e4 ? QString::number(v / 1e3, 'f', 1) + QStringLiteral("k") : QString::number(v, 'f', 0);
  }
  return {};
}

bool lowerIsBetter(SweepMeasure m, bool metricHigher) {
  if (m == SweepMeasure::FinalMetric) return !metricHigher;
  return m != SweepMeasure::SamplesPerSec;
}

QSharedPointer<QCPAxisTickerText> textTicker(const QStringList& labels) {
  auto t = QSharedPointer<QCPAxisTickerText>::create();
  for (int i = 0; i < labels.size(); ++i) t->addTick(i, labels[i]);
  return t;
}

}  // namespace

SweepCharts::SweepCharts(QWidget* parent) : QWidget(parent) {
  auto* v = new QVBoxLayout(this);
  v->setContentsMargins(0, 0, 0, 0);
  mapsRow_ = new QHBoxLayout;
  v->addLayout(mapsRow_, 3);
  scatter_ = new QCustomPlot(this);
  scatter_->setObjectName(QStringLiteral("SweepScatter"));
  scatter_->setMinimumHeight(200);
  styleChart(scatter_, tr("Every point"), tr("learning rate (log)"), tr("result"));
  scatter_->xAxis->setScaleType(QCPAxis::stLogarithmic);
  scatter_->legend->setVisible(true);
  scatter_->setInteraction(QCP::iSelectPlottables, true);
  connect(scatter_, &QCustomPlot::plottableClick, this, [this](QCPAbstractPlottable* p, int index, QMouseEvent*) {
    for (int g = 0; g < scatter_->graphCount(); ++g)
      if (scatter_->graph(g) == p && index >= 0 && index < static_cast<int>(scatterPoints_[static_cast<size_t>(g)].size()))
        Q_EMIT pointClicked(scatterPoints_[static_cast<size_t>(g)][static_cast<size_t>(index)]);
  });
  v->addWidget(scatter_, 2);
}

void SweepCharts::clear() {
  for (auto& m : maps_) delete m.plot;
  maps_.clear();
  scatter_->clearGraphs();
  scatterPoints_.clear();
  scatter_->replot();
}

QString SweepCharts::heatmapTitle(int i) const {
  const auto& m = maps_[static_cast<size_t>(i)];
  return QString::fromStdString(m.devices) +
         (m.scaling == "none" ? QString() : QStringLiteral(", %1 scaling").arg(QString::fromStdString(m.scaling)));
}

double SweepCharts::heatmapLr(int, int column) const { return lrs_.at(static_cast<size_t>(column)); }
int64_t SweepCharts::heatmapBatch(int, int row) const { return batches_.at(static_cast<size_t>(row)); }

std::optional<int> SweepCharts::pointAt(int heatmap, int column, int row) const {
  if (heatmap < 0 || heatmap >= heatmapCount() || column < 0 || row < 0 || column >= static_cast<int>(lrs_.size()) ||
      row >= static_cast<int>(batches_.size()))
    return std::nullopt;
  const auto& m = maps_[static_cast<size_t>(heatmap)];
  for (const auto& p : results_.points)
    if (p.point.devices == m.devices && p.point.lrScaling == m.scaling && p.point.lr == lrs_[static_cast<size_t>(column)] &&
        p.point.batchSize == batches_[static_cast<size_t>(row)])
      return p.point.point;
  return std::nullopt;
}

void SweepCharts::show(const ml::SweepResults& results, SweepMeasure measure) {
  const bool sameShape = results.sweep.id == results_.sweep.id && !maps_.empty();
  results_ = results;
  measure_ = measure;
  const auto grid = ml::SweepGrid::fromJson(nlohmann::json::parse(results_.sweep.gridJson));
  batches_ = grid.batchSizes;
  lrs_ = grid.lrs;
  std::sort(batches_.begin(), batches_.end());
  std::sort(lrs_.begin(), lrs_.end());
  if (!sameShape) {
    for (auto& m : maps_) delete m.plot;
    maps_.clear();
    for (const auto& d : grid.devices)
      for (const auto& s : grid.lrScalings) maps_.push_back(Map{nullptr, nullptr, d, s});
  }
  buildHeatmaps();
  buildScatter();
}

void SweepCharts::buildHeatmaps() {
  const QString metric = QString::fromStdString(results_.metric);
  const bool low = lowerIsBetter(measure_, results_.higherIsBetter);
  QStringList lrLabels, batchLabels;
  for (double lr : lrs_) lrLabels << QString::number(lr, 'g', 3);
  for (int64_t b : batches_) batchLabels << QString::number(b);
  for (size_t i = 0; i < maps_.size(); ++i) {
    Map& m = maps_[i];
    if (!m.plot) {
      m.plot = new QCustomPlot(this);
      m.plot->setObjectName(QStringLiteral("SweepHeatmap%1").arg(i));
      m.plot->setMinimumSize(260, 220);
      mapsRow_->addWidget(m.plot, 1);
      m.map = new QCPColorMap(m.plot->xAxis, m.plot->yAxis);
      connect(m.plot, &QCustomPlot::mousePress, this, [this, i](QMouseEvent* e) {
        const auto* p = maps_[i].plot;
        const int col = static_cast<int>(std::lround(p->xAxis->pixelToCoord(e->position().x())));
        const int row = static_cast<int>(std::lround(p->yAxis->pixelToCoord(e->position().y())));
        if (auto pt = pointAt(static_cast<int>(i), col, row)) Q_EMIT pointClicked(*pt);
      });
    }
    styleChart(m.plot, heatmapTitle(static_cast<int>(i)), tr("learning rate"), tr("global batch"));
    m.plot->clearItems();
    auto* data = m.map->data();
    data->setSize(static_cast<int>(lrs_.size()), static_cast<int>(batches_.size()));
    data->setRange(QCPRange(0, std::max<double>(0, lrs_.size() - 1.0)), QCPRange(0, std::max<double>(0, batches_.size() - 1.0)));
    data->fill(std::nan(""));
    double lo = INFINITY, hi = -INFINITY;
    for (const auto& p : results_.points) {
      if (p.point.devices != m.devices || p.point.lrScaling != m.scaling) continue;
      const auto v = measureOf(p, measure_);
      const int col = static_cast<int>(std::find(lrs_.begin(), lrs_.end(), p.point.lr) - lrs_.begin());
      const int row = static_cast<int>(std::find(batches_.begin(), batches_.end(), p.point.batchSize) - batches_.begin());
      auto* label = new QCPItemText(m.plot);
      label->position->setCoords(col, row);
      label->setFont(QFont(font().family(), 9, QFont::DemiBold));
      if (v) {
        data->setCell(col, row, *v);
        lo = std::min(lo, *v);
        hi = std::max(hi, *v);
        label->setText(shortValue(*v, measure_));
      } else {
        label->setText(p.point.status == "finished" ? tr("not reached") : QString::fromStdString(p.point.status));
        label->setColor(QColor(0x6b, 0x77, 0x85));
      }
      if (results_.best && results_.points[*results_.best].point.point == p.point.point) {
        auto* frame = new QCPItemRect(m.plot);
        frame->topLeft->setCoords(col - 0.48, row + 0.48);
        frame->bottomRight->setCoords(col + 0.48, row - 0.48);
        frame->setPen(QPen(QColor(0xE1, 0x57, 0x59), 3));
        label->setText(QStringLiteral("★ ") + label->text());
      }
    }
    // Viridis (perceptually even, readable in grey): dark = worse, yellow = better.
    QCPColorGradient g;
    g.setColorStops({{0.0, QColor(0x44, 0x01, 0x54)},
                     {0.25, QColor(0x3b, 0x52, 0x8b)},
                     {0.5, QColor(0x21, 0x91, 0x8c)},
                     {0.75, QColor(0x5e, 0xc9, 0x62)},
                     {1.0, QColor(0xfd, 0xe7, 0x25)}});
    g.setColorInterpolation(QCPColorGradient::ciRGB);
    g.setNanHandling(QCPColorGradient::nhTransparent);
    if (low) g = g.inverted();
    m.map->setGradient(g);
    m.map->setInterpolate(false);
    if (lo <= hi) m.map->setDataRange(lo == hi ? QCPRange(lo - 0.5 * std::abs(lo) - 1e-9, hi + 1e-9) : QCPRange(lo, hi));
    // Labels readable on both ends of the gradient: white on the dark half, black on the light.
    for (int k = 0; k < m.plot->itemCount(); ++k)
      if (auto* t = qobject_cast<QCPItemText*>(m.plot->item(k)); t && t->color() != QColor(0x6b, 0x77, 0x85)) {
        const double v = data->data(t->position->coords().x(), t->position->coords().y());
        const double f = hi > lo ? (v - lo) / (hi - lo) : 1;
        t->setColor((low ? 1 - f : f) < 0.55 ? Qt::white : Qt::black);
      }
    m.plot->xAxis->setTicker(textTicker(lrLabels));
    m.plot->yAxis->setTicker(textTicker(batchLabels));
    m.plot->xAxis->setRange(-0.5, lrs_.size() - 0.5);
    m.plot->yAxis->setRange(-0.5, batches_.size() - 0.5);
    m.plot->xAxis->grid()->setVisible(false);
    m.plot->yAxis->grid()->setVisible(false);
    m.plot->replot();
  }
}

void SweepCharts::buildScatter() {
  scatter_->clearGraphs();
  scatterPoints_.clear();
  const QString name = measureName(measure_, QString::fromStdString(results_.metric));
  styleChart(scatter_, tr("Every point: %1 against the learning rate").arg(name), tr("learning rate (log)"), name);
  const QList<QCPScatterStyle::ScatterShape> shapes = {QCPScatterStyle::ssDisc, QCPScatterStyle::ssSquare,
                                                       QCPScatterStyle::ssTriangle, QCPScatterStyle::ssDiamond,
                                                       QCPScatterStyle::ssCross};
  double lo = INFINITY, hi = -INFINITY;
  for (size_t b = 0; b < batches_.size(); ++b) {
    // One series per batch size; the device lists and rules of that batch share its colour.
    auto* g = scatter_->addGraph();
    g->setName(tr("batch %1").arg(batches_[b]));
    g->setLineStyle(QCPGraph::lsNone);
    const QColor c = deviceColor(static_cast<int>(b));
    g->setScatterStyle(QCPScatterStyle(shapes[static_cast<int>(b) % shapes.size()], c, c, 10));
    std::vector<int> pts;
    for (const auto& p : results_.points) {
      const auto v = measureOf(p, measure_);
      if (p.point.batchSize != batches_[b] || !v) continue;
      g->addData(p.point.lr, *v);
      pts.push_back(p.point.point);
      lo = std::min(lo, *v);
      hi = std::max(hi, *v);
    }
    // addData keeps the data sorted by key: order the points the same way.
    std::vector<std::pair<double, int>> byKey;
    for (int pt : pts) byKey.emplace_back(results_.points[static_cast<size_t>(pt)].point.lr, pt);
    std::stable_sort(byKey.begin(), byKey.end(), [](auto& a, auto& b) { return a.first < b.first; });
    pts.clear();
    for (auto& [k, pt] : byKey) pts.push_back(pt);
    scatterPoints_.push_back(std::move(pts));
  }
  // Ticks at the grid's learning rates: a log ticker labels only whole decades.
  auto ticks = QSharedPointer<QCPAxisTickerText>::create();
  for (double lr : lrs_) ticks->addTick(lr, QString::number(lr, 'g', 3));
  scatter_->xAxis->setTicker(ticks);
  scatter_->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignBottom | Qt::AlignRight);
  if (!lrs_.empty()) scatter_->xAxis->setRange(lrs_.front() / 1.6, lrs_.back() * 1.6);
  if (lo <= hi) {
    const double pad = std::max(1e-9, (hi - lo) * 0.15 + (hi == lo ? std::abs(hi) * 0.05 : 0));
    scatter_->yAxis->setRange(lo - pad, hi + pad);
  }
  scatter_->replot();
}

}  // namespace mlui
