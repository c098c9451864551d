// The scaling experiment view: real runs on a worker thread, charts filled as rows finish.
#include "learn/ScalingPanel.h"
#include "ReflowGrid.h"

#include <QComboBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QTableWidget>
#include <QVBoxLayout>

#include <qcustomplot.h>

#include <algorithm>

#include "DataCache.h"
#include "Error.h"
#include "Theme.h"
#include "backend/DeviceList.h"
#include "charts/FrameBudget.h"

namespace mlui {

namespace {
QString pct(double v) { return QStringLiteral("%1%").arg(100 * v, 0, 'f', 0); }
}  // namespace

ScalingPanel::ScalingPanel(std::function<ml::Project()> project, std::shared_ptr<DataCache> cache,
                           std::function<QString()> storePath, QWidget* parent)
    : QWidget(parent), project_(std::move(project)), cache_(std::move(cache)), storePath_(std::move(storePath)) {
  auto* v = new QVBoxLayout(this);
  v->setContentsMargins(14, 10, 14, 10);
  v->setSpacing(8);
  v->addWidget(pageHint(tr("Runs the current model for each device count, one stored run each, and compares the "
                           "throughput. Keep the global batch to see how much faster the same work gets (strong "
                           "scaling); keep the per-device batch to see how much more work gets done (weak scaling)."),
                        this));
  auto* row = new QHBoxLayout;
  row->addWidget(new QLabel(tr("Devices"), this));
  devices_ = new QLineEdit(QStringLiteral("cpu:1,2,4"), this);
  devices_->setToolTip(tr("Device counts to compare, e.g. cpu:1,2,4"));
  devices_->setAccessibleName(tr("Device counts"));
  devices_->setMaximumWidth(140);
  row->addWidget(devices_);
  row->addSpacing(10);
  row->addWidget(new QLabel(tr("Keep"), this));
  keep_ = new QComboBox(this);
  keep_->addItem(tr("the global batch (strong scaling)"), QStringLiteral("global"));
  keep_->addItem(tr("the per-device batch (weak scaling)"), QStringLiteral("per-device"));
  row->addWidget(keep_);
  row->addSpacing(10);
  row->addWidget(new QLabel(tr("Steps each"), this));
  steps_ = new QSpinBox(this);
  steps_->setRange(5, 100000);
  steps_->setValue(60);
  steps_->setToolTip(tr("Optimizer steps per device count; the median step time is used"));
  row->addWidget(steps_);
  run_ = new QPushButton(icon(QStringLiteral("play")), tr("Run scaling experiment"), this);
  run_->setDefault(true);
  stop_ = new QPushButton(icon(QStringLiteral("stop")), tr("Stop"), this);
  row->addStretch(1);
  v->addLayout(row);

  auto* statusRow = new QHBoxLayout;  // the buttons beside the status: the first row fits 1024 px
  statusRow->addWidget(run_);
  statusRow->addWidget(stop_);
  status_ = new QLabel(tr("Not run yet."), this);
  status_->setWordWrap(true);  // a long status must not widen the page
  statusRow->addWidget(status_, 1);
  progress_ = new QProgressBar(this);
  progress_->setFixedWidth(220);
  progress_->setRange(0, 1);
  progress_->setValue(0);
  statusRow->addWidget(progress_);
  v->addLayout(statusRow);

  auto* charts = new ReflowGrid(2, this);  // side by side, or stacked on a narrow window
  charts->setSpacing(10);
  speedup_ = new QCustomPlot(this);
  styleChart(speedup_, tr("Speed-up against the first row"), tr("devices"), tr("speed-up (x)"));
  speedup_->setMinimumSize(320, 220);
  ideal_ = speedup_->addGraph();
  ideal_->setName(tr("ideal (linear)"));
  ideal_->setPen(QPen(QColor(0x8a, 0x96, 0xa3), 1.5, Qt::DashLine));
  measured_ = speedup_->addGraph();
  measured_->setName(tr("measured"));
  measured_->setPen(QPen(accentColor(), 2.5));
  measured_->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, accentColor(), Qt::white, 9));
  speedup_->legend->setVisible(true);
  speedup_->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignLeft);
  speedup_->setAntialiasedElements(QCP::aeAll);
  charts->addWidget(speedup_);

  efficiency_ = new QCustomPlot(this);
  styleChart(efficiency_, tr("Efficiency and sync share"), tr("devices"), tr("% of ideal / % of step time"));
  efficiency_->setMinimumSize(320, 220);
  effBars_ = new QCPBars(efficiency_->xAxis, efficiency_->yAxis);
  effBars_->setName(tr("efficiency"));
  effBars_->setPen(Qt::NoPen);
  effBars_->setBrush(QColor(0x59, 0xA1, 0x4F));
  syncBars_ = new QCPBars(efficiency_->xAxis, efficiency_->yAxis);
  syncBars_->setName(tr("sync share (all-reduce + wait)"));
  syncBars_->setPen(Qt::NoPen);
  syncBars_->setBrush(phaseColor(Phase::AllReduce));
  auto* group = new QCPBarsGroup(efficiency_);
  effBars_->setBarsGroup(group);
  syncBars_->setBarsGroup(group);
  effBars_->setWidth(0.35);
  syncBars_->setWidth(0.35);
  efficiency_->legend->setVisible(true);
  efficiency_->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
  efficiency_->yAxis->setRange(0, 110);
  charts->addWidget(efficiency_);
  v->addWidget(charts, 3);

  explanation_ = new QLabel(this);
  explanation_->setWordWrap(true);
  explanation_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  setRole(explanation_, "bannerInfo");
  explanation_->setVisible(false);
  v->addWidget(explanation_);

  table_ = new QTableWidget(0, 9, this);
  table_->setHorizontalHeaderLabels({tr("devices"), tr("global\nbatch"), tr("per\nreplica"), tr("step (ms,\nmedian)"),
                                     tr("samples/s"), tr("speed-up"), tr("efficiency"), tr("sync\nshare"), tr("stored\nrun")});
  table_->verticalHeader()->setVisible(false);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  table_->setMinimumHeight(120);
  v->addWidget(table_, 1);

  connect(run_, &QPushButton::clicked, this, [this] { start(); });
  connect(stop_, &QPushButton::clicked, this, &ScalingPanel::stop);
  rebuildCharts();
  updateButtons();
}

