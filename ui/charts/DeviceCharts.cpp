// Utilization and step-time breakdown per device.
#include "charts/DeviceCharts.h"

#include <algorithm>

#include "Theme.h"

namespace mlui {

static QString q(const std::string& s) { return QString::fromStdString(s); }

static QString computedTitle() { return QObject::tr("Utilization per device"); }
static QString computedAxis() { return QObject::tr("busy computing (%)"); }

static QString bytesText(double b) {
  if (b >= double(1 << 30)) return QStringLiteral("%1 GiB").arg(b / double(1 << 30), 0, 'f', 1);
  if (b >= double(1 << 20)) return QStringLiteral("%1 MiB").arg(b / double(1 << 20), 0, 'f', 1);
  return QStringLiteral("%1 KiB").arg(b / 1024.0, 0, 'f', 1);
}

QString gpuSampleText(const ml::DeviceSample& s) {
  QString t = QObject::tr("memory %1").arg(bytesText(s.memoryBytes));
  if (s.memoryTotalBytes > 0) t += QObject::tr(" of %1").arg(bytesText(s.memoryTotalBytes));
  if (s.temperatureC) t += QStringLiteral(" · %1 °C").arg(*s.temperatureC, 0, 'f', 0);
  return t;
}

UtilizationChart::UtilizationChart(QWidget* parent)
    : LiveChart(computedTitle(), tr("wall time (s)"), computedAxis(), QStringLiteral("utilization"), parent) {
  legend->setVisible(true);
  axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignBottom | Qt::AlignRight);
  yAxis->setRange(0, 105);
  interaction()->setFormatter([this](QCPAbstractPlottable* pl, double key, double value) { return tooltip(pl, key, value); });
}

QString UtilizationChart::tooltip(QCPAbstractPlottable* pl, double key, double value) const {
  for (const auto& [gpu, g] : gpuGraphs_)
    if (g == pl)
      return QStringLiteral("%1\n%2 s: %3% busy (NVML)\n%4")
          .arg(pl->name())
          .arg(key, 0, 'f', 1)
          .arg(value, 0, 'f', 0)
          .arg(nvmlTip(gpu, key));
  return QStringLiteral("%1\n%2 s: %3% busy").arg(pl->name()).arg(key, 0, 'f', 1).arg(value, 0, 'f', 1);
}

QString UtilizationChart::title() const {
  auto* t = qobject_cast<QCPTextElement*>(plotLayout()->element(0, 0));
  return t ? t->text() : QString();
}

void UtilizationChart::setDevices(const std::vector<std::string>& names) {
  clearGraphs();
  replicaGraphs_.clear();
  gpuGraphs_.clear();
  cols_.clear();
  extras_.clear();
  latest_.clear();
  anyComputed_ = false;
  for (size_t i = 0; i < names.size(); ++i) {
    QCPGraph* g = addLiveGraph();
    g->setName(q(names[i]));
    g->setPen(QPen(deviceColor(static_cast<int>(i)), 1.6));
    g->setAdaptiveSampling(false);  // decimated to min/max per pixel column already
    replicaGraphs_.push_back(g);
  }
  tmax_ = 0;
  updateLabels();
}

QCPGraph* UtilizationChart::deviceGraph(int device) const {
  return device >= 0 && device < deviceCount() ? replicaGraphs_[static_cast<size_t>(device)] : nullptr;
}

QCPGraph* UtilizationChart::gpuGraph(int gpu) const {
  const auto it = gpuGraphs_.find(gpu);
  return it == gpuGraphs_.end() ? nullptr : it->second;
}

QCPGraph* UtilizationChart::laneFor(const ml::DeviceSample& s) {
  if (s.source == ml::SampleSource::Nvml) {
    QCPGraph*& g = gpuGraphs_[s.gpu];
    if (!g) {
      g = addLiveGraph();
      g->setName(s.gpuReplicas > 1 ? tr("gpu:%1 (NVML, %2 replicas)").arg(s.gpu).arg(s.gpuReplicas)
                                   : tr("gpu:%1 (NVML)").arg(s.gpu));
      g->setPen(QPen(deviceColor(s.device), 1.6));  // the colour of its first replica in the other charts
      g->setAdaptiveSampling(false);
      updateLabels();
    }
    return g;
  }
  while (deviceCount() <= s.device) {  // samples before RunStarted named the devices
    QCPGraph* g = addLiveGraph();
    g->setName(QStringLiteral("device %1").arg(deviceCount()));
    g->setPen(QPen(deviceColor(deviceCount()), 1.6));
    replicaGraphs_.push_back(g);
  }
  QCPGraph* g = replicaGraphs_[static_cast<size_t>(s.device)];
  if (!anyComputed_) {
    anyComputed_ = true;
    updateLabels();
  }
  if (g->addToLegend()) requestFullFrame();  // NVML's lines had it left out: it has data now
  return g;
}

