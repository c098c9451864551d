// Expected (alpha-beta, modelled) against measured sync time, and the what-if.
#include "learn/SyncCostPanel.h"
#include "ReflowGrid.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSlider>
#include <QSpinBox>
#include <QTableWidget>
#include <QVBoxLayout>

#include <qcustomplot.h>

#include <algorithm>
#include <limits>

#include "Async.h"
#include "JsonFile.h"
#include "Theme.h"
#include "distribute/AllReduce.h"
#include "learn/LinkCalibration.h"
#include "learn/RunChooser.h"
#include "nn/Sequential.h"
#include "project/Project.h"
#include "store/RunStore.h"

namespace mlui {

namespace {
QString q(const std::string& s) { return QString::fromStdString(s); }
QString ms(double s) { return QStringLiteral("%1 ms").arg(s * 1e3, 0, 'f', s < 0.01 ? 3 : 2); }
const QColor kModelledColor(0x93, 0x6F, 0xC9);

// Where the calibrated links between hosts come from, always in view: its figures, source and date,
// and that its latency is a parameter (the links it was measured on add no delay).
QString calibrationText(bool inUse) {
  const auto& c = ml::shippedLinkCalibration();
  const QString ceiling = c.hostBytesPerSecond > 0
                              ? QObject::tr("hosts' ceiling %1 GB/s").arg(c.hostBytesPerSecond / 1e9, 0, 'g', 3)
                              : QObject::tr("no hosts' ceiling (none measured)");
  return QObject::tr(
             "%1Links between hosts marked calibrated: %2 µs per message, %3% of the link's rate, %4, measured %5 "
             "on %6. Its latency is that message overhead: those links add no delay, so on a network with a longer "
             "round trip it is a parameter, and larger.")
      .arg(inUse ? QObject::tr("In use: ") : QString())
      .arg(c.messageSeconds * 1e6, 0, 'f', 0)
      .arg(c.linkFraction * 100, 0, 'f', 0)
      .arg(ceiling, q(c.date), q(c.source).toHtmlEscaped());
}
}  // namespace

SyncCostPanel::SyncCostPanel(std::function<QString()> storePath, QWidget* parent)
    : QWidget(parent), storePath_(std::move(storePath)) {
  auto* v = new QVBoxLayout(this);
  v->setContentsMargins(14, 10, 14, 10);
  v->setSpacing(8);
  v->addWidget(pageHint(tr("How long should one all-reduce take? The alpha-beta model says: ring = 2(N\u22121)\u00b7\u03b1 + "
                           "2(N\u22121)/N \u00b7 bytes / bandwidth. Here it stands beside what was measured, and predicts how a "
                           "run would scale on another link. Predictions are labelled modelled and drawn dashed."),
                        this));
  auto* row = new QHBoxLayout;
  row->addWidget(new QLabel(tr("Run"), this));
  source_ = new QComboBox(this);
  source_->setMinimumWidth(300);
  source_->setAccessibleName(tr("Run to analyse"));
  row->addWidget(source_, 1);
  auto* reload = new QPushButton(icon(QStringLiteral("refresh")), tr("Refresh"), this);
  row->addWidget(reload);
  v->addLayout(row);
  row = new QHBoxLayout;  // the link and the algorithm on their own row: the window fits 1024 px
  row->addWidget(new QLabel(tr("Link"), this));
  link_ = new QComboBox(this);
  link_->addItem(tr("host memory (measured here)"), QStringLiteral("host"));
  for (const auto& l : ml::linkPresets())
    link_->addItem(tr("%1 (%2 GB/s, %3 µs)").arg(q(l.name)).arg(l.bandwidth / 1e9, 0, 'g', 3).arg(l.latency * 1e6, 0, 'g', 3),
                   q(l.id));
  row->addWidget(link_);
  row->addWidget(new QLabel(tr("Algorithm"), this));
  algo_ = new QComboBox(this);
  algo_->addItem(QStringLiteral("ring"), QStringLiteral("ring"));
  algo_->addItem(QStringLiteral("reduce-to-one"), QStringLiteral("reduce-to-one"));
  row->addWidget(algo_);
  row->addStretch(1);
  v->addLayout(row);
  row = new QHBoxLayout;  // and the wire format on a row of its own: the three side by side were 820 px
  row->addWidget(new QLabel(tr("Gradients on the wire"), this));
  wire_ = new QComboBox(this);
  wire_->setObjectName(QStringLiteral("wireDtype"));
  wire_->addItem(tr("float32"), QStringLiteral("float32"));
  wire_->addItem(tr("bfloat16 (half the bytes)"), QStringLiteral("bfloat16"));
  wire_->setToolTip(
      tr("The format of the gradients between replicas: the run's, or bfloat16 to see what halving the "
         "bytes would buy (it changes the results: Devices screen)"));
  row->addWidget(wire_);
  row->addStretch(1);
  v->addLayout(row);

  auto* row2 = new QHBoxLayout;
  row2->addWidget(new QLabel(tr("What-if for devices"), this));
  counts_ = new QLineEdit(QStringLiteral("1,2,4,8,16"), this);
  counts_->setMaximumWidth(140);
  counts_->setAccessibleName(tr("Device counts for the what-if"));
  row2->addWidget(counts_);
  row2->addSpacing(10);
  row2->addWidget(new QLabel(tr("Overlap with backward"), this));
  overlap_ = new QSlider(Qt::Horizontal, this);
  overlap_->setRange(0, 100);
  overlap_->setValue(0);
  overlap_->setFixedWidth(140);
  overlap_->setAccessibleName(tr("Share of the all-reduce hidden behind backward"));
  row2->addWidget(overlap_);
  overlapLabel_ = new QLabel(this);
  overlapLabel_->setMinimumWidth(40);
  row2->addWidget(overlapLabel_);
  row2->addStretch(1);
  v->addLayout(row2);
  // Several hosts (machines): the device counts are per host, a ring across them on this link. A
  // row of its own: beside the what-if's counts and overlap it made the page 938 px wide, wider than
  // the Learn screen at 1024x700.
  auto* row3 = new QHBoxLayout;
  row3->addWidget(new QLabel(tr("Hosts"), this));
  hosts_ = new QSpinBox(this);
  hosts_->setRange(1, 4096);
  hosts_->setAccessibleName(tr("Hosts (machines) for the what-if"));
  row3->addWidget(hosts_);
  row3->addWidget(new QLabel(tr("joined by"), this));
  crossLink_ = new QComboBox(this);
  crossLink_->setObjectName(QStringLiteral("crossLink"));
  for (const char* id : {"25gbit", "10gbit", "5gbit", "1gbit"}) {
    const ml::Link l = ml::calibratedLink(ml::parseLinkRate(id), ml::shippedLinkCalibration());
    crossLink_->addItem(q(l.name), QString::fromLatin1(id));
  }
  for (const auto& l : ml::linkPresets())
    if (l.id == "ib-hdr" || l.id == "100gbe" || l.id == "10gbe") crossLink_->addItem(tr("%1 (nominal)").arg(q(l.name)), q(l.id));
  crossLink_->setCurrentIndex(1);
  row3->addWidget(crossLink_);
  row3->addStretch(1);
  v->addLayout(row3);
  calibration_ = new QLabel(this);
  calibration_->setObjectName(QStringLiteral("calibration"));
  calibration_->setWordWrap(true);
  setRole(calibration_, "caption");
  v->addWidget(calibration_);

  compare_ = new QLabel(tr("Choose a stored run (any run with per-replica timings)."), this);
  compare_->setWordWrap(true);
  compare_->setTextFormat(Qt::RichText);
  compare_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  setRole(compare_, "planSentence");
  v->addWidget(compare_);

  auto* body = new ReflowGrid(2, this);  // chart beside the table, or above it on a narrow window
  body->setSpacing(10);
  chart_ = new QCustomPlot(this);
  styleChart(chart_, tr("Step time against devices"), tr("devices"), tr("step time (ms)"));
  chart_->setMinimumSize(360, 180);
  chart_->setAntialiasedElements(QCP::aeAll);
  ideal_ = chart_->addGraph();
  ideal_->setName(tr("linear scaling of the first row (modelled)"));
  ideal_->setPen(QPen(QColor(0x8a, 0x96, 0xa3), 1.2, Qt::DotLine));
  modelled_ = chart_->addGraph();
  modelled_->setName(tr("what-if step time (modelled)"));
  modelled_->setPen(QPen(kModelledColor, 2.2, Qt::DashLine));
  modelled_->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, kModelledColor, Qt::white, 7));
  measuredPoint_ = chart_->addGraph();
  measuredPoint_->setName(tr("this run (measured)"));
  measuredPoint_->setLineStyle(QCPGraph::lsNone);
  measuredPoint_->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, accentColor(), accentColor(), 11));
  chart_->legend->setVisible(true);
  chart_->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
  chart_->xAxis->setScaleType(QCPAxis::stLogarithmic);
  QSharedPointer<QCPAxisTickerLog> logTicker(new QCPAxisTickerLog);
  logTicker->setLogBase(2);
  chart_->xAxis->setTicker(logTicker);
  body->addWidget(chart_);
  table_ = new QTableWidget(0, 8, this);
  table_->setHorizontalHeaderLabels({tr("devices"), tr("compute\n(ms)"), tr("all-reduce\n(ms)"), tr("exposed\n(ms)"),
                                     tr("step\n(ms)"), tr("speed-up"), tr("efficiency"), tr("")});
  table_->verticalHeader()->setVisible(false);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  table_->setMinimumWidth(520);
  table_->setMinimumHeight(120);
  body->addWidget(table_);
  v->addWidget(body, 1);
  assumptions_ = new QLabel(this);
  assumptions_->setWordWrap(true);
  setRole(assumptions_, "caption");
  v->addWidget(assumptions_);

  connect(reload, &QPushButton::clicked, this, &SyncCostPanel::refreshRuns);
  connect(source_, &QComboBox::currentIndexChanged, this, [this] {
    const qlonglong id = source_->currentData().toLongLong();
    if (id > 0) loadRun(id);
  });
  for (QComboBox* c : {link_, algo_, wire_, crossLink_})
    connect(c, &QComboBox::currentIndexChanged, this, &SyncCostPanel::recompute);
  connect(hosts_, &QSpinBox::valueChanged, this, &SyncCostPanel::recompute);
  connect(counts_, &QLineEdit::editingFinished, this, &SyncCostPanel::recompute);
  connect(overlap_, &QSlider::valueChanged, this, &SyncCostPanel::recompute);
  recompute();
}