ScalingPanel::~ScalingPanel() {
  cancel_.store(true);
  {
    std::lock_guard lock(mu_);
    if (experiment_) experiment_->requestCancel();
  }
  if (worker_.joinable()) worker_.join();
}

void ScalingPanel::setDevices(const QString& sweep) { devices_->setText(sweep); }
void ScalingPanel::setKeep(ml::BatchPolicy keep) { keep_->setCurrentIndex(keep == ml::BatchPolicy::KeepGlobal ? 0 : 1); }
void ScalingPanel::setSteps(int steps) { steps_->setValue(steps); }
void ScalingPanel::setOtherRunActive(bool active) {
  otherActive_ = active;
  updateButtons();
}
QString ScalingPanel::explanation() const { return explanation_->text(); }

void ScalingPanel::updateButtons() {
  run_->setEnabled(!running_ && !otherActive_);
  run_->setToolTip(otherActive_ && !running_
                       ? tr("Another run is using the cores: wait for it to end, or the timings would be meaningless")
                       : tr("Run the model on each device count, one stored run each"));
  stop_->setEnabled(running_);
  devices_->setEnabled(!running_);
  keep_->setEnabled(!running_);
  steps_->setEnabled(!running_);
}

bool ScalingPanel::start() {
  if (running_) return false;
  if (worker_.joinable()) worker_.join();
  ml::Project project;
  ml::ScalingOptions options;
  try {
    project = project_();
    options.devices = devices_->text().trimmed().toStdString();
    options.keep = ml::parseBatchPolicy(keep_->currentData().toString().toStdString());
    options.steps = steps_->value();
    options.storePath = storePath_().toStdString();
    options.runNamePrefix = project.name + " scaling";
    plannedRows_ = static_cast<int>(ml::parseDeviceSweep(options.devices).size());
  } catch (const std::exception& e) {
    Q_EMIT errorOccurred(tr("Cannot run the scaling experiment"), QString::fromStdString(e.what()));
    return false;
  }
  rows_.clear();
  keepUsed_ = options.keep;
  table_->setRowCount(0);
  explanation_->setVisible(false);
  rebuildCharts();
  cancel_.store(false);
  running_ = true;
  progress_->setRange(0, plannedRows_);
  progress_->setValue(0);
  status_->setText(tr("Loading the data set…"));
  updateButtons();
  Q_EMIT runningChanged(true);
  Q_EMIT started();
  worker_ = std::thread([this, project, options, cache = cache_] {
    ml::ScalingResult result;
    QString error;
    try {
      auto data = cache->get(project);
      ml::ScalingExperiment experiment(project, data, options);
      experiment.onRowStarted = [this](size_t i, const ml::Project& p, const ml::RunPlan& plan) {
        // Nothing redraws while a row is timed; the row's figures are drawn when it ends. Say so.
        const QString text = tr("Running %1 (%2 of %3): %4. %5")
                                 .arg(QString::fromStdString(p.distribute.devices.spec))
                                 .arg(i + 1)
                                 .arg(plannedRows_)
                                 .arg(QString::fromStdString(plan.sentence()), tr(FrameBudget::floorNote()));
        QMetaObject::invokeMethod(
            this, [this, text] { status_->setText(text); }, Qt::QueuedConnection);
      };
      experiment.onRowFinished = [this](size_t i, const ml::ScalingRow& row) {
        QMetaObject::invokeMethod(
            this, [this, row, i] { onRow(row, static_cast<int>(i)); }, Qt::QueuedConnection);
      };
      {
        std::lock_guard lock(mu_);
        experiment_ = &experiment;
      }
      if (cancel_.load()) experiment.requestCancel();
      result = experiment.run();
      std::lock_guard lock(mu_);
      experiment_ = nullptr;
    } catch (const std::exception& e) {
      std::lock_guard lock(mu_);
      experiment_ = nullptr;
      error = QString::fromStdString(e.what());
    }
    QMetaObject::invokeMethod(
        this, [this, result, error] { onDone(result, error); }, Qt::QueuedConnection);
  });
  return true;
}