// The title and axis say whose figure the lines are; while NVML draws the GPUs, the replicas'
// computed lines (with no data) leave the legend.
void UtilizationChart::updateLabels() {
  const bool nvml = !gpuGraphs_.empty();
  QString title = computedTitle(), axis = computedAxis();
  if (nvml && !anyComputed_) {
    title = tr("GPU utilization (NVML)");
    axis = tr("GPU busy, NVML (%)");
  } else if (nvml) {
    title = tr("Utilization: NVML per GPU, computed per replica");
    axis = tr("busy (%)");
  }
  if (auto* t = qobject_cast<QCPTextElement*>(plotLayout()->element(0, 0))) t->setText(title);
  setAccessibleName(title);
  yAxis->setLabel(axis);
  if (nvml)
    for (QCPGraph* g : replicaGraphs_)
      if (g->data()->isEmpty() && (cols_.count(g) == 0 || cols_.at(g).rawCount() == 0)) g->removeFromLegend();
  requestFullFrame();
}

void UtilizationChart::addSample(const ml::DeviceSample& s) {
  if (s.device < 0 || (s.source == ml::SampleSource::Nvml && s.gpu < 0)) return;
  QCPGraph* g = laneFor(s);
  auto it = cols_.try_emplace(g, decimationColumns()).first;
  const double x = s.wallTime + pauseOffset_;
  it->second.add(x, s.utilization * 100.0);  // into the graph at the next frame (syncData)
  if (s.source == ml::SampleSource::Nvml) {
    extras_[s.gpu].push_back({x, s});
    latest_[s.gpu] = s;
  }
  tmax_ = std::max(tmax_, x);
}

QString UtilizationChart::nvmlTip(int gpu, double key) const {
  const auto it = extras_.find(gpu);
  if (it == extras_.end() || it->second.empty()) return {};
  const auto& v = it->second;
  auto at = std::lower_bound(v.begin(), v.end(), key, [](const Extra& e, double k) { return e.x < k; });
  if (at == v.end() || (at != v.begin() && key - std::prev(at)->x < at->x - key)) at = std::prev(at);
  QString t = gpuSampleText(at->sample);
  if (at->sample.gpuReplicas > 1) t += tr("\none sample of the GPU its %1 replicas share").arg(at->sample.gpuReplicas);
  return t;
}

void UtilizationChart::addPause(const ml::RunPaused& p) {
  for (auto& [g, c] : cols_) c.add(p.wallTime + pauseOffset_, qQNaN());  // a NaN breaks the line
  pauseOffset_ += p.seconds;
  tmax_ = std::max(tmax_, p.wallTime + pauseOffset_);
}

void UtilizationChart::syncData() {
  for (auto& [g, c] : cols_) syncGraph(g, c);
}

void UtilizationChart::clearData() {
  for (int i = 0; i < graphCount(); ++i) graph(i)->data()->clear();
  for (auto& [g, c] : cols_) c.clear();
  extras_.clear();
  latest_.clear();
  tmax_ = 0;
  pauseOffset_ = 0;
  redrawSoon();
}

void UtilizationChart::rescaleToData() {
  // Live: 1, 2, 4, 8 ... s (the axis moves a few times a run); after: a 30 ms run gets a 30 ms axis.
  const double fit = tmax_ > 0 ? tmax_ * 1.02 : 1.0;
  xAxis->setRange(0, live() ? steppedSpan(fit, 0, 1.0) : fit);
  yAxis->setRange(0, 105);
}

StepBreakdownChart::StepBreakdownChart(QWidget* parent)
    : LiveChart(tr("Step time per device"), QString(), tr("ms per step (last 20 steps)"), QStringLiteral("step-breakdown"),
                parent) {
  auto makeBars = [this](const QString& name, Phase phase) {
    auto* b = new QCPBars(xAxis, yAxis);
    b->setName(name);
    b->setPen(QPen(phaseColor(phase).darker(115), 1));
    b->setBrush(phaseColor(phase));
    b->setWidth(0.6);
    return b;
  };
  input_ = makeBars(tr("input"), Phase::Input);
  compute_ = makeBars(tr("compute"), Phase::Forward);
  allreduce_ = makeBars(tr("all-reduce"), Phase::AllReduce);
  network_ = makeBars(tr("network"), Phase::Network);
  allgather_ = makeBars(tr("all-gather"), Phase::AllGather);
  wait_ = makeBars(tr("waiting"), Phase::Wait);
  compute_->moveAbove(input_);
  allreduce_->moveAbove(compute_);
  network_->moveAbove(allreduce_);
  allgather_->moveAbove(network_);
  wait_->moveAbove(allgather_);
  input_->removeFromLegend();      // shown once a step has input time (every run since input is its own phase)
  network_->removeFromLegend();    // shown once a step crosses workers
  allgather_->removeFromLegend();  // shown once a step all-gathers (the sharded optimizer)
  legend->setVisible(true);
  axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
  xAxis->grid()->setVisible(false);
  setDevices({"cpu:0"});
  interaction()->setFormatter([this](QCPAbstractPlottable* pl, double key, double value) {
    const QString dev = xAxis->ticker().dynamicCast<QCPAxisTickerText>()->ticks().value(key);
    return QStringLiteral("%1 — %2\n%3 ms per step").arg(dev, pl->name()).arg(value, 0, 'f', 2);
  });
}