void SyncCostPanel::setLink(const QString& id) {
  const int at = link_->findData(id);
  if (at >= 0) link_->setCurrentIndex(at);
}

void SyncCostPanel::setDeviceCounts(const QString& counts) {
  counts_->setText(counts);
  recompute();
}

void SyncCostPanel::setHosts(int hosts, const QString& crossLink) {
  const QSignalBlocker quiet(hosts_);
  hosts_->setValue(hosts);
  const int at = crossLink_->findData(crossLink);
  if (at >= 0) crossLink_->setCurrentIndex(at);
  recompute();
}

void SyncCostPanel::refreshRuns() {
  runAsync<std::vector<ml::RunSummary>>(
      this, [p = storePath_().toStdString()] { return ml::RunStore::open(p).listRuns(); },
      [this](const Outcome<std::vector<ml::RunSummary>>& r) {
        if (!r.value) {
          Q_EMIT errorOccurred(tr("Cannot read the run store"), r.error);
          Q_EMIT runsListed();
          return;
        }
        const qlonglong before = source_->currentData().toLongLong();
        const int at = fillRunCombo(source_, *r.value, 0);
        Q_EMIT runsListed();
        if (at >= 0 && source_->currentData().toLongLong() != before)
          loadRun(source_->currentData().toLongLong());  // the newest run
      });
}

