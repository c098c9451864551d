// Hover, zoom, pan, reset and PNG export for every chart of the studio.
#include "charts/ChartInteraction.h"

#include <qcustomplot.h>
#include <QFileDialog>
#include <QMenu>
#include <QToolTip>

#include <cmath>
#include <limits>

namespace mlui {

ChartInteraction::ChartInteraction(QCustomPlot* plot, QString fileStem) : QObject(plot), plot_(plot), stem_(std::move(fileStem)) {
  plot_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  plot_->setContextMenuPolicy(Qt::CustomContextMenu);
  plot_->setMouseTracking(true);
  if (!plot_->layer(QStringLiteral("hover"))) plot_->addLayer(QStringLiteral("hover"), nullptr, QCustomPlot::limAbove);
  // The hover layer gets a paint buffer of its own only while the pointer is over the chart (the
  // tracer then moves without a full replot); otherwise it shares the axes' buffer, and a live
  // frame does not blend one more empty, chart-sized buffer into the window.
  plot_->layer(QStringLiteral("hover"))->setMode(QCPLayer::lmLogical);
  plot_->installEventFilter(this);
  tracer_ = new QCPItemTracer(plot_);
  tracer_->setLayer(QStringLiteral("hover"));
  tracer_->setStyle(QCPItemTracer::tsCircle);
  tracer_->setSize(8);
  tracer_->setPen(QPen(QColor(0x1f, 0x2d, 0x3d), 1.5));
  tracer_->setBrush(Qt::white);
  tracer_->setVisible(false);
  tracer_->setInterpolating(false);

  connect(plot_, &QCustomPlot::mouseMove, this, &ChartInteraction::onMouseMove);
  connect(plot_, &QCustomPlot::mousePress, this, [this](QMouseEvent* e) {
    if (e->button() == Qt::LeftButton) onUserMoved();
  });
  connect(plot_, &QCustomPlot::mouseWheel, this, [this](QWheelEvent*) { onUserMoved(); });
  connect(plot_, &QCustomPlot::mouseDoubleClick, this, [this](QMouseEvent*) { resetView(); });
  connect(plot_, &QWidget::customContextMenuRequested, this, &ChartInteraction::showMenu);
}

bool ChartInteraction::eventFilter(QObject* o, QEvent* e) {
  if (o == plot_ && (e->type() == QEvent::Enter || e->type() == QEvent::Leave)) {
    const bool over = e->type() == QEvent::Enter;
    if (!over) tracer_->setVisible(false);
    plot_->layer(QStringLiteral("hover"))->setMode(over ? QCPLayer::lmBuffered : QCPLayer::lmLogical);
    plot_->replot(QCustomPlot::rpQueuedReplot);  // new paint buffers
  }
  return QObject::eventFilter(o, e);
}

void ChartInteraction::onUserMoved() {
  if (!following_) return;
  following_ = false;
  Q_EMIT followingChanged(false);
}

void ChartInteraction::resetView() {
  following_ = true;
  if (rescale_)
    rescale_();
  else
    plot_->rescaleAxes(true);
  plot_->replot(QCustomPlot::rpQueuedReplot);
  Q_EMIT followingChanged(true);
}

bool ChartInteraction::savePng(const QString& path) {
  tracer_->setVisible(false);
  return plot_->savePng(path, 0, 0, 2.0);  // 2x: crisp on high-DPI screens and in documents
}

void ChartInteraction::showMenu(const QPoint& pos) {
  QMenu menu(plot_);
  menu.addAction(tr("Save as PNG…"), this, [this] {
    const QString path =
        QFileDialog::getSaveFileName(plot_, tr("Save chart"), stem_ + QStringLiteral(".png"), tr("PNG images (*.png)"));
    if (!path.isEmpty()) savePng(path);
  });
  menu.addAction(tr("Reset view (follow live data)"), this, &ChartInteraction::resetView);
  menu.exec(plot_->mapToGlobal(pos));
}

void ChartInteraction::onMouseMove(QMouseEvent* e) {
  if (e->buttons() != Qt::NoButton) return;
  const QPointF pos = e->position();
  double best = 28.0;  // pixels: farther than this shows nothing
  QCPAbstractPlottable* bestPl = nullptr;
  double bestKey = 0, bestValue = 0;
  for (int i = 0; i < plot_->plottableCount(); ++i) {
    QCPAbstractPlottable* pl = plot_->plottable(i);
    if (!pl->visible() || !pl->realVisibility()) continue;
    QCPAxis* ka = pl->keyAxis();
    QCPAxis* va = pl->valueAxis();
    if (auto* g = qobject_cast<QCPGraph*>(pl)) {
      auto data = g->data();
      if (data->isEmpty()) continue;
      const double key = ka->pixelToCoord(pos.x());
      auto it = data->findBegin(key, false);
      for (int k = 0; k < 2 && it != data->constEnd(); ++k, ++it) {
        if (std::isnan(it->value)) continue;
        const double dx = ka->coordToPixel(it->key) - pos.x(), dy = va->coordToPixel(it->value) - pos.y();
        const double d = std::hypot(dx, dy);
        if (d < best) {
          best = d;
          bestPl = pl;
          bestKey = it->key;
          bestValue = it->value;
        }
      }
    } else if (auto* b = qobject_cast<QCPBars*>(pl)) {
      // Bars: the one under the cursor (stacked bars each report their own share).
      QVariant details;
      const double d = b->selectTest(pos, false, &details);
      if (d >= 0 && d < 1) {
        const QCPDataSelection sel = details.value<QCPDataSelection>();
        if (!sel.isEmpty()) {
          auto it = b->data()->at(sel.dataRange().begin());
          best = 0;
          bestPl = pl;
          bestKey = it->key;
          bestValue = it->value;
        }
      }
    }
  }
  if (!bestPl) {
    if (tracer_->visible()) {
      tracer_->setVisible(false);
      plot_->layer(QStringLiteral("hover"))->replot();
    }
    const QString tip = itemTip_ ? itemTip_(pos) : QString();
    if (tip.isEmpty())
      QToolTip::hideText();
    else
      QToolTip::showText(plot_->mapToGlobal(pos.toPoint()) + QPoint(14, 10), tip, plot_);
    return;
  }
  if (auto* g = qobject_cast<QCPGraph*>(bestPl)) {
    tracer_->setGraph(g);
    tracer_->setGraphKey(bestKey);
    tracer_->setVisible(true);
  } else {
    tracer_->setGraph(nullptr);
    tracer_->setVisible(false);
  }
  plot_->layer(QStringLiteral("hover"))->replot();
  const QString text = formatter_ ? formatter_(bestPl, bestKey, bestValue)
                                  : QStringLiteral("%1\n%2 = %3\n%4 = %5")
                                        .arg(bestPl->name(), bestPl->keyAxis()->label(), QString::number(bestKey, 'g', 6),
                                             bestPl->valueAxis()->label(), QString::number(bestValue, 'g', 5));
  QToolTip::showText(plot_->mapToGlobal(pos.toPoint()) + QPoint(14, 10), text, plot_);
}

}  // namespace mlui