void StepBreakdownChart::setDevices(const std::vector<std::string>& names) {
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  for (size_t i = 0; i < names.size(); ++i) ticker->addTick(static_cast<double>(i + 1), q(names[i]));
  xAxis->setTicker(ticker);
  devices_ = std::max<int>(1, static_cast<int>(names.size()));
  xAxis->setRange(0.4, devices_ + 0.6);
  requestFullFrame();  // new tick labels
}

void StepBreakdownChart::addStep(const ml::StepEvent& e) {
  recent_.push_back(e.replicas);
  if (recent_.size() > kWindow) recent_.pop_front();
}

void StepBreakdownChart::updateBars() {
  if (recent_.empty()) return;
  const int n = static_cast<int>(recent_.back().size());
  QVector<double> keys(n), input(n, 0), compute(n, 0), ar(n, 0), net(n, 0), ag(n, 0), wait(n, 0);
  double total = 0, arTotal = 0, waitTotal = 0, netTotal = 0, agTotal = 0, inTotal = 0;
  for (const auto& step : recent_)
    for (const auto& r : step) {
      if (r.replica < 0 || r.replica >= n) continue;
      input[r.replica] += r.phases.input;
      compute[r.replica] += r.phases.compute();
      ar[r.replica] += r.phases.allreduce;
      net[r.replica] += r.phases.network;
      ag[r.replica] += r.phases.allgather;
      wait[r.replica] += r.phases.wait;
      total += r.phases.total();
      arTotal += r.phases.allreduce;
      waitTotal += r.phases.wait;
      netTotal += r.phases.network;
      agTotal += r.phases.allgather;
      inTotal += r.phases.input;
    }
  const double scale = 1000.0 / static_cast<double>(recent_.size());  // seconds summed -> ms per step
  ymax_ = 0;
  for (int i = 0; i < n; ++i) {
    keys[i] = i + 1;
    input[i] *= scale;
    compute[i] *= scale;
    ar[i] *= scale;
    net[i] *= scale;
    ag[i] *= scale;
    wait[i] *= scale;
    ymax_ = std::max(ymax_, input[i] + compute[i] + ar[i] + net[i] + ag[i] + wait[i]);
  }
  input_->setData(keys, input, true);
  compute_->setData(keys, compute, true);
  allreduce_->setData(keys, ar, true);
  network_->setData(keys, net, true);
  allgather_->setData(keys, ag, true);
  wait_->setData(keys, wait, true);
  // Each returns whether the legend changed (the network entry shows once a step crosses workers,
  // the all-gather's once one all-gathers).
  bool changed = netTotal > 0 ? network_->addToLegend() : network_->removeFromLegend();
  changed = (inTotal > 0 ? input_->addToLegend() : input_->removeFromLegend()) || changed;
  changed = (agTotal > 0 ? allgather_->addToLegend() : allgather_->removeFromLegend()) || changed;
  if (changed) {  // the legend lists the bars in their stacking order: input first, waiting, the top one, last
    if (inTotal > 0) {
      for (QCPBars* b : {compute_, allreduce_, network_, allgather_})
        if (b->removeFromLegend()) b->addToLegend();
    }
    wait_->removeFromLegend();
    wait_->addToLegend();
    requestFullFrame();
  }
  allreduceShare_ = total > 0 ? arTotal / total : 0;
  waitShare_ = total > 0 ? waitTotal / total : 0;
  networkShare_ = total > 0 ? netTotal / total : 0;
  allgatherShare_ = total > 0 ? agTotal / total : 0;
  inputShare_ = total > 0 ? inTotal / total : 0;
}

void StepBreakdownChart::clearData() {
  recent_.clear();
  input_->data()->clear();
  input_->removeFromLegend();
  compute_->data()->clear();
  allreduce_->data()->clear();
  network_->data()->clear();
  network_->removeFromLegend();
  allgather_->data()->clear();
  allgather_->removeFromLegend();
  wait_->data()->clear();
  allreduceShare_ = waitShare_ = networkShare_ = allgatherShare_ = inputShare_ = 0;
  ymax_ = 1;
  redrawSoon();
}

void StepBreakdownChart::rescaleToData() {
  xAxis->setRange(0.4, devices_ + 0.6);
  const double want = std::max(0.01, ymax_ * 1.25);  // headroom for the legend
  const double now = yAxis->range().upper;
  // Live, the bars move every frame but the axis only when they outgrow it or use under 60% of it.
  if (!live() || want > now * 1.1 || want < now * 0.6 || yAxis->range().lower != 0)
    yAxis->setRange(0, live() ? want * 1.1 : want);
}

}  // namespace mlui