void SyncCostPanel::loadRun(int64_t runId) {
  selectRunQuietly(source_, runId);
  compare_->setText(tr("Loading run %1 and timing an all-reduce of its gradient on this machine…").arg(runId));
  const int generation = ++generation_;
  runAsync<Measured>(
      this,
      [p = storePath_().toStdString(), runId] {
        auto store = ml::RunStore::open(p);
        const ml::RunDetail run = store.loadRun(runId);
        const auto project = ml::Project::fromJson(
            ml::parseJsonText(run.projectJson, "run " + std::to_string(runId), "the stored project is damaged"),
            "run " + std::to_string(runId));
        const auto steps = store.loadSteps(runId, 1, 2000);
        Measured m;
        m.runId = runId;
        m.runName = q(run.summary.name);
        m.replicas = run.summary.replicas;
        m.workers = std::max(1, run.workers);
        m.bucketBytes = project.distribute.bucketBytes;
        m.globalBatch = run.summary.globalBatch;
        const int64_t grad = ml::Sequential(project.model).paramCount() * 4;
        m.profile = ml::profileFromSteps(steps, grad, "run " + std::to_string(runId));
        m.wire = project.distribute.allreduceDtype;
        // The parts and the whole from the same steps and replicas (store/RunFigures.h): the whole
        // was the median step against the parts' means, and a few slow steps made the parts larger.
        ml::RunFigures figures;
        for (size_t i = steps.size() > 1 ? 1 : 0; i < steps.size(); ++i) figures.addStep(steps[i]);
        m.sync = figures.sync();
        m.stepSeconds = m.sync.whole;
        m.host = ml::measureHostAllReduce(std::max(2, m.replicas), std::max<int64_t>(4, grad), 15);
        return m;
      },
      [this, generation, runId](const Outcome<Measured>& r) {
        if (generation != generation_) return;
        if (!r.value) {
          measured_.reset();
          compare_->setText(tr("Run %1 cannot be analysed: %2").arg(runId).arg(r.error.toHtmlEscaped()));
          recompute();
          Q_EMIT runLoaded();
          return;
        }
        measured_ = *r.value;
        {
          const QSignalBlocker quiet(wire_);  // the run's format and hosts, then one recompute
          const QSignalBlocker quietHosts(hosts_);
          wire_->setCurrentIndex(measured_->wire == ml::AllReduceDtype::Bfloat16 ? 1 : 0);
          hosts_->setValue(measured_->workers);
        }
        recompute();
        Q_EMIT runLoaded();
      });
}

