// The Sweeps screen: fields, worker thread, progress polling, and the results read from the store.
#include "SweepsView.h"
#include "ReflowGrid.h"

#include <QComboBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QResizeEvent>
#include <QScrollBar>
#include <QSpinBox>
#include <QSplitter>
#include <QTableWidget>
#include <QTimer>
#include <QVBoxLayout>

#include "Async.h"
#include "DataCache.h"
#include "Error.h"
#include "Format.h"
#include "ProjectDocument.h"
#include "Theme.h"
#include "backend/DeviceList.h"
#include "learn/Sweep.h"
#include "store/RunStore.h"

namespace mlui {

namespace {

enum Col {
  ColPoint,
  ColDevices,
  ColScaling,
  ColBatch,
  ColLr,
  ColStatus,
  ColProgress,
  ColMetric,
  ColToTarget,
  ColSpeed,
  ColRun,
  ColCount
};

QLineEdit* listField(const QString& tip, QWidget* parent) {
  auto* e = new QLineEdit(parent);
  e->setToolTip(tip);
  e->setAccessibleName(tip);
  e->setMinimumWidth(120);
  return e;
}

QString opt(const std::optional<double>& v, int decimals) { return v ? QString::number(*v, 'f', decimals) : QStringLiteral("–"); }

}  // namespace

SweepsView::SweepsView(ProjectDocument* doc, std::shared_ptr<DataCache> cache, std::function<QString()> storePath,
                       QWidget* parent)
    : QWidget(parent), doc_(doc), cache_(std::move(cache)), storePath_(std::move(storePath)) {
  auto* v = new QVBoxLayout(this);
  v->setContentsMargins(18, 14, 18, 12);
  v->setSpacing(8);
  v->addWidget(pageTitle(tr("Sweeps"), this));
  v->addWidget(
      pageHint(tr("Which global batch and learning rate now? Each point of the grid is a real, stored run of the current "
                  "project. Lists are comma-separated; the heatmaps show the chosen result over batch x learning rate, "
                  "one per device list."),
               this));

  auto* grid = new QHBoxLayout;
  auto* f1 = new QFormLayout;
  batches_ = listField(tr("Global batch sizes, e.g. 32,64,128"), this);
  lrs_ = listField(tr("Base learning rates, e.g. 1e-3,3e-3,1e-2"), this);
  f1->addRow(tr("Batch sizes"), batches_);
  f1->addRow(tr("Learning rates"), lrs_);
  auto* f2 = new QFormLayout;
  devices_ = listField(tr("Device lists, e.g. cpu:1,cpu:2"), this);
  scalings_ = listField(tr("Learning-rate scaling rules: none, linear, sqrt"), this);
  f2->addRow(tr("Devices"), devices_);
  f2->addRow(tr("LR scaling"), scalings_);
  auto* f3 = new QFormLayout;
  epochs_ = new QSpinBox(this);
  epochs_->setRange(1, 10000);
  steps_ = new QSpinBox(this);
  steps_->setRange(0, 10000000);
  steps_->setSpecialValueText(tr("all epochs"));
  steps_->setToolTip(tr("Stop each point after this many optimizer steps (0: run all epochs)"));
  f3->addRow(tr("Epochs"), epochs_);
  f3->addRow(tr("Steps"), steps_);
  auto* f4 = new QFormLayout;
  target_ = new QLineEdit(this);
  target_->setPlaceholderText(tr("none"));
  target_->setToolTip(tr("Validation metric to reach, e.g. 0.85: time and samples to it per point"));
  target_->setMaximumWidth(90);
  earlyStop_ = new QSpinBox(this);
  earlyStop_->setRange(0, 1000);
  earlyStop_->setSpecialValueText(tr("off"));
  earlyStop_->setToolTip(tr("Stop a point after this many epochs without a lower validation loss"));
  f4->addRow(tr("Target"), target_);
  f4->addRow(tr("Early stop"), earlyStop_);
  auto* f5 = new QFormLayout;
  parallel_ = new QSpinBox(this);
  parallel_->setRange(1, 16);
  parallel_->setToolTip(tr("Points trained at the same time"));
  maxPoints_ = new QSpinBox(this);
  maxPoints_->setRange(1, 100000);
  maxPoints_->setValue(static_cast<int>(ml::kDefaultMaxSweepPoints));
  maxPoints_->setToolTip(tr("A larger grid is refused before anything runs"));
  f5->addRow(tr("Parallel"), parallel_);
  f5->addRow(tr("Max points"), maxPoints_);
  // The five field groups side by side, or in two rows on a narrow window.
  auto* forms = new ReflowGrid(5, this);
  forms->setSpacing(12);
  for (auto* f : {f1, f2, f3, f4, f5}) {
    auto* holder = new QWidget(this);
    f->setContentsMargins(0, 0, 0, 0);
    holder->setLayout(f);
    forms->addWidget(holder, 0);
  }
  grid->addWidget(forms, 1);
  auto* buttons = new QVBoxLayout;
  run_ = new QPushButton(icon(QStringLiteral("play")), tr("Run sweep"), this);
  run_->setDefault(true);
  cancel_ = new QPushButton(icon(QStringLiteral("stop")), tr("Cancel"), this);
  fromProject_ = new QPushButton(icon(QStringLiteral("refresh")), tr("From project"), this);
  fromProject_->setToolTip(tr("Fill the lists with the current project's batch size, learning rate, devices and rule"));
  buttons->addWidget(run_);
  buttons->addWidget(cancel_);
  grid->addLayout(buttons);
  grid->addWidget(fromProject_, 0, Qt::AlignTop);
  v->addLayout(grid);

  auto* bar = new QHBoxLayout;
  bar->addWidget(new QLabel(tr("Sweep"), this));
  sweepList_ = new QComboBox(this);
  sweepList_->setSizeAdjustPolicy(QComboBox::AdjustToContents);  // a sweep's whole name and state
  sweepList_->setAccessibleName(tr("Stored sweeps"));
  bar->addWidget(sweepList_);
  resume_ = new QPushButton(icon(QStringLiteral("play")), tr("Resume"), this);
  resume_->setToolTip(tr("Run the points of this sweep that did not finish"));
  export_ = new QPushButton(icon(QStringLiteral("export")), tr("Export CSV…"), this);
  bar->addWidget(resume_);
  bar->addWidget(export_);
  bar->addStretch(1);
  v->addLayout(bar);
  // What the heatmaps show, on the status's row: beside the sweep's whole name it cut that at 1024 px.
  bar = new QHBoxLayout;
  status_ = new QLabel(tr("No sweep yet."), this);
  status_->setWordWrap(true);  // a long status must not widen the window
  bar->addWidget(status_, 1);
  bar->addWidget(new QLabel(tr("Show"), this));
  measure_ = new QComboBox(this);
  measure_->addItem(tr("final validation metric"), static_cast<int>(SweepMeasure::FinalMetric));
  measure_->addItem(tr("time to target"), static_cast<int>(SweepMeasure::SecondsToTarget));
  measure_->addItem(tr("samples to target"), static_cast<int>(SweepMeasure::SamplesToTarget));
  measure_->addItem(tr("samples/s"), static_cast<int>(SweepMeasure::SamplesPerSec));
  bar->addWidget(measure_);
  v->addLayout(bar);

  best_ = new QLabel(this);
  best_->setWordWrap(true);
  setRole(best_, "bannerInfo");
  best_->setVisible(false);
  v->addWidget(best_);

  auto* split = new QSplitter(Qt::Horizontal, this);
  split_ = split;
  table_ = new QTableWidget(0, ColCount, split);
  table_->setHorizontalHeaderLabels({tr("#"), tr("devices"), tr("scaling"), tr("batch"), tr("lr"), tr("status"), tr("progress"),
                                     tr("val metric"), tr("s to target"), tr("samples/s"), tr("run")});
  table_->verticalHeader()->setVisible(false);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->setToolTip(tr("Double-click a point to open its run in the Runs screen"));
  fitTableWidth();
  charts_ = new SweepCharts(split);
  split->addWidget(table_);
  split->addWidget(charts_);
  split->setStretchFactor(0, 3);  // the table's eleven columns need the room; the heatmaps shrink
  split->setStretchFactor(1, 2);
  v->addWidget(split, 1);

  poll_ = new QTimer(this);
  poll_->setInterval(250);
  connect(poll_, &QTimer::timeout, this, &SweepsView::pollProgress);
  connect(run_, &QPushButton::clicked, this, [this] { start(); });
  connect(cancel_, &QPushButton::clicked, this, &SweepsView::cancel);
  connect(resume_, &QPushButton::clicked, this, [this] { resume(); });
  connect(fromProject_, &QPushButton::clicked, this, &SweepsView::fillFromProject);
  connect(export_, &QPushButton::clicked, this, [this] {
    const QString path =
        QFileDialog::getSaveFileName(this, tr("Export sweep"), QStringLiteral("sweep-%1.csv").arg(shown_), tr("CSV (*.csv)"));
    if (!path.isEmpty()) exportCsv(path);
  });
  connect(measure_, &QComboBox::currentIndexChanged, this, [this] { showResults(); });
  connect(sweepList_, &QComboBox::activated, this, [this](int i) { loadResults(sweepList_->itemData(i).toLongLong()); });
  connect(table_, &QTableWidget::cellDoubleClicked, this, [this](int row, int) { openPoint(row); });
  connect(charts_, &SweepCharts::pointClicked, this, &SweepsView::openPoint);
  connect(doc_, &ProjectDocument::replaced, this, [this] {
    if (!running_) fillFromProject();
  });
  fillFromProject();
  updateButtons();
}

SweepsView::~SweepsView() {
  cancel();
  if (worker_.joinable()) worker_.join();
}

void SweepsView::fillFromProject() {
  const auto& p = doc_->project();
  batches_->setText(QString::number(p.training.perDeviceBatch ? p.training.batchSize * std::max(1, p.distribute.devices.size())
                                                              : p.training.batchSize));
  lrs_->setText(QString::fromStdString(ml::formatNumber("%g", p.training.optimizer.learningRate)));
  devices_->setText(QString::fromStdString(p.distribute.devices.spec));
  scalings_->setText(QString::fromLatin1(ml::toString(p.training.lrScaling)));
  epochs_->setValue(p.training.epochs);
}

bool SweepsView::start() {
  if (running_) return false;
  const ml::Project project = doc_->project();
  ml::SweepOptions o;
  try {
    o.grid.batchSizes = ml::parseBatchList(batches_->text().toStdString(), "Batch sizes");
    o.grid.lrs = ml::parseLrList(lrs_->text().toStdString(), "Learning rates");
    o.grid.devices = ml::parseDeviceSpecList(devices_->text().toStdString(), "Devices");
    o.grid.lrScalings = ml::parseScalingList(scalings_->text().toStdString(), "LR scaling");
    if (steps_->value() > 0)
      o.steps = steps_->value();
    else
      o.epochs = epochs_->value();
    if (!target_->text().trimmed().isEmpty()) {
      bool ok = false;
      o.target = target_->text().trimmed().toDouble(&ok);
      if (!ok)
        throw ml::UserError("Target: '" + target_->text().toStdString() + "' is not a number; give e.g. 0.85, or leave it empty");
    }
    o.stopAfterNoImprovement = earlyStop_->value();
    o.parallel = parallel_->value();
    o.maxPoints = maxPoints_->value();
    // Everything but the data set's size is checked now; the worker checks again with the data.
    const auto data = cache_->peek(project);
    ml::validateSweep(project, o, data ? data->train.size : (int64_t{1} << 40));
  } catch (const std::exception& e) {
    QString msg = QString::fromStdString(e.what());
    msg.replace(QStringLiteral("--max-points"), tr("Max points"));
    Q_EMIT errorOccurred(tr("The sweep cannot run"), msg);
    return false;
  }
  auto cache = cache_;
  const std::string path = storePath_().toStdString();
  launch([project, o, cache, path] { return std::make_unique<ml::SweepRunner>(project, cache->get(project), o, path); });
  return true;
}

bool SweepsView::resume() {
  if (running_ || shown_ == 0) return false;
  if (results_.sweep.finishedPoints() == static_cast<int>(results_.sweep.points.size())) {
    Q_EMIT errorOccurred(tr("Nothing to resume"), tr("Every point of sweep %1 has finished.").arg(shown_));
    return false;
  }
  auto cache = cache_;
  const std::string path = storePath_().toStdString();
  const int64_t id = shown_;
  launch([id, cache, path] {
    ml::RunStore store = ml::RunStore::open(path);
    const ml::SweepRecord rec = ml::loadSweep(store, id);
    const ml::Project p = ml::Project::fromJson(nlohmann::json::parse(rec.projectJson), "sweep " + std::to_string(id));
    return std::make_unique<ml::SweepRunner>(id, cache->get(p), path);
  });
  return true;
}

void SweepsView::launch(std::function<std::unique_ptr<ml::SweepRunner>()> make) {
  if (worker_.joinable()) worker_.join();
  running_ = true;
  cancelRequested_.store(false);
  status_->setText(tr("Preparing the sweep…"));
  updateButtons();
  Q_EMIT busyChanged(true);
  worker_ = std::thread([this, make = std::move(make)] {
    std::string status;
    QString error;
    try {
      auto runner = make();
      const qint64 id = runner->id();
      runner->onPointStarted = [this](const ml::SweepPointRow&) {
        QMetaObject::invokeMethod(
            this, [this] { loadResults(shown_); }, Qt::QueuedConnection);
      };
      runner->onPointFinished = [this](const ml::SweepPointRow& pt) {
        const int point = pt.point;
        QMetaObject::invokeMethod(
            this,
            [this, point] {
              loadResults(shown_);
              Q_EMIT pointFinished(point);
            },
            Qt::QueuedConnection);
      };
      {
        std::lock_guard lock(mu_);
        runner_ = runner.get();
        if (cancelRequested_.load()) runner->requestCancel();
      }
      QMetaObject::invokeMethod(
          this,
          [this, id] {
            shown_ = id;
            refresh(id);
            poll_->start();
            Q_EMIT sweepStarted(id);
          },
          Qt::QueuedConnection);
      status = runner->run();
      std::lock_guard lock(mu_);
      runner_ = nullptr;
    } catch (const std::exception& e) {
      error = QString::fromStdString(e.what());
    }
    QMetaObject::invokeMethod(
        this, [this, s = QString::fromStdString(status), error] { finishRun(s, error); }, Qt::QueuedConnection);
  });
}

void SweepsView::finishRun(const QString& status, const QString& error) {
  if (worker_.joinable()) worker_.join();
  running_ = false;
  poll_->stop();
  updateButtons();
  Q_EMIT busyChanged(false);
  if (!error.isEmpty()) {
    status_->setText(tr("The sweep did not run."));
    Q_EMIT errorOccurred(tr("The sweep cannot run"), error);
    Q_EMIT sweepEnded(QStringLiteral("failed"));
    return;
  }
  // The final results come from the store; sweepEnded follows once they are shown.
  const int64_t id = shown_;
  const int gen = ++loadGeneration_;
  const std::string path = storePath_().toStdString();
  runAsync<ml::SweepResults>(
      this,
      [path, id] {
        ml::RunStore store = ml::RunStore::open(path);
        return ml::loadSweepResults(store, id);
      },
      [this, gen, status](const Outcome<ml::SweepResults>& o) {
        if (gen == loadGeneration_ && o.value) {
          results_ = *o.value;
          showResults();
          Q_EMIT resultsLoaded();
          if (status == QLatin1String("failed")) reportNoPointTrained(*o.value);
        }
        refresh(shown_);
        Q_EMIT sweepEnded(status);
      });
}

// Every point failed (the sweep has no result): one message with the first point's reason and the
// way on; each point's own reason stays in the table.
void SweepsView::reportNoPointTrained(const ml::SweepResults& r) {
  QString first;
  for (const auto& p : r.points)
    if (p.point.status == "failed") {
      first = QString::fromStdString(p.point.message);
      break;
    }
  Q_EMIT errorOccurred(
      tr("No point of the sweep trained"),
      tr("Every point of sweep %1 failed, so it has no result. The first point's reason: %2\n\nIf the data or the disk was "
         "at fault, fix it and press Resume: the failed points train again. If the project was, fix it and "
         "run a new sweep.")
          .arg(r.sweep.id)
          .arg(first));
}

void SweepsView::cancel() {
  cancelRequested_.store(true);
  std::lock_guard lock(mu_);
  if (runner_) {
    runner_->requestCancel();
    status_->setText(tr("Cancelling: finished points stay stored, the rest are marked cancelled…"));
  }
}

void SweepsView::refresh(int64_t sweepId) {
  const std::string path = storePath_().toStdString();
  runAsync<std::vector<ml::SweepRecord>>(
      this,
      [path] {
        ml::RunStore store = ml::RunStore::open(path);
        return ml::listSweeps(store);
      },
      [this, sweepId](const Outcome<std::vector<ml::SweepRecord>>& o) {
        if (!o.value) {
          status_->setText(o.error);
          return;
        }
        sweepList_->clear();
        int select = -1;
        for (const auto& s : *o.value) {
          sweepList_->addItem(tr("#%1  %2 — %3, %4/%5 points")
                                  .arg(s.id)
                                  .arg(QString::fromStdString(s.name), QString::fromStdString(s.status))
                                  .arg(s.finishedPoints())
                                  .arg(s.points.size()),
                              QVariant::fromValue<qlonglong>(s.id));
          if (s.id == sweepId) select = sweepList_->count() - 1;
        }
        if (select < 0 && sweepList_->count() > 0 && sweepId == 0) select = 0;
        if (select >= 0) {
          sweepList_->setCurrentIndex(select);
          const int64_t id = sweepList_->itemData(select).toLongLong();
          if (id != shown_ || !running_) loadResults(id);
        }
        updateButtons();
      });
}

void SweepsView::loadResults(int64_t sweepId) {
  if (sweepId == 0) return;
  shown_ = sweepId;
  const int gen = ++loadGeneration_;
  const std::string path = storePath_().toStdString();
  runAsync<ml::SweepResults>(
      this,
      [path, sweepId] {
        ml::RunStore store = ml::RunStore::open(path);
        return ml::loadSweepResults(store, sweepId);
      },
      [this, gen](const Outcome<ml::SweepResults>& o) {
        if (gen != loadGeneration_) return;  // a newer load is under way
        if (!o.value) {
          Q_EMIT errorOccurred(tr("The sweep cannot be read"), o.error);
          return;
        }
        results_ = *o.value;
        showResults();
        updateButtons();
        Q_EMIT resultsLoaded();
      });
}

void SweepsView::showResults() {
  const auto& r = results_;
  table_->setRowCount(static_cast<int>(r.points.size()));
  const QString metric = QString::fromStdString(r.metric);
  table_->horizontalHeaderItem(ColMetric)->setText(tr("val %1").arg(metric));
  for (int i = 0; i < static_cast<int>(r.points.size()); ++i) {
    const auto& p = r.points[static_cast<size_t>(i)];
    const bool best = r.best && *r.best == static_cast<size_t>(i);
    const QStringList cells = {(best ? QStringLiteral("★ ") : QString()) + QString::number(p.point.point + 1),
                               QString::fromStdString(p.point.devices),
                               QString::fromStdString(p.point.lrScaling),
                               QString::number(p.point.batchSize),
                               QString::number(p.point.lr, 'g', 4),
                               QString::fromStdString(p.point.status),
                               QString(),
                               opt(p.finalValMetric, 4),
                               opt(p.secondsToTarget, 2),
                               opt(p.samplesPerSec, 0),
                               p.point.runId ? QString::number(*p.point.runId) : QStringLiteral("–")};
    for (int c = 0; c < ColCount; ++c) {
      auto* item = new QTableWidgetItem(cells[c]);
      if (best) {
        QFont f = item->font();
        f.setBold(true);
        item->setFont(f);
      }
      if (c == ColStatus && !p.point.message.empty()) item->setToolTip(QString::fromStdString(p.point.message));
      table_->setItem(i, c, item);
    }
    auto* bar = qobject_cast<QProgressBar*>(table_->cellWidget(i, ColProgress));
    if (!bar) {
      bar = new QProgressBar(table_);
      bar->setTextVisible(true);
      bar->setMaximumHeight(18);
      table_->setCellWidget(i, ColProgress, bar);
    }
    // A point that ended shows the steps it took (its run's), not the live "step / total" format.
    if (p.point.status == "finished" || p.point.status == "diverged" || p.point.status == "failed") {
      const int steps = static_cast<int>(p.steps.value_or(0));
      bar->setRange(0, std::max(1, steps));
      bar->setValue(std::max(1, steps));
      bar->setFormat(steps > 0 ? tr("%1 steps").arg(steps) : QString::fromStdString(p.point.status));
    } else if (p.point.status != "running") {
      bar->setRange(0, 1);
      bar->setValue(0);
      bar->setFormat(QString::fromStdString(p.point.status));
    }
  }
  fitTableWidth();
  charts_->show(r, static_cast<SweepMeasure>(measure_->currentData().toInt()));
  if (r.best) {
    const auto& b = r.points[*r.best];
    best_->setText(tr("★ Best point #%1: batch %2, learning rate %3 on %4 (%5 scaling) — %6.")
                       .arg(b.point.point + 1)
                       .arg(b.point.batchSize)
                       .arg(b.point.lr, 0, 'g', 4)
                       .arg(QString::fromStdString(b.point.devices), QString::fromStdString(b.point.lrScaling),
                            QString::fromStdString(r.bestReason)));
    best_->setVisible(true);
  } else {
    best_->setVisible(false);
  }
  if (!running_)
    status_->setText(tr("Sweep %1: %2, %3 of %4 points finished.")
                         .arg(r.sweep.id)
                         .arg(QString::fromStdString(r.sweep.status))
                         .arg(r.sweep.finishedPoints())
                         .arg(r.sweep.points.size()));
}

void SweepsView::pollProgress() {
  std::vector<ml::SweepPointProgress> prog;
  {
    std::lock_guard lock(mu_);
    if (!runner_) return;
    prog = runner_->progress();
  }
  int done = 0;
  for (int i = 0; i < static_cast<int>(prog.size()) && i < table_->rowCount(); ++i) {
    const auto& p = prog[static_cast<size_t>(i)];
    done += p.status == "finished" || p.status == "diverged" || p.status == "failed";
    if (p.status != "running") continue;
    if (auto* item = table_->item(i, ColStatus)) item->setText(QStringLiteral("running"));
    if (auto* bar = qobject_cast<QProgressBar*>(table_->cellWidget(i, ColProgress))) {
      bar->setRange(0, static_cast<int>(std::max<int64_t>(1, p.totalSteps)));
      bar->setValue(static_cast<int>(p.step));
      bar->setFormat(QStringLiteral("%v / %m steps"));
    }
  }
  status_->setText(tr("Sweep %1 running: %2 of %3 points done.").arg(shown_).arg(done).arg(prog.size()));
}

void SweepsView::openPoint(int point) {
  if (point < 0 || point >= static_cast<int>(results_.points.size())) return;
  const auto& p = results_.points[static_cast<size_t>(point)];
  if (p.point.runId) Q_EMIT runRequested(*p.point.runId);
}

bool SweepsView::exportCsv(const QString& path) {
  if (shown_ == 0) return false;
  try {
    ml::writeSweepCsv(results_, path.toStdString());
  } catch (const std::exception& e) {
    Q_EMIT errorOccurred(tr("The sweep could not be exported"), QString::fromStdString(e.what()));
    return false;
  }
  status_->setText(tr("Wrote %1 (one row per point).").arg(path));
  return true;
}

void SweepsView::updateButtons() {
  run_->setEnabled(!running_);
  cancel_->setEnabled(running_);
  fromProject_->setEnabled(!running_);
  resume_->setEnabled(!running_ && shown_ != 0 && results_.sweep.id == shown_ &&
                      results_.sweep.finishedPoints() < static_cast<int>(results_.sweep.points.size()));
  export_->setEnabled(shown_ != 0);
  sweepList_->setEnabled(!running_);
}

// Every column in view, at the width its contents take (the header's alone was narrower than a
// filled table, which then scrolled sideways); on a narrow window the heatmaps go below.
void SweepsView::fitTableWidth() {
  table_->resizeColumnsToContents();
  int columns = 2 * table_->frameWidth() + table_->verticalScrollBar()->sizeHint().width();
  for (int c = 0; c < ColCount; ++c)
    columns += std::max(table_->horizontalHeader()->sectionSize(c), table_->horizontalHeader()->sectionSizeHint(c));
  table_->setMinimumWidth(columns);
}

// Table beside the heatmaps on a wide window, above them on a narrow one (1024 px).
void SweepsView::resizeEvent(QResizeEvent* e) {
  QWidget::resizeEvent(e);
  const int side = table_->minimumWidth() + charts_->minimumSizeHint().width() + 40;
  split_->setOrientation(width() >= side ? Qt::Horizontal : Qt::Vertical);
}

}  // namespace mlui
