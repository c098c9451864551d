// The Runs screen. Each store request opens its own connection on a worker thread (RunStore is
// one connection per thread) and hands a plain result back to the UI thread.
#include "RunsView.h"

#include <algorithm>

#include <QComboBox>
#include <QFileDialog>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QResizeEvent>
#include <QScrollBar>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QTableWidget>
#include <QToolBar>
#include <QVBoxLayout>

#include "Async.h"
#include "ExportModelDialog.h"
#include "RunTableModel.h"
#include "Theme.h"
#include "store/RunCompare.h"
#include "store/RunFigures.h"
#include "store/RunStore.h"
#include "train/Resume.h"

namespace mlui {

static QString q(const std::string& s) { return QString::fromStdString(s); }

namespace {

// Qt widens every section by the sort arrow's room; only the sorted column shows one. Thirteen
// columns then fit a 1024 px window instead of scrolling sideways.
class CompactHeader : public QHeaderView {
 public:
  explicit CompactHeader(QWidget* parent) : QHeaderView(Qt::Horizontal, parent) {
    setSectionsClickable(true);
    setHighlightSections(true);
    connect(this, &QHeaderView::sortIndicatorChanged, this, [this] { resizeSections(); });
  }

 protected:
  // Qt reserves the sort arrow's room (the section's height and a margin) in every section; only
  // the sorted one draws it. Less that room, but never less than the text in bold (an upper bound
  // of the stylesheet's semi-bold) and the stylesheet's padding (6 px a side) and border: taking the
  // room away whole cut "Val. metric" by 4 px.
  QSize sectionSizeFromContents(int logicalIndex) const override {
    QSize s = QHeaderView::sectionSizeFromContents(logicalIndex);
    if (!isSortIndicatorShown() || logicalIndex == sortIndicatorSection()) return s;
    QFont bold = font();
    bold.setBold(true);
    const QFontMetrics fm(bold);
    int text = 0;
    for (const QString& line : model()->headerData(logicalIndex, orientation()).toString().split(QLatin1Char('\n')))
      text = std::max(text, fm.horizontalAdvance(line));
    s.setWidth(std::max(s.width() - s.height() - style()->pixelMetric(QStyle::PM_HeaderMargin, nullptr, this), text + 16));
    return s;
  }
};

}  // namespace

RunsView::RunsView(std::function<QString()> storePath, QWidget* parent) : QWidget(parent), storePath_(std::move(storePath)) {
  auto* v = new QVBoxLayout(this);
  v->setContentsMargins(16, 12, 16, 12);
  v->setSpacing(8);
  v->addWidget(pageTitle(tr("Runs")));
  storeLabel_ = pageHint(QString(), this);
  v->addWidget(storeLabel_);

  // The filters on their own row, at full width: in the toolbar they shrank to "Filter …" in a
  // 1024 px window.
  auto* filters = new QHBoxLayout;
  filter_ = new QLineEdit(this);
  filter_->setPlaceholderText(tr("Filter by name, devices, tag…"));
  filter_->setAccessibleName(tr("Filter runs"));
  filter_->setClearButtonEnabled(true);
  filter_->setMinimumWidth(filter_->fontMetrics().horizontalAdvance(filter_->placeholderText()) + 40);
  filter_->setMaximumWidth(420);
  filters->addWidget(filter_, 1);
  statusFilter_ = new QComboBox(this);
  statusFilter_->addItems({tr("any status"), QStringLiteral("finished"), QStringLiteral("cancelled"), QStringLiteral("running"),
                           QStringLiteral("failed"), QStringLiteral("diverged"), QStringLiteral("interrupted")});
  statusFilter_->setAccessibleName(tr("Status filter"));
  filters->addWidget(statusFilter_);
  filters->addStretch(1);
  v->addLayout(filters);
  auto* bar = new QToolBar(this);
  bar->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  bar->setIconSize(QSize(16, 16));
  bar->addAction(icon(QStringLiteral("refresh")), tr("Refresh"), this, &RunsView::refresh);
  bar->addAction(icon(QStringLiteral("rename")), tr("Rename"), this, &RunsView::renameSelected);
  bar->addAction(icon(QStringLiteral("tag")), tr("Tag"), this, &RunsView::tagSelected);
  bar->addAction(icon(QStringLiteral("export")), tr("Export CSV"), this, &RunsView::exportSelected);
  bar->addAction(icon(QStringLiteral("export")), tr("Export TensorBoard"), this,
                 [this] {
                   const auto ids = selectedIds();
                   const QString dir =
                       ids.empty() ? QString() : QFileDialog::getExistingDirectory(this, tr("TensorBoard log folder"));
                   if (!dir.isEmpty()) exportTensorBoard(ids, dir);
                 })
      ->setToolTip(tr("Write the selected runs' curves, per-replica timings and configuration as TensorBoard logs "
                      "(a sub-folder per run; view with tensorboard --logdir FOLDER)"));
  bar->addAction(icon(QStringLiteral("export")), tr("Export trace"), this, &RunsView::exportTraceSelected)
      ->setToolTip(
          tr("Save the selected run's per-device timeline as a Chrome trace (open it in ui.perfetto.dev or chrome://tracing)"));
  bar->addAction(icon(QStringLiteral("export")), tr("Export model"), this,
                 [this] {
                   const auto ids = selectedIds();
                   const auto& runs = model_->runs();
                   const auto it = std::find_if(runs.begin(), runs.end(),
                                                [&](const ml::RunSummary& r) { return ids.size() == 1 && r.id == ids[0]; });
                   if (it == runs.end())
                     Q_EMIT errorOccurred(tr("Export model"), tr("Select one finished run: its trained weights are exported."));
                   else
                     openRunExportDialog(this, storePath_(), it->id, q(it->name));
                 })
      ->setToolTip(tr("Export the selected run's trained weights as an ONNX model, PyTorch weights or Keras weights"));
  bar->addAction(icon(QStringLiteral("open")), tr("Open project"), this, &RunsView::openSelected);
  resume_ = bar->addAction(icon(QStringLiteral("play")), tr("Resume"), this, [this] {
    const auto ids = selectedIds();
    if (ids.size() == 1) Q_EMIT resumeRequested(ids[0]);
  });
  resume_->setObjectName(QStringLiteral("ResumeRun"));
  resume_->setEnabled(false);
  resume_->setToolTip(
      tr("Continue the selected interrupted, failed or cancelled run from its newest checkpoint: the same run, "
         "its curves go on, and it ends with the weights an uninterrupted run would have"));
  QAction* del = bar->addAction(icon(QStringLiteral("remove")), tr("Delete"), this, &RunsView::deleteSelected);
  del->setShortcut(QKeySequence::Delete);
  del->setShortcutContext(Qt::WidgetWithChildrenShortcut);
  v->addWidget(bar);

  model_ = new RunTableModel(this);
  proxy_ = new QSortFilterProxyModel(this);
  proxy_->setSourceModel(model_);
  proxy_->setSortRole(Qt::UserRole);
  proxy_->setFilterCaseSensitivity(Qt::CaseInsensitive);
  proxy_->setFilterKeyColumn(-1);
  table_ = new QTableView(this);
  table_->setObjectName(QStringLiteral("RunsTable"));
  table_->setHorizontalHeader(new CompactHeader(table_));
  table_->setModel(proxy_);
  table_->setSortingEnabled(true);
  table_->sortByColumn(RunTableModel::Id, Qt::DescendingOrder);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  table_->setAlternatingRowColors(true);
  table_->setShowGrid(false);
  table_->setWordWrap(false);
  table_->verticalHeader()->hide();
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setSectionResizeMode(RunTableModel::Name, QHeaderView::Stretch);
  table_->setAccessibleName(tr("Stored runs"));
  connect(filter_, &QLineEdit::textChanged, this, [this](const QString& text) {
    // Runs the filter hides leave the comparison too: the chart, the baseline and the table show
    // what is selected and in view.
    const auto before = selectedIds();
    proxy_->setFilterFixedString(text);
    if (selectedIds() != before) onSelectionChanged();
  });
  connect(statusFilter_, &QComboBox::currentIndexChanged, this, [this] { refresh(); });
  connect(table_->selectionModel(), &QItemSelectionModel::selectionChanged, this, &RunsView::onSelectionChanged);

  // Comparison: overlay, config diff, scaling.
  auto* compare = new QWidget(this);
  auto* cv = new QVBoxLayout(compare);
  cv->setContentsMargins(0, 0, 0, 0);
  auto* axes = new QHBoxLayout;
  axes->addWidget(new QLabel(tr("Show"), compare));
  series_ = new QComboBox(compare);
  series_->addItems(
      {tr("training loss"), tr("validation loss"), tr("training accuracy / metric"), tr("validation accuracy / metric")});
  axes->addWidget(series_);
  axes->addWidget(new QLabel(tr("against"), compare));
  xAxis_ = new QComboBox(compare);
  xAxis_->addItems({tr("step"), tr("epoch"), tr("samples seen"), tr("wall time")});
  axes->addWidget(xAxis_);
  axes->addStretch(1);
  axes->addWidget(new QLabel(tr("Baseline"), compare));
  baseline_ = new QComboBox(compare);
  baseline_->setObjectName(QStringLiteral("Baseline"));
  baseline_->setMinimumContentsLength(16);
  axes->addWidget(baseline_);
  cv->addLayout(axes);
  overlay_ = new OverlayChart(compare);
  auto* tabs = new QTabWidget(compare);
  scaling_ = new QTableWidget(0, 7, tabs);
  scaling_->setObjectName(QStringLiteral("ScalingTable"));
  // Two-line headers keep the figure columns narrow enough for a 1024 px window.
  scaling_->setHorizontalHeaderLabels({tr("Run"), tr("Replicas"), tr("Samples\n/ s"), tr("ms /\nstep"), tr("Speed-\nup"),
                                       tr("Scaling\nefficiency"), tr("Studio\ndrawing")});
  scaling_->horizontalHeaderItem(6)->setToolTip(
      tr("What drawing the studio's charts cost while the run trained: frames drawn and milliseconds of drawing per "
         "second of training. \"headless\": nothing drew (the command line, a hidden dashboard), so the speed is clean."));
  diff_ = new QTableWidget(0, 1, tabs);
  diff_->setObjectName(QStringLiteral("DiffTable"));
  for (QTableWidget* t : {scaling_, diff_}) {
    t->verticalHeader()->hide();
    t->setEditTriggers(QAbstractItemView::NoEditTriggers);
    t->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    t->horizontalHeader()->setStretchLastSection(true);
    t->setAlternatingRowColors(true);
    t->setShowGrid(false);
  }
  // The run's name takes what is left (elided); the figures, Speed-up and efficiency included, stay in view.
  scaling_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
  scaling_->horizontalHeader()->setStretchLastSection(false);
  scaling_->horizontalHeader()->setMinimumSectionSize(24);
  scaling_->setTextElideMode(Qt::ElideMiddle);
  // What the columns mean, in view rather than in tooltips.
  auto* scalingBox = new QWidget(tabs);
  auto* sb = new QVBoxLayout(scalingBox);
  sb->setContentsMargins(0, 0, 0, 0);
  sb->addWidget(scaling_, 1);
  auto* legend = new QLabel(
      tr("Samples / s and ms / step come from the steps' own times (validation, checkpoints and pauses left out). "
         "Speed-up: samples / s against the baseline; scaling efficiency: speed-up ÷ the ratio of replicas. * marks a "
         "speed-up above what the cores allow (hover it for why). Studio drawing: what the studio's charts cost while the "
         "run trained (frames and ms of drawing per second); headless: nothing drew."),
      scalingBox);
  legend->setObjectName(QStringLiteral("ScalingLegend"));
  legend->setWordWrap(true);
  setRole(legend, "caption");
  sb->addWidget(legend);
  tabs->addTab(scalingBox, tr("Speed-up and scaling"));
  tabs->addTab(diff_, tr("Configuration differences"));
  auto* lower = new QSplitter(Qt::Horizontal, compare);
  lower->addWidget(overlay_);
  lower->addWidget(tabs);
  lower->setStretchFactor(0, 2);
  lower->setStretchFactor(1, 3);  // the tables need the room more than the chart
  lower->setChildrenCollapsible(false);
  cv->addWidget(lower, 1);
  connect(xAxis_, &QComboBox::currentIndexChanged, this, &RunsView::updateOverlayAxes);
  connect(series_, &QComboBox::currentIndexChanged, this, &RunsView::updateOverlayAxes);
  connect(baseline_, &QComboBox::currentIndexChanged, this, &RunsView::showComparison);

  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(table_);
  split->addWidget(compare);
  split->setStretchFactor(0, 2);
  split->setStretchFactor(1, 3);
  split->setChildrenCollapsible(false);
  v->addWidget(split, 1);
}

void RunsView::resizeEvent(QResizeEvent* e) {
  QWidget::resizeEvent(e);
  fitRunColumns();
}

// Thirteen columns do not fit a 1024 px window with a readable name: where they would not, the
// columns that repeat another go (Replicas: Devices says it; Created: the ID orders the runs), so
// that no header is cut and the name keeps 120 px.
void RunsView::fitRunColumns() {
  auto* h = table_->horizontalHeader();
  const int room = table_->viewport()->width() > 0 ? width() - 32 - 2 * table_->frameWidth() - 16 : 0;
  auto width = [&](int c) {  // as ResizeToContents sizes it (over the first rows: the same formats)
    int w = h->sectionSizeHint(c);
    for (int r = 0; r < std::min(proxy_->rowCount(), 200); ++r)
      w = std::max(w, table_->sizeHintForIndex(proxy_->index(r, c)).width());
    return w;
  };
  int need = 120;
  for (int c = 0; c < h->count(); ++c)
    if (c != RunTableModel::Name) need += width(c);
  const bool narrow = room > 0 && need > room;
  table_->setColumnHidden(RunTableModel::Created, narrow);
  table_->setColumnHidden(RunTableModel::Replicas, narrow && need - width(RunTableModel::Created) > room);
}

void RunsView::refresh() {
  const std::string path = storePath_().toStdString();
  storeLabel_->setText(tr("Every run started in the studio or the CLI is stored in %1. Select several runs to "
                          "compare them.")
                           .arg(q(path).toHtmlEscaped()));
  ml::RunFilter filter;
  if (statusFilter_->currentIndex() > 0) filter.status = statusFilter_->currentText().toStdString();
  ++busy_;
  const auto keep = selectedIds();
  runAsync<std::vector<ml::RunSummary>>(
      this, [path, filter] { return ml::RunStore::open(path).listRuns(filter); },
      [this, keep](const Outcome<std::vector<ml::RunSummary>>& r) {
        --busy_;
        if (!r.value) {
          Q_EMIT errorOccurred(tr("Cannot read the run store"), r.error);
          Q_EMIT refreshed();
          return;
        }
        model_->setRuns(*r.value);
        fitRunColumns();
        // Keep the selection; on first sight select the newest run so the chart is not empty.
        if (keep.empty() && !r.value->empty()) {
          int64_t newest = 0;
          for (const auto& run : *r.value) newest = std::max(newest, run.id);
          selectRuns({newest});
        } else {
          selectRuns(keep);
        }
        Q_EMIT refreshed();
      });
}

std::vector<int64_t> RunsView::selectedIds() const {
  std::vector<int64_t> ids;
  for (const QModelIndex& i : table_->selectionModel()->selectedRows())
    if (const auto* r = model_->run(proxy_->mapToSource(i).row())) ids.push_back(r->id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

void RunsView::selectRuns(const std::vector<int64_t>& ids) {
  QItemSelection sel;
  for (int64_t id : ids) {
    const int row = model_->rowOf(id);
    if (row < 0) continue;
    const QModelIndex i = proxy_->mapFromSource(model_->index(row, 0));
    sel.select(i, i.siblingAtColumn(RunTableModel::ColumnCount - 1));
  }
  table_->selectionModel()->select(sel, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
}

void RunsView::onSelectionChanged() {
  const auto ids = selectedIds();
  {
    const auto& runs = model_->runs();
    const auto it =
        std::find_if(runs.begin(), runs.end(), [&](const ml::RunSummary& r) { return ids.size() == 1 && r.id == ids[0]; });
    resume_->setEnabled(it != runs.end() && ml::canResume(storePath_().toStdString(), *it));
  }
  const int generation = ++compareGeneration_;
  if (ids.empty()) {  // nothing selected (a filter hid the selection): no chart or baseline left behind
    compared_.clear();
    {
      QSignalBlocker block(baseline_);
      baseline_->clear();
    }
    overlay_->setRuns(compared_);
    updateOverlayAxes();
    showComparison();
    return;
  }
  const std::string path = storePath_().toStdString();
  ++busy_;
  runAsync<std::vector<RunCurves>>(
      this,
      [path, ids] {
        auto store = ml::RunStore::open(path);
        std::vector<RunCurves> out;
        for (int64_t id : ids) out.push_back({store.loadRun(id), store.loadCurves(id)});
        return out;
      },
      [this, generation](const Outcome<std::vector<RunCurves>>& r) {
        --busy_;
        if (generation != compareGeneration_) return;  // the selection changed meanwhile
        if (!r.value) {
          Q_EMIT errorOccurred(tr("Cannot load the runs"), r.error);
          return;
        }
        compared_ = *r.value;
        {
          QSignalBlocker block(baseline_);
          baseline_->clear();
          for (const auto& c : compared_)
            baseline_->addItem(QStringLiteral("#%1 %2").arg(c.detail.summary.id).arg(q(c.detail.summary.name)));
        }
        overlay_->setRuns(compared_);
        updateOverlayAxes();
        showComparison();
        Q_EMIT comparisonLoaded();
      });
}

void RunsView::updateOverlayAxes() {
  overlay_->setAxes(static_cast<OverlayChart::XAxis>(xAxis_->currentIndex()),
                    static_cast<OverlayChart::Series>(series_->currentIndex()));
}

// The studio's drawing beside the speed it may have slowed: "headless", or frames, frame rate and
// ms of drawing per second of training.
static QString uiCostText(const ml::RunDetail& d) {
  if (!d.uiFrames || *d.uiFrames == 0) return RunsView::tr("headless");
  const double secs = d.seconds.value_or(0);
  if (secs <= 0) return RunsView::tr("%1 frames").arg(*d.uiFrames);
  return RunsView::tr("%1 fps\n%2 ms/s")
      .arg(static_cast<double>(*d.uiFrames) / secs, 0, 'f', 1)
      .arg(d.uiDrawMs.value_or(0) / secs, 0, 'f', 1);
}

// Several workers (processes under mpirun): "2 workers on a, b (2 replicas each)"; "" for one.
static QString workersText(const ml::RunDetail& d) {
  if (d.workers <= 1) return {};
  QStringList hosts;
  for (const auto& h : d.hosts) hosts << q(h);
  QString text = RunsView::tr("%1 workers").arg(d.workers);
  if (!hosts.isEmpty()) text += RunsView::tr(" on %1").arg(hosts.join(QStringLiteral(", ")));
  const int replicas = d.summary.replicas;
  if (replicas % d.workers == 0)
    text +=
        replicas == d.workers ? RunsView::tr(" (1 replica each)") : RunsView::tr(" (%1 replicas each)").arg(replicas / d.workers);
  return text;
}

// What the stored events say about a run's figures: its pauses (left out of every time) and the
// watchdog's straggler warnings, one line each; "" when there were none.
static QString eventsText(const ml::RunDetail& d) {
  QStringList lines;
  int pauses = 0;
  for (const auto& e : d.events) pauses += e.kind == "pause";
  if (pauses > 0)
    lines << RunsView::tr("Paused %n time(s), %1 s in all: left out of every time and speed shown.", nullptr, pauses)
                 .arg(d.pausedSeconds(), 0, 'f', 1);
  for (const auto& e : d.events)
    if (e.kind == "straggler") lines << RunsView::tr("Step %1: %2").arg(e.step).arg(q(e.message));
  return lines.join(QLatin1Char('\n'));
}

void RunsView::showComparison() {
  // Scaling against the baseline.
  scaling_->setRowCount(static_cast<int>(compared_.size()));
  const int base = std::clamp(baseline_->currentIndex(), 0, std::max(0, static_cast<int>(compared_.size()) - 1));
  ml::RunFigures baseFig;
  if (!compared_.empty())
    baseFig = ml::figuresOf(compared_[static_cast<size_t>(base)].detail, compared_[static_cast<size_t>(base)].steps);
  for (size_t i = 0; i < compared_.size(); ++i) {
    const auto& d = compared_[i].detail;
    const auto fig = ml::figuresOf(d, compared_[i].steps);
    const auto sc = ml::scalingVs(baseFig, fig);
    const bool isBase = static_cast<int>(i) == base;
    const QStringList cells = {
        QStringLiteral("#%1 %2%3%4%5")
            .arg(d.summary.id)
            .arg(q(d.summary.name), isBase ? tr(" (baseline)") : QString(),
                 d.workers > 1 ? QStringLiteral(" · ") + workersText(d) : QString(),
                 d.pausedSeconds() > 0 ? tr(" · paused %1 s").arg(d.pausedSeconds(), 0, 'f', 1) : QString()),
        QString::number(fig.replicas),
        fig.samplesPerSec() > 0 ? QString::number(fig.samplesPerSec(), 'f', 0) : QStringLiteral("—"),
        fig.steps > 0 ? QString::number(fig.secondsPerStep() * 1e3, 'g', 3) : QStringLiteral("—"),
        sc.speedup > 0
            ? QStringLiteral("%1×%2").arg(sc.speedup, 0, 'f', 2).arg(sc.note.empty() ? QString() : QStringLiteral(" *"))
            : QStringLiteral("—"),
        sc.efficiency > 0 ? QStringLiteral("%1%").arg(sc.efficiency * 100, 0, 'f', 0) : QStringLiteral("—"),
        uiCostText(d)};
    for (int c = 0; c < cells.size(); ++c) {
      auto* item = new QTableWidgetItem(cells[c]);
      if (c > 0) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      item->setForeground(c == 0 ? OverlayChart::runColor(static_cast<int>(i)) : QColor(0x1f, 0x2d, 0x3d));
      if (c == 0) item->setToolTip(eventsText(d));
      if (c == 1) item->setToolTip(workersText(d));
      if ((c == 4 || c == 5) && !sc.note.empty()) item->setToolTip(q(sc.note));
      scaling_->setItem(static_cast<int>(i), c, item);
    }
  }
  scaling_->resizeRowsToContents();  // the drawing cost takes two lines
  // Room for every figure column and a readable run name: the splitter gives the chart less
  // instead of the table scrolling Speed-up and efficiency out of sight.
  int figures = 0;
  for (int c = 1; c < scaling_->columnCount(); ++c) {
    int w = scaling_->horizontalHeader()->sectionSizeHint(c);
    for (int r = 0; r < scaling_->rowCount(); ++r)
      for (const QString& line : scaling_->item(r, c)->text().split(QLatin1Char('\n')))
        w = std::max(w, scaling_->fontMetrics().horizontalAdvance(line) + 16);
    figures += w;
  }
  scaling_->setMinimumWidth(figures + 90 + 2 * scaling_->frameWidth() + scaling_->verticalScrollBar()->sizeHint().width());
  // Configuration differences: only the keys that differ.
  std::vector<std::string> configs;
  for (const auto& c : compared_) configs.push_back(c.detail.configJson);
  const auto rows = compared_.size() >= 2 ? ml::configDiff(configs) : std::vector<ml::ConfigDiffRow>{};
  diff_->clear();
  diff_->setColumnCount(1 + static_cast<int>(compared_.size()));
  QStringList headers{tr("Setting")};
  for (const auto& c : compared_) headers << QStringLiteral("#%1").arg(c.detail.summary.id);
  diff_->setHorizontalHeaderLabels(headers);
  diff_->setRowCount(static_cast<int>(rows.size()));
  for (size_t r = 0; r < rows.size(); ++r) {
    diff_->setItem(static_cast<int>(r), 0, new QTableWidgetItem(q(rows[r].key)));
    for (size_t c = 0; c < rows[r].values.size(); ++c)
      diff_->setItem(static_cast<int>(r), static_cast<int>(c) + 1,
                     new QTableWidgetItem(rows[r].values[c] ? q(*rows[r].values[c]) : tr("(absent)")));
  }
}

}  // namespace mlui