void SyncCostPanel::recompute() {
  overlapLabel_->setText(QStringLiteral("%1%").arg(overlap_->value()));
  whatIf_.reset();
  estimate_.reset();
  table_->setRowCount(0);
  ideal_->data()->clear();
  modelled_->data()->clear();
  measuredPoint_->data()->clear();
  calibration_->setText(calibrationText(false));
  if (!measured_) {
    assumptions_->clear();
    chart_->replot(QCustomPlot::rpQueuedReplot);
    return;
  }
  const Measured& m = *measured_;
  const QString linkId = link_->currentData().toString();
  ml::Link link = linkId == QLatin1String("host") ? m.host.link : ml::linkPreset(linkId.toStdString());
  const ml::CollectiveAlgo algo = ml::parseCollectiveAlgo(algo_->currentData().toString().toStdString());
  const int n = std::max(2, m.replicas);
  // The bytes on the wire: two per parameter when the gradients cross as bfloat16.
  const auto wire = ml::parseAllReduceDtype(wire_->currentData().toString().toStdString());
  ml::ComputeProfile profile = m.profile;
  profile.gradientBytes = m.profile.gradientBytes / 4 * ml::bytesPerValue(wire);
  estimate_ = ml::estimateAllReduce(algo, n, static_cast<double>(profile.gradientBytes), link);
  const double kib = static_cast<double>(profile.gradientBytes) / 1024.0;
  QString text = tr("<b>One all-reduce of %1 KiB of %13 gradients over %2 devices</b> (%3):<br>"
                    "expected <b>%4</b> <i>(modelled, alpha-beta on %5: latency %6 + transfer %7)</i> · "
                    "timed now on this machine's memory <b>%8</b> <i>(measured after a warm-up: median of %10, from %11 to %12; "
                    "%9 GB/s bus bandwidth)</i>")
                     .arg(kib, 0, 'f', 1)
                     .arg(n)
                     .arg(q(ml::toString(algo)))
                     .arg(ms(estimate_->seconds))
                     .arg(q(link.name).toHtmlEscaped())
                     .arg(ms(estimate_->latencySeconds))
                     .arg(ms(estimate_->transferSeconds))
                     .arg(ms(m.host.seconds))
                     .arg(m.host.busBandwidth / 1e9, 0, 'f', 2)
                     .arg(m.host.repeats)
                     .arg(ms(m.host.secondsLow), ms(m.host.secondsHigh))
                     .arg(q(ml::toString(wire)));
  if (wire == ml::AllReduceDtype::Bfloat16)
    text +=
        tr("<br><i>The timing on this machine is of float32 values: the simulated devices' collective holds bfloat16 "
           "values in float32 memory, so only a real link carries half the bytes.</i>");
  if (wire != m.wire)
    text += tr("<br>Run %1 sent its gradients as %2; the figures here are for %3.")
                .arg(m.runId)
                .arg(q(ml::toString(m.wire)), q(ml::toString(wire)));
  if (m.replicas > 1)
    text += tr("<br>In run %1 (%2 replicas), per replica and step: all-reduce not hidden behind backward <b>%3</b>, waiting "
               "for the slowest replica <b>%4</b>, of a whole step of <b>%5</b> <i>(measured, means over the same steps)</i>.")
                .arg(m.runId)
                .arg(m.replicas)
                .arg(ms(m.sync.allreduce))
                .arg(ms(m.sync.wait))
                .arg(ms(m.sync.whole));
  else
    text += tr("<br>Run %1 trained on one replica, so it never communicated; its step took <b>%2</b> <i>(measured)</i>.")
                .arg(m.runId)
                .arg(ms(m.stepSeconds));
  compare_->setText(text);

  ml::WhatIfOptions o;
  o.link = link;
  o.workers = hosts_->value();
  const QString crossId = crossLink_->currentData().toString();
  const bool calibrated = crossId.endsWith(QLatin1String("bit"));
  if (o.workers > 1) {
    o.crossLink = calibrated ? ml::calibratedLink(ml::parseLinkRate(crossId.toStdString()), ml::shippedLinkCalibration())
                             : ml::linkPreset(crossId.toStdString());
    o.crossBuckets = static_cast<int>((profile.gradientBytes + m.bucketBytes - 1) / std::max<int64_t>(1, m.bucketBytes));
  }
  calibration_->setText(calibrationText(o.workers > 1 && calibrated));
  o.algo = algo;
  o.overlap = overlap_->value() / 100.0;
  o.batch = std::max<int64_t>(1, m.globalBatch);
  o.perDeviceBatch = false;
  o.devices.clear();
  for (const QString& part : counts_->text().split(QLatin1Char(','), Qt::SkipEmptyParts)) {
    bool ok = false;
    const int c = part.trimmed().toInt(&ok);
    if (ok && c >= 1 && c <= 4096) o.devices.push_back(c);
  }
  if (o.devices.empty()) {
    assumptions_->setText(tr("Type device counts such as 1,2,4,8 for the what-if."));
    chart_->replot(QCustomPlot::rpQueuedReplot);
    return;
  }
  try {
    whatIf_ = ml::predictScaling(profile, o);
  } catch (const std::exception& e) {
    assumptions_->setText(q(e.what()));
    chart_->replot(QCustomPlot::rpQueuedReplot);
    return;
  }
  const auto& rows = whatIf_->rows;
  table_->setRowCount(static_cast<int>(rows.size()));
  double top = 0;
  const double firstWork = rows.front().stepSeconds * rows.front().devices;  // linear scaling of the first row
  for (int i = 0; i < static_cast<int>(rows.size()); ++i) {
    const auto& r = rows[static_cast<size_t>(i)];
    const QStringList cells = {QString::number(r.devices),
                               QString::number(r.computeSeconds * 1e3, 'f', 3),
                               QString::number(r.allreduceSeconds * 1e3, 'f', 3),
                               QString::number(r.exposedSeconds * 1e3, 'f', 3),
                               QString::number(r.stepSeconds * 1e3, 'f', 3),
                               QStringLiteral("%1x").arg(r.speedup, 0, 'f', 2),
                               QStringLiteral("%1%").arg(100 * r.efficiency, 0, 'f', 0),
                               QString::fromLatin1(ml::kModelledLabel)};
    for (int c = 0; c < cells.size(); ++c) {
      auto* item = new QTableWidgetItem(cells[c]);
      item->setTextAlignment(c == 7 ? Qt::AlignLeft | Qt::AlignVCenter : Qt::AlignRight | Qt::AlignVCenter);
      if (c == 7) item->setForeground(kModelledColor);
      table_->setItem(i, c, item);
    }
    modelled_->addData(r.devices, r.stepSeconds * 1e3);
    ideal_->addData(r.devices, firstWork / r.devices * 1e3);
    top = std::max(top, r.stepSeconds * 1e3);
  }
  if (m.stepSeconds > 0) {
    measuredPoint_->addData(std::max(1, m.replicas), m.stepSeconds * 1e3);
    top = std::max(top, m.stepSeconds * 1e3);
  }
  const int maxN = *std::max_element(o.devices.begin(), o.devices.end());
  const int minN = *std::min_element(o.devices.begin(), o.devices.end());
  chart_->xAxis->setRange(std::max(0.7, minN * 0.8), std::max(2.0, maxN * 1.25));
  chart_->yAxis->setRange(0, top * 1.15 + 1e-9);
  chart_->replot(QCustomPlot::rpQueuedReplot);
  assumptions_->setText(tr("%1 Compute measured in %2.").arg(q(whatIf_->assumptions), q(m.profile.source)));
}

}  // namespace mlui
