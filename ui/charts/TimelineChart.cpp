// Timeline of the last steps, drawn with a reused pool of rectangle items on their own layer.
#include "charts/TimelineChart.h"

#include <algorithm>

namespace mlui {

TimelineChart::TimelineChart(QWidget* parent)
    : LiveChart(tr("Timeline of the last 10 steps"), tr("time since the first step shown (ms)"), QString(),
                QStringLiteral("timeline"), parent) {
  addLayer(QStringLiteral("bars"), layer(QStringLiteral("main")), QCustomPlot::limAbove);
  setFrameLayers({QStringLiteral("bars")});  // the bars change every frame; its "main" holds nothing
  yAxis->grid()->setVisible(false);
  yAxis->setRangeReversed(true);  // device 0 on top, like the cards
  axisRect()->setRangeDrag(Qt::Horizontal);
  axisRect()->setRangeZoom(Qt::Horizontal);
  interaction()->setItemTip([this](const QPointF& p) { return tipAt(p); });
  setDevices({"cpu:0"});
}

void TimelineChart::setDevices(const std::vector<std::string>& names) {
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  for (size_t i = 0; i < names.size(); ++i) ticker->addTick(static_cast<double>(i), QString::fromStdString(names[i]));
  yAxis->setTicker(ticker);
  devices_ = std::max<int>(1, static_cast<int>(names.size()));
  yAxis->setRange(-0.6, devices_ - 0.4);
  requestFullFrame();  // new lane labels
}

void TimelineChart::addStep(const ml::StepEvent& e) {
  recent_.push_back(e);
  if (recent_.size() > kSteps) recent_.pop_front();
  dirty_ = true;
}

int TimelineChart::barCount() const { return static_cast<int>(bars_.size()); }

int TimelineChart::barCount(Phase phase) const {
  return static_cast<int>(std::count_if(bars_.begin(), bars_.end(), [phase](const Bar& b) { return b.phase == phase; }));
}

void TimelineChart::clearData() {
  recent_.clear();
  bars_.clear();
  for (auto* r : pool_) r->setVisible(false);
  dirty_ = false;
  redrawSoon();
}

void TimelineChart::updateBars() {
  if (!dirty_) return;
  dirty_ = false;
  bars_.clear();
  t0_ = 1e300;
  t1_ = -1e300;
  for (const auto& s : recent_)
    for (const auto& r : s.replicas) {
      // The order within a step: input and compute, then wait for the slowest replica, then the exposed
      // all-reduce, then (several workers) its cross-worker hop over the network, then the
      // optimizer, then (sharded) the all-gather of the updated parameters. A phase of zero
      // (no network with one worker) draws no bar.
      double t = r.start;
      const std::pair<Phase, double> phases[] = {{Phase::Input, r.phases.input},         {Phase::Forward, r.phases.forward},
                                                 {Phase::Backward, r.phases.backward},   {Phase::Wait, r.phases.wait},
                                                 {Phase::AllReduce, r.phases.allreduce}, {Phase::Network, r.phases.network},
                                                 {Phase::Optimizer, r.phases.optimizer}, {Phase::AllGather, r.phases.allgather}};
      t0_ = std::min(t0_, t);
      for (const auto& [phase, d] : phases) {
        if (d <= 0) continue;
        bars_.push_back({r.replica, s.step, phase, t, t + d});  // seconds; shifted to ms below
        t += d;
      }
      t1_ = std::max(t1_, t);
    }
  // Milliseconds since the oldest step shown: readable ticks whatever the run's age.
  for (auto& b : bars_) {
    b.t0 = (b.t0 - t0_) * 1000.0;
    b.t1 = (b.t1 - t0_) * 1000.0;
  }
  t1_ = (t1_ - t0_) * 1000.0;
  t0_ = 0;
  while (pool_.size() < bars_.size()) {
    auto* r = new QCPItemRect(this);
    r->setLayer(QStringLiteral("bars"));
    r->setSelectable(false);
    r->setPen(Qt::NoPen);
    pool_.push_back(r);
  }
  for (size_t i = 0; i < pool_.size(); ++i) {
    QCPItemRect* r = pool_[i];
    if (i >= bars_.size()) {
      r->setVisible(false);
      continue;
    }
    const Bar& b = bars_[i];
    r->setVisible(true);
    r->setBrush(phaseColor(b.phase));
    r->topLeft->setCoords(b.t0, b.device - 0.32);
    r->bottomRight->setCoords(b.t1, b.device + 0.32);
  }
}

void TimelineChart::rescaleToData() {
  yAxis->setRange(-0.6, devices_ - 0.4);
  if (bars_.empty()) {
    xAxis->setRange(0, 1);
    return;
  }
  const double span = t1_ - t0_;
  if (live()) {  // the last steps' span wobbles a little every frame; the axis moves when it must
    const double now = xAxis->range().upper;
    if (span * 1.02 <= now && span * 1.02 >= 0.7 * now && xAxis->range().lower < t0_) return;
    const double end = span * 1.15;
    xAxis->setRange(t0_ - 0.02 * end, t0_ + end);
    return;
  }
  const double pad = span * 0.02;
  xAxis->setRange(t0_ - pad, t1_ + pad);
}

QString TimelineChart::tipAt(const QPointF& pos) const {
  const double t = xAxis->pixelToCoord(pos.x()), lane = yAxis->pixelToCoord(pos.y());
  for (const auto& b : bars_)
    if (t >= b.t0 && t <= b.t1 && std::abs(lane - b.device) <= 0.35) {
      auto* ticker = dynamic_cast<QCPAxisTickerText*>(yAxis->ticker().data());
      const QString dev = ticker ? ticker->ticks().value(b.device) : QString::number(b.device);
      return tr("%1 · step %2\n%3: %4 ms").arg(dev).arg(b.step).arg(phaseName(b.phase)).arg(b.t1 - b.t0, 0, 'f', 2);
    }
  return {};
}

}  // namespace mlui
