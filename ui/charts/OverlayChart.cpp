// Overlaying stored runs: the x value of a step or an epoch in the chosen unit.
#include "charts/OverlayChart.h"

#include <cmath>

#include "Theme.h"

namespace mlui {

QColor OverlayChart::runColor(int i) {
  // Runs get their own palette (darker, saturated) so they are not mistaken for devices.
  static const QColor c[] = {QColor(0x1f, 0x4e, 0x8c), QColor(0xc2, 0x4e, 0x00), QColor(0x2e, 0x7d, 0x32),
                             QColor(0x8e, 0x24, 0xaa), QColor(0xad, 0x14, 0x57), QColor(0x00, 0x83, 0x8f),
                             QColor(0x5d, 0x40, 0x37), QColor(0x45, 0x5a, 0x64)};
  return c[i % 8];
}

OverlayChart::OverlayChart(QWidget* parent)
    : LiveChart(tr("Compare runs"), tr("step"), tr("loss"), QStringLiteral("runs"), parent) {
  legend->setVisible(true);
  axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
}

void OverlayChart::setRuns(const std::vector<RunCurves>& runs) {
  runs_ = runs;
  rebuild();
}

void OverlayChart::setAxes(XAxis x, Series s) {
  x_ = x;
  s_ = s;
  rebuild();
}

void OverlayChart::clearData() {
  runs_.clear();
  rebuild();
}

void OverlayChart::rebuild() {
  clearGraphs();
  static const char* xNames[] = {"step", "epoch", "samples seen", "wall time (s)"};
  xAxis->setLabel(tr(xNames[static_cast<int>(x_)]));
  const bool loss = s_ == Series::TrainLoss || s_ == Series::ValLoss;
  const bool val = s_ == Series::ValLoss || s_ == Series::ValMetric;
  yAxis->setLabel(loss ? tr("loss") : tr("metric (accuracy as a fraction)"));
  for (size_t r = 0; r < runs_.size(); ++r) {
    const auto& run = runs_[r];
    QCPGraph* g = addGraph();
    g->setName(QStringLiteral("#%1 %2").arg(run.detail.summary.id).arg(QString::fromStdString(run.detail.summary.name)));
    g->setPen(QPen(runColor(static_cast<int>(r)), val ? 1.8 : 1.6));
    QVector<double> xs, ys;
    double samples = 0;
    std::vector<double> samplesAtEpochEnd, stepAtEpochEnd;
    double ema = 0, w = 0;
    for (const auto& s : run.steps) {
      samples += static_cast<double>(s.samples);
      if (static_cast<int>(samplesAtEpochEnd.size()) < s.epoch) {
        samplesAtEpochEnd.resize(static_cast<size_t>(s.epoch), 0);
        stepAtEpochEnd.resize(static_cast<size_t>(s.epoch), 0);
      }
      samplesAtEpochEnd[static_cast<size_t>(s.epoch - 1)] = samples;
      stepAtEpochEnd[static_cast<size_t>(s.epoch - 1)] = static_cast<double>(s.step);
      if (val) continue;
      const double v = loss ? s.loss : s.metric;
      if (!std::isfinite(v)) continue;
      ema = 0.8 * ema + 0.2 * v;  // light smoothing so several runs stay readable
      w = 0.8 * w + 0.2;
      double x = 0;
      switch (x_) {
        case XAxis::Step: x = static_cast<double>(s.step); break;
        case XAxis::Epoch:
          x = s.epoch - 1 +
              (s.stepsPerEpoch > 0 ? static_cast<double>(s.stepInEpoch) / static_cast<double>(s.stepsPerEpoch) : 1.0);
          break;
        case XAxis::Samples: x = samples; break;
        case XAxis::WallTime: x = s.wallTime; break;
      }
      xs << x;
      ys << ema / w;
    }
    if (val) {
      g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, runColor(static_cast<int>(r)), Qt::white, 6));
      for (const auto& e : run.detail.epochs) {
        const auto v = loss ? e.valLoss : e.valMetric;
        if (!v) continue;
        const size_t i = static_cast<size_t>(std::max(1, e.epoch) - 1);
        double x = e.epoch;
        if (x_ == XAxis::Step) x = i < stepAtEpochEnd.size() ? stepAtEpochEnd[i] : 0;
        if (x_ == XAxis::Samples) x = i < samplesAtEpochEnd.size() ? samplesAtEpochEnd[i] : 0;
        if (x_ == XAxis::WallTime) x = e.wallTime;
        xs << x;
        ys << *v;
      }
    }
    g->setData(xs, ys);
  }
  legend->setVisible(graphCount() > 0);
  rescaleAxes();
  if (graphCount()) yAxis->scaleRange(1.08, yAxis->range().center());
  replot(QCustomPlot::rpQueuedReplot);
}

}  // namespace mlui
