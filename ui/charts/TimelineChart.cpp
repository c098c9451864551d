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

namespace {
constexpr double kGroupGap = 0.8;  // extra space between two hosts' lane groups

// "host/worker2/cpu:1" -> host; "" for names without a worker part.
QString hostOf(const std::string& name) {
  const auto slash = name.find('/');
  if (slash == std::string::npos || name.find("/worker", slash) != slash) return {};
  return QString::fromStdString(name.substr(0, slash));
}
}  // namespace

void TimelineChart::setDevices(const std::vector<std::string>& names) {
  devices_ = std::max<int>(1, static_cast<int>(names.size()));
  // One group per host when the devices name more than one (in device order, as workers are).
  hosts_.clear();
  std::vector<int> groupOf(names.size(), 0);
  for (size_t i = 0; i < names.size(); ++i) {
    const QString h = hostOf(names[i]);
    if (i == 0 || h != hostOf(names[i - 1])) hosts_ << h;
    groupOf[i] = static_cast<int>(hosts_.size()) - 1;
  }
  const bool grouped = hosts_.size() > 1 && !hosts_.contains(QString());
  if (!grouped) {
    hosts_.clear();
    std::fill(groupOf.begin(), groupOf.end(), 0);
  }
  groupOf_ = groupOf;
  lanes_.assign(static_cast<size_t>(devices_), 0.0);
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  for (size_t i = 0; i < names.size(); ++i) {
    // Grouped, each group has room above it for the host's name.
    lanes_[i] = static_cast<double>(i) + (grouped ? kGroupGap * (groupOf[i] + 1) : 0.0);
    const std::string& n = names[i];
    ticker->addTick(lanes_[i], QString::fromStdString(grouped ? n.substr(n.find('/') + 1) : n));
  }
  yAxis->setTicker(ticker);
  drawHostBands(groupOf);
  yAxis->setRange(lanes_.front() - 0.6 - (grouped ? kGroupGap : 0.0), lanes_.back() + 0.6);
  requestFullFrame();  // new lane labels
}

// A band behind each host's lanes (every other one shaded), with the host's name above its lanes.
void TimelineChart::drawHostBands(const std::vector<int>& groupOf) {
  for (auto* item : bands_) removeItem(item);
  bands_.clear();
  for (int g = 0; g < hosts_.size(); ++g) {
    const auto first = std::find(groupOf.begin(), groupOf.end(), g) - groupOf.begin();
    const auto last = groupOf.rend() - std::find(groupOf.rbegin(), groupOf.rend(), g) - 1;
    const double top = lanes_[static_cast<size_t>(first)] - 0.5 - kGroupGap, bottom = lanes_[static_cast<size_t>(last)] + 0.5;
    auto* band = new QCPItemRect(this);
    band->setLayer(QStringLiteral("background"));
    band->setSelectable(false);
    for (auto* pos : {band->topLeft, band->bottomRight}) {
      pos->setTypeX(QCPItemPosition::ptAxisRectRatio);
      pos->setTypeY(QCPItemPosition::ptPlotCoords);
    }
    band->topLeft->setCoords(0, top);
    band->bottomRight->setCoords(1, bottom);
    band->setPen(Qt::NoPen);
    band->setBrush(g % 2 ? QColor(0, 0, 0, 0) : QColor(0x8a, 0x96, 0xa3, 38));
    auto* label = new QCPItemText(this);  // on "main": above the grid, below the bars
    label->setSelectable(false);
    label->position->setTypeX(QCPItemPosition::ptAxisRectRatio);
    label->position->setTypeY(QCPItemPosition::ptPlotCoords);
    label->position->setCoords(0.005, top + 0.5 * kGroupGap);
    label->setPositionAlignment(Qt::AlignLeft | Qt::AlignVCenter);
    label->setText(tr("host %1").arg(hosts_[g]));
    label->setColor(QColor(0x5b, 0x67, 0x73));
    bands_.push_back(band);
    bands_.push_back(label);
  }
}

int TimelineChart::laneGroup(int device) const {
  return device >= 0 && static_cast<size_t>(device) < groupOf_.size() ? groupOf_[static_cast<size_t>(device)] : 0;
}

double TimelineChart::lanePosition(int device) const {
  return device >= 0 && static_cast<size_t>(device) < lanes_.size() ? lanes_[static_cast<size_t>(device)] : device;
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
    r->topLeft->setCoords(b.t0, lanePosition(b.device) - 0.32);
    r->bottomRight->setCoords(b.t1, lanePosition(b.device) + 0.32);
  }
}

void TimelineChart::rescaleToData() {
  yAxis->setRange(lanePosition(0) - 0.6 - (hosts_.isEmpty() ? 0.0 : kGroupGap), lanePosition(devices_ - 1) + 0.6);
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
    if (t >= b.t0 && t <= b.t1 && std::abs(lane - lanePosition(b.device)) <= 0.35) {
      auto* ticker = dynamic_cast<QCPAxisTickerText*>(yAxis->ticker().data());
      QString dev = ticker ? ticker->ticks().value(lanePosition(b.device)) : QString::number(b.device);
      if (!hosts_.isEmpty()) dev = hosts_.value(laneGroup(b.device)) + QLatin1Char('/') + dev;
      return tr("%1 · step %2\n%3: %4 ms").arg(dev).arg(b.step).arg(phaseName(b.phase)).arg(b.t1 - b.t0, 0, 'f', 2);
    }
  return {};
}

}  // namespace mlui