void ScalingPanel::stop() {
  if (!running_) return;
  cancel_.store(true);
  std::lock_guard lock(mu_);
  if (experiment_) experiment_->requestCancel();
  status_->setText(tr("Stopping after the current step…"));
}

void ScalingPanel::onRow(const ml::ScalingRow& row, int index) {
  if (index >= static_cast<int>(rows_.size())) rows_.resize(static_cast<size_t>(index) + 1);
  rows_[static_cast<size_t>(index)] = row;
  ml::computeSpeedups(rows_);
  progress_->setValue(index + 1);
  rebuildCharts();
  Q_EMIT rowFinished(index);
}

void ScalingPanel::onDone(const ml::ScalingResult& result, const QString& error) {
  if (worker_.joinable()) worker_.join();
  running_ = false;
  updateButtons();
  Q_EMIT runningChanged(false);
  if (!error.isEmpty()) {
    status_->setText(tr("Could not run: %1").arg(error));
    Q_EMIT errorOccurred(tr("Cannot run the scaling experiment"), error);
    Q_EMIT finished(false, error);
    return;
  }
  rows_ = result.rows;  // the final figures (speed-ups against the first row)
  rebuildCharts();
  explanation_->setText(QString::fromStdString(result.explanation));
  explanation_->setVisible(!result.rows.empty());
  const QString msg = QString::fromStdString(result.message);
  status_->setText(result.completed ? tr("Done: %1 device counts, each stored as a run (see Runs).").arg(result.rows.size())
                                    : tr("Stopped: %1").arg(msg));
  Q_EMIT finished(result.completed, msg);
}

void ScalingPanel::rebuildCharts() {
  QVector<double> x, sp, ideal, eff, sync;
  for (const auto& r : rows_) {
    x << r.replicas;
    sp << r.speedup;
    eff << 100 * r.efficiency;
    sync << 100 * r.syncShare;
  }
  const int first = rows_.empty() ? 1 : rows_.front().replicas;
  int maxN = first;
  for (const auto& r : rows_) maxN = std::max(maxN, r.replicas);
  QVector<double> ix;
  for (const auto& r : rows_) {
    ix << r.replicas;
    ideal << static_cast<double>(r.replicas) / first;
  }
  ideal_->setData(ix, ideal, true);
  measured_->setData(x, sp, true);
  effBars_->setData(x, eff, true);
  syncBars_->setData(x, sync, true);
  // Axes: device counts as ticks.
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  for (const auto& r : rows_) ticker->addTick(r.replicas, QString::number(r.replicas));
  if (rows_.empty()) ticker->addTick(1, QStringLiteral("1"));
  for (QCustomPlot* plot : {speedup_, efficiency_}) {
    plot->xAxis->setTicker(ticker);
    plot->xAxis->setRange(0.5 * std::min(first, 1) + (first > 1 ? first - 1 : 0), maxN + 0.6);
  }
  double top = 1.2;
  for (double v : sp) top = std::max(top, v * 1.15);
  for (double v : ideal) top = std::max(top, v * 1.08);
  speedup_->yAxis->setRange(0, top);
  double etop = 110;
  for (double v : eff) etop = std::max(etop, v * 1.1);
  etop *= 1.3;  // room above the bars for the legend, which covered the tallest ones
  efficiency_->yAxis->setRange(0, etop);
  speedup_->replot(QCustomPlot::rpQueuedReplot);
  efficiency_->replot(QCustomPlot::rpQueuedReplot);

  table_->setRowCount(static_cast<int>(rows_.size()));
  for (int i = 0; i < static_cast<int>(rows_.size()); ++i) {
    const auto& r = rows_[static_cast<size_t>(i)];
    const QStringList cells = {
        QString::fromStdString(r.devices),
        QString::number(r.globalBatch),
        QString::number(r.perReplicaBatch),
        QString::number(r.stepSeconds * 1e3, 'f', 2),
        QString::number(r.samplesPerSecond, 'f', 0),
        QStringLiteral("%1x%2").arg(r.speedup, 0, 'f', 2).arg(r.note.empty() ? QString() : QStringLiteral(" *")),
        pct(r.efficiency),
        QStringLiteral("%1%").arg(100 * r.syncShare, 0, 'f', 1),
        r.runId ? tr("run %1").arg(*r.runId) : tr("not stored")};
    for (int c = 0; c < cells.size(); ++c) {
      auto* item = new QTableWidgetItem(cells[c]);
      item->setTextAlignment(c == 0 ? Qt::AlignLeft | Qt::AlignVCenter : Qt::AlignRight | Qt::AlignVCenter);
      if ((c == 5 || c == 6) && !r.note.empty()) item->setToolTip(QString::fromStdString(r.note));
      table_->setItem(i, c, item);
    }
  }
}

}  // namespace mlui
