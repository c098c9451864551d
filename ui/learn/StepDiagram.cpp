// The mirrored-step diagram: lanes to the measured scale and the all-reduce's data movement.
#include "learn/StepDiagram.h"
#include "JsonFile.h"

#include <QPainter>
#include <QPainterPath>

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

namespace mlui {

namespace {
constexpr double kMargin = 16, kLabelW = 150, kBatchTop = 44, kBatchH = 24, kLanesTop = 92, kLaneGap = 14;
constexpr double kCommW = 270;

int orderIndex(Phase p) {
  for (int i = 0; i < StepDiagram::kPhases; ++i)
    if (StepDiagram::kOrder[i] == p) return i;
  return 0;
}

double seconds(const ml::PhaseTimes& t, Phase p) {
  switch (p) {
    case Phase::Forward: return t.forward;
    case Phase::Backward: return t.backward;
    case Phase::AllReduce: return t.allreduce;
    case Phase::Wait: return t.wait;
    case Phase::Optimizer: return t.optimizer;
    case Phase::AllGather: return t.allgather;
    case Phase::Network: return t.network;
    case Phase::Input: return t.input;
  }
  return 0;
}

QString ms(double s) {
  if (s < 1e-3) return QStringLiteral("%1 µs").arg(s * 1e6, 0, 'f', 0);
  return QStringLiteral("%1 ms").arg(s * 1e3, 0, 'f', s < 0.01 ? 2 : 1);
}

QString doing(Phase p) {
  switch (p) {
    case Phase::Forward: return QObject::tr("forward pass on its own shard");
    case Phase::Backward: return QObject::tr("backward pass, producing gradients");
    case Phase::Wait: return QObject::tr("waiting for the slowest replica");
    case Phase::AllReduce: return QObject::tr("all-reduce, summing the gradients");
    case Phase::Optimizer: return QObject::tr("applying the same update");
    case Phase::AllGather: return QObject::tr("all-gather, copying the parameters the other replicas updated");
    case Phase::Network: return QObject::tr("sending the sums to the other workers over the network");
    case Phase::Input: return QObject::tr("bringing its shard of the batch to the device");
  }
  return {};
}

QPointF lerp(QPointF a, QPointF b, double f) { return a + (b - a) * f; }
}  // namespace

StepSceneInfo sceneInfoFromConfig(const std::string& configJson) {
  StepSceneInfo info;
  const auto j = ml::parseJsonOrDiscarded(configJson);
  if (!j.is_object()) return info;
  if (auto it = j.find("allreduce"); it != j.end() && it->is_string()) info.algo = QString::fromStdString(it->get<std::string>());
  if (auto it = j.find("buckets"); it != j.end() && it->is_number_integer()) info.buckets = std::max(1, it->get<int>());
  if (auto it = j.find("parameters"); it != j.end() && it->is_number_integer()) info.gradientBytes = it->get<int64_t>() * 4;
  if (auto it = j.find("device_names"); it != j.end() && it->is_array())
    for (const auto& d : *it)
      if (d.is_string()) info.deviceNames << QString::fromStdString(d.get<std::string>());
  if (auto it = j.find("shard_optimizer"); it != j.end() && it->is_boolean()) info.shardedOptimizer = it->get<bool>();
  return info;
}

StepDiagram::StepDiagram(QWidget* parent) : QWidget(parent) {
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
  setAccessibleName(tr("Diagram of one mirrored training step"));
}

void StepDiagram::clear() {
  step_ = {};
  lanes_.clear();
  duration_ = t_ = 0;
  update();
}

void StepDiagram::setStep(const ml::StepEvent& step, const StepSceneInfo& info) {
  step_ = step;
  info_ = info;
  lanes_.clear();
  duration_ = 0;
  if (step_.replicas.empty()) {
    update();
    return;
  }
  double t0 = step_.replicas.front().start;
  for (const auto& r : step_.replicas) t0 = std::min(t0, r.start);
  for (const auto& r : step_.replicas) {
    Lane lane;
    lane.offset = r.start - t0;
    double at = lane.offset;
    for (int i = 0; i < StepDiagram::kPhases; ++i) {
      lane.begin[i] = at;
      at += std::max(0.0, seconds(r.phases, kOrder[i]));
      lane.end[i] = at;
    }
    duration_ = std::max(duration_, at);
    lanes_.push_back(lane);
  }
  t_ = std::clamp(t_, 0.0, duration_);
  update();
}

void StepDiagram::setProgress(double s) {
  t_ = std::clamp(s, 0.0, duration_);
  update();
}

double StepDiagram::phaseSeconds(int replica, Phase phase) const {
  if (replica < 0 || replica >= replicaCount()) return 0;
  return std::max(0.0, seconds(step_.replicas[static_cast<size_t>(replica)].phases, phase));
}

double StepDiagram::phaseStart(int replica, Phase p) const { return lanes_[static_cast<size_t>(replica)].begin[orderIndex(p)]; }

double StepDiagram::laneHeight() const {
  // Lanes grow with the widget (room below for the axis, legend and caption), within limits.
  const double room = height() - kLanesTop - 150;
  const int n = std::max(1, replicaCount());
  return std::clamp(room / n - kLaneGap, 24.0, 72.0);
}

QRectF StepDiagram::lanesArea() const {
  const bool comm = width() >= 760;
  const double right = width() - kMargin - (comm ? kCommW + 18 : 0);
  const double left = kMargin + kLabelW;
  const double h = std::max(1, replicaCount()) * (laneHeight() + kLaneGap) - kLaneGap;
  return QRectF(left, kLanesTop, std::max(40.0, right - left), h);
}

QRectF StepDiagram::commArea() const {
  if (width() < 760) return {};
  return QRectF(width() - kMargin - kCommW, kBatchTop - 8, kCommW, std::max(220.0, height() - kBatchTop - 56));
}

double StepDiagram::pixelsPerSecond() const { return duration_ > 0 ? lanesArea().width() / duration_ : 0; }

QRectF StepDiagram::segmentRect(int replica, Phase phase) const {
  if (replica < 0 || replica >= replicaCount()) return {};
  const QRectF a = lanesArea();
  const auto& lane = lanes_[static_cast<size_t>(replica)];
  const int i = orderIndex(phase);
  const double pps = pixelsPerSecond();
  return QRectF(a.left() + lane.begin[i] * pps, a.top() + replica * (laneHeight() + kLaneGap),
                (lane.end[i] - lane.begin[i]) * pps, laneHeight());
}

QRectF StepDiagram::shardRect(int replica) const {
  if (replica < 0 || replica >= replicaCount()) return {};
  const QRectF a = lanesArea();
  double total = 0, before = 0;
  for (int r = 0; r < replicaCount(); ++r) {
    const double s = static_cast<double>(step_.replicas[static_cast<size_t>(r)].samples);
    total += s;
    if (r < replica) before += s;
  }
  const double mine = static_cast<double>(step_.replicas[static_cast<size_t>(replica)].samples);
  if (total <= 0) return QRectF(a.left() + a.width() * replica / replicaCount(), kBatchTop, a.width() / replicaCount(), kBatchH);
  return QRectF(a.left() + a.width() * before / total, kBatchTop, a.width() * mine / total, kBatchH);
}

Phase StepDiagram::phaseAt(int replica, double s) const {
  const auto& lane = lanes_[static_cast<size_t>(replica)];
  for (int i = 0; i < StepDiagram::kPhases; ++i)
    if (s < lane.end[i]) return kOrder[i];
  return Phase::Optimizer;
}

double StepDiagram::commProgress() const {
  double best = -1;
  const int ar = orderIndex(Phase::AllReduce);
  for (const auto& lane : lanes_) {
    const double b = lane.begin[ar], e = lane.end[ar];
    if (e > b && t_ >= b && t_ < e) best = std::max(best, (t_ - b) / (e - b));
  }
  return best;
}

QString StepDiagram::currentActivity() const {
  if (!hasStep()) return tr("No step with per-replica timings to show.");
  QStringList parts;
  // Group replicas by what they do at the playhead.
  for (int pi = 0; pi < kPhases; ++pi) {
    QStringList who;
    for (int r = 0; r < replicaCount(); ++r) {
      const auto& lane = lanes_[static_cast<size_t>(r)];
      const bool before = t_ < lane.offset, after = t_ >= lane.end[kPhases - 1];
      if (!before && !after && phaseAt(r, t_) == kOrder[pi]) who << QString::number(r);
    }
    const bool ownShare = info_.shardedOptimizer && kOrder[pi] == Phase::Optimizer;
    if (!who.isEmpty())
      parts << (who.size() == 1 ? tr("replica %1: %2") : tr("replicas %1: %2"))
                   .arg(who.join(QStringLiteral(", ")),
                        ownShare ? tr("updating only its 1/%1 of the parameters").arg(replicaCount()) : doing(kOrder[pi]));
  }
  if (parts.isEmpty() && t_ > 0 && info_.shardedOptimizer)
    return tr("Step done: each replica updated only the 1/%1 of the parameters whose summed gradient it owns, so each "
              "replica keeps 1/%1 of Adam's state (its moments m and v); the all-gather then copied the rest, so the "
              "copies are identical again.")
        .arg(replicaCount());
  if (parts.isEmpty())
    return t_ <= 0 ? tr("The global batch is about to be split into %1 shards.").arg(replicaCount())
                   : tr("Step done: every replica applied the same averaged gradient, so the copies are identical again.");
  QString s = parts.join(QStringLiteral("; ")) + QLatin1Char('.');
  const double p = commProgress();
  if (p >= 0 && replicaCount() > 1) {
    const int n = replicaCount();
    if (info_.algo == QLatin1String("reduce-to-one")) {
      s += p < 0.5 ? tr(" Every replica sends its gradient to replica 0, which sums them.")
                   : tr(" Replica 0 sends the sum back to every replica.");
    } else {
      const int hops = 2 * (n - 1);
      const double x = p * std::max(1, info_.buckets) * hops;
      const int k = static_cast<int>(x) % hops;
      const int bucket = static_cast<int>(x / hops) + 1;
      s += k < n - 1 ? tr(" Ring reduce-scatter, hop %1 of %2: each replica adds the chunk it receives to its own.")
                           .arg(k + 1)
                           .arg(n - 1)
                     : tr(" Ring all-gather, hop %1 of %2: each replica passes on a finished chunk.").arg(k - n + 2).arg(n - 1);
      if (info_.buckets > 1) s += tr(" (bucket %1 of %2)").arg(bucket).arg(info_.buckets);
    }
  }
  return s;
}

void StepDiagram::paintComm(QPainter& p, const QRectF& area) const {
  p.setPen(QPen(QColor(0xdd, 0xe3, 0xea)));
  p.setBrush(QColor(0xf7, 0xf9, 0xfc));
  p.drawRoundedRect(area, 8, 8);
  const int n = replicaCount();
  const bool r2o = info_.algo == QLatin1String("reduce-to-one");
  p.setPen(QColor(0x3b, 0x4a, 0x5a));
  QFont f = font();
  f.setBold(true);
  p.setFont(f);
  const QString title = n <= 1 ? tr("No communication") : r2o ? tr("Reduce-to-one") : tr("Ring all-reduce");
  p.drawText(area.adjusted(12, 8, -12, 0), Qt::AlignTop | Qt::AlignLeft, title);
  p.setFont(font());
  const QPointF c(area.center().x(), area.top() + 40 + (area.height() - 170) / 2);
  const double radius = std::min(area.width() / 2 - 34, (area.height() - 190) / 2);
  std::vector<QPointF> nodes;
  for (int i = 0; i < n; ++i) {
    const double a = -M_PI / 2 + 2 * M_PI * i / std::max(1, n);
    nodes.push_back(n == 1 ? c : QPointF(c.x() + radius * std::cos(a), c.y() + radius * std::sin(a)));
  }
  // Links.
  p.setPen(QPen(QColor(0xb8, 0xc2, 0xcc), 2));
  if (n > 1) {
    for (int i = 0; i < n; ++i) {
      if (r2o) {
        if (i > 0) p.drawLine(nodes[0], nodes[static_cast<size_t>(i)]);
      } else if (n > 2 || i == 0) {
        p.drawLine(nodes[static_cast<size_t>(i)], nodes[static_cast<size_t>((i + 1) % n)]);
      }
    }
  }
  // Chunks in flight.
  const double prog = commProgress();
  if (prog >= 0 && n > 1) {
    const double chunk = 12;
    auto drawChunk = [&](QPointF at, int colourOf) {
      p.setPen(QPen(Qt::white, 1.5));
      p.setBrush(deviceColor(colourOf));
      p.drawRoundedRect(QRectF(at.x() - chunk / 2, at.y() - chunk / 2, chunk, chunk), 3, 3);
    };
    if (r2o) {
      if (prog < 0.5) {
        for (int i = 1; i < n; ++i) drawChunk(lerp(nodes[static_cast<size_t>(i)], nodes[0], prog * 2), i);
      } else {
        for (int i = 1; i < n; ++i) drawChunk(lerp(nodes[0], nodes[static_cast<size_t>(i)], prog * 2 - 1), 0);
      }
    } else {
      const int hops = 2 * (n - 1);
      const double x = prog * std::max(1, info_.buckets) * hops;
      const int k = static_cast<int>(x) % hops;
      const double frac = x - std::floor(x);
      for (int i = 0; i < n; ++i) {
        const int chunkIndex = ((i - k) % n + n) % n;  // the chunk replica i forwards on this hop
        drawChunk(lerp(nodes[static_cast<size_t>(i)], nodes[static_cast<size_t>((i + 1) % n)], frac), chunkIndex);
      }
    }
  }
  // Nodes.
  for (int i = 0; i < n; ++i) {
    const QPointF at = nodes[static_cast<size_t>(i)];
    p.setPen(QPen(Qt::white, 2));
    p.setBrush(deviceColor(i));
    p.drawEllipse(at, 17, 17);
    p.setPen(Qt::white);
    QFont bf = font();
    bf.setBold(true);
    p.setFont(bf);
    p.drawText(QRectF(at.x() - 17, at.y() - 17, 34, 34), Qt::AlignCenter, QString::number(i));
    p.setFont(font());
  }
  // What it moves.
  p.setPen(QColor(0x5a, 0x67, 0x75));
  QString foot;
  if (n <= 1) {
    foot = tr("One replica holds the only gradient: nothing to exchange.");
  } else {
    const double mb = static_cast<double>(info_.gradientBytes) / (1024.0 * 1024.0);
    const double perReplica = r2o ? 1.0 : 2.0 * (n - 1) / n;
    foot = tr("%1 MiB of gradients per replica; %2 each replica sends %3 MiB per step.")
               .arg(mb, 0, 'f', 2)
               .arg(r2o ? tr("every replica sends its whole gradient to replica 0 and receives the sum;")
                        : tr("ring: %1 hops,").arg(2 * (n - 1)))
               .arg(mb * perReplica, 0, 'f', 2);
    if (info_.buckets > 1)
      foot += tr(" In %1 buckets, started as backward produces them: only the part not hidden behind backward is timed.")
                  .arg(info_.buckets);
  }
  p.drawText(area.adjusted(12, area.height() - 118, -12, -8), Qt::AlignLeft | Qt::AlignBottom | Qt::TextWordWrap, foot);
}

void StepDiagram::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  p.fillRect(rect(), Qt::white);
  const QColor text(0x1f, 0x2d, 0x3d), muted(0x6b, 0x77, 0x85);
  if (!hasStep()) {
    p.setPen(muted);
    p.drawText(rect().adjusted(20, 20, -20, -20), Qt::AlignCenter | Qt::TextWordWrap,
               placeholder_.isEmpty()
                   ? tr("Choose a run to replay: the latest training run, or a stored run from the list above.\n"
                        "Each step is drawn to its measured durations.")
                   : placeholder_);
    return;
  }
  const int n = replicaCount();
  // Header.
  QFont bold = font();
  bold.setBold(true);
  p.setFont(bold);
  p.setPen(text);
  p.drawText(QRectF(kMargin, 10, width() - 2 * kMargin, 22), Qt::AlignLeft | Qt::AlignVCenter,
             tr("Step %1 (epoch %2) · %3 measured, first replica start to last replica end")
                 .arg(step_.step)
                 .arg(step_.epoch)
                 .arg(ms(duration_)));
  p.setFont(font());
  // Global batch and its shards.
  p.setPen(muted);
  p.drawText(QRectF(kMargin, kBatchTop, kLabelW - 8, kBatchH), Qt::AlignLeft | Qt::AlignVCenter,
             tr("global batch: %1").arg(step_.samples));
  for (int r = 0; r < n; ++r) {
    const QRectF s = shardRect(r);
    QColor c = deviceColor(r);
    c.setAlpha(t_ > 0 ? 110 : 230);
    p.setPen(QPen(Qt::white, 1.5));
    p.setBrush(c);
    p.drawRect(s);
    p.setPen(text);
    const QString samples = tr("%1 samples").arg(step_.replicas[static_cast<size_t>(r)].samples);
    if (p.fontMetrics().horizontalAdvance(samples) <= s.width() - 6) p.drawText(s, Qt::AlignCenter, samples);
  }
  // Lanes.
  const QRectF area = lanesArea();
  for (int r = 0; r < n; ++r) {
    const double y = area.top() + r * (laneHeight() + kLaneGap);
    p.setPen(Qt::NoPen);
    p.setBrush(deviceColor(r));
    p.drawEllipse(QPointF(kMargin + 6, y + laneHeight() / 2), 5, 5);
    p.setPen(text);
    const QString name = r < info_.deviceNames.size() ? info_.deviceNames[r] : tr("replica %1").arg(r);
    p.drawText(QRectF(kMargin + 16, y - 2, kLabelW - 20, laneHeight() / 2 + 2), Qt::AlignLeft | Qt::AlignVCenter,
               tr("replica %1 · %2").arg(r).arg(name));
    p.setPen(muted);
    p.drawText(QRectF(kMargin + 16, y + laneHeight() / 2, kLabelW - 20, laneHeight() / 2), Qt::AlignLeft | Qt::AlignVCenter,
               tr("%1 samples").arg(step_.replicas[static_cast<size_t>(r)].samples));
    p.setPen(QPen(QColor(0xe9, 0xed, 0xf2), 1));
    p.drawLine(QPointF(area.left(), y + laneHeight() / 2), QPointF(area.right(), y + laneHeight() / 2));
    for (Phase ph : kOrder) {
      const QRectF seg = segmentRect(r, ph);
      if (seg.width() <= 0) continue;
      const double x = area.left() + t_ * pixelsPerSecond();
      QColor done = phaseColor(ph), ahead = phaseColor(ph);
      ahead.setAlpha(70);
      p.setPen(Qt::NoPen);
      if (x >= seg.right()) {
        p.setBrush(done);
        p.drawRect(seg);
      } else if (x <= seg.left()) {
        p.setBrush(ahead);
        p.drawRect(seg);
      } else {
        p.setBrush(done);
        p.drawRect(QRectF(seg.left(), seg.top(), x - seg.left(), seg.height()));
        p.setBrush(ahead);
        p.drawRect(QRectF(x, seg.top(), seg.right() - x, seg.height()));
      }
      // The label only where it fits whole: "name time", else the time alone, else nothing
      // (a clipped "rward 22 µ" reads as neither).
      const QString full = QStringLiteral("%1 %2").arg(phaseName(ph), ms(phaseSeconds(r, ph))), time = ms(phaseSeconds(r, ph));
      const double room = seg.width() - 8;
      const QString label = p.fontMetrics().horizontalAdvance(full) <= room   ? full
                            : p.fontMetrics().horizontalAdvance(time) <= room ? time
                                                                              : QString();
      if (!label.isEmpty()) {
        p.setPen(ph == Phase::Wait || x < seg.right() ? text : QColor(Qt::white));
        p.drawText(seg.adjusted(4, 0, -4, 0), Qt::AlignCenter, label);
      }
    }
  }
  // Time axis.
  const double axisY = area.bottom() + 10;
  p.setPen(QPen(muted, 1));
  p.drawLine(QPointF(area.left(), axisY), QPointF(area.right(), axisY));
  const double raw = duration_ / 6;
  const double mag = std::pow(10.0, std::floor(std::log10(std::max(raw, 1e-9))));
  const double tick = raw / mag < 2 ? 2 * mag : raw / mag < 5 ? 5 * mag : 10 * mag;
  for (double tt = 0; tt <= duration_ + 1e-12; tt += tick) {
    const double x = area.left() + tt * pixelsPerSecond();
    p.drawLine(QPointF(x, axisY), QPointF(x, axisY + 4));
    p.drawText(QRectF(x - 40, axisY + 5, 80, 16), Qt::AlignHCenter | Qt::AlignTop, ms(tt));
  }
  // Playhead.
  const double px = area.left() + t_ * pixelsPerSecond();
  p.setPen(QPen(accentColor(), 2));
  p.drawLine(QPointF(px, kBatchTop + kBatchH + 6), QPointF(px, axisY));
  // Legend, on a second line where the lanes are too narrow for one (a 1024 px window cut it).
  double lx = area.left();
  double ly = axisY + 26;
  for (Phase ph : kOrder) {
    const QString name = phaseName(ph);
    const double w = 26 + p.fontMetrics().horizontalAdvance(name);
    if (lx > area.left() && lx + w > area.right() + 10) {
      lx = area.left();
      ly += 20;
    }
    p.setPen(Qt::NoPen);
    p.setBrush(phaseColor(ph));
    p.drawRect(QRectF(lx, ly + 3, 12, 12));
    p.setPen(text);
    p.drawText(QRectF(lx + 16, ly, 110, 18), Qt::AlignLeft | Qt::AlignVCenter, name);
    lx += w;
  }
  // Caption.
  p.setPen(text);
  p.drawText(QRectF(kMargin, ly + 24, area.right() - kMargin, std::max(40.0, height() - ly - 28)),
             Qt::AlignLeft | Qt::AlignTop | Qt::TextWordWrap, currentActivity());
  const QRectF comm = commArea();
  if (!comm.isEmpty()) paintComm(p, comm);
}

}  // namespace mlui
