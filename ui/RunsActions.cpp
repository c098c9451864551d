// The Runs screen's actions on the selected runs (RunsView.h): rename, tag, delete, export as CSV,
// TensorBoard or a trace, open the project. Each store request runs on a worker thread.
#include <QFileDialog>
#include <QInputDialog>
#include <QMessageBox>

#include "Async.h"
#include "JsonFile.h"
#include "RunTableModel.h"
#include "RunsView.h"
#include "export/TensorBoardExport.h"
#include "learn/TraceExport.h"
#include "store/RunStore.h"

namespace mlui {

static QString q(const std::string& s) { return QString::fromStdString(s); }

void RunsView::renameSelected() {
  const auto ids = selectedIds();
  if (ids.size() != 1) return;
  const auto* r = model_->run(model_->rowOf(ids.front()));
  bool ok = false;
  const QString name =
      QInputDialog::getText(this, tr("Rename run"), tr("New name:"), QLineEdit::Normal, r ? q(r->name) : QString(), &ok);
  if (!ok || name.trimmed().isEmpty()) return;
  const std::string path = storePath_().toStdString();
  runAsync<bool>(
      this,
      [path, id = ids.front(), n = name.trimmed().toStdString()] {
        ml::RunStore::open(path).renameRun(id, n);
        return true;
      },
      [this](const Outcome<bool>& r) {
        if (!r.value) Q_EMIT errorOccurred(tr("Cannot rename the run"), r.error);
        refresh();
      });
}

void RunsView::tagSelected() {
  const auto ids = selectedIds();
  if (ids.empty()) return;
  bool ok = false;
  const QString tag = QInputDialog::getText(this, tr("Tag runs"), tr("Tag for %n run(s):", "", static_cast<int>(ids.size())),
                                            QLineEdit::Normal, QString(), &ok);
  if (!ok || tag.trimmed().isEmpty()) return;
  const std::string path = storePath_().toStdString();
  runAsync<bool>(
      this,
      [path, ids, t = tag.trimmed().toStdString()] {
        auto store = ml::RunStore::open(path);
        for (int64_t id : ids) store.tagRun(id, t);
        return true;
      },
      [this](const Outcome<bool>& r) {
        if (!r.value) Q_EMIT errorOccurred(tr("Cannot tag the runs"), r.error);
        refresh();
      });
}

void RunsView::deleteSelected() {
  const auto ids = selectedIds();
  if (ids.empty()) return;
  if (QMessageBox::question(this, tr("Delete runs"),
                            tr("Delete %n run(s) and everything recorded with them? This cannot be undone.", "",
                               static_cast<int>(ids.size()))) != QMessageBox::Yes)
    return;
  const std::string path = storePath_().toStdString();
  runAsync<bool>(
      this,
      [path, ids] {
        auto store = ml::RunStore::open(path);
        for (int64_t id : ids) store.deleteRun(id);
        return true;
      },
      [this](const Outcome<bool>& r) {
        if (!r.value) Q_EMIT errorOccurred(tr("Cannot delete the runs"), r.error);
        refresh();
      });
}

void RunsView::exportSelected() {
  const auto ids = selectedIds();
  if (ids.empty()) return;
  const QString dir = QFileDialog::getExistingDirectory(this, tr("Export CSV into folder"));
  if (dir.isEmpty()) return;
  const std::string path = storePath_().toStdString();
  runAsync<bool>(
      this,
      [path, ids, d = dir.toStdString()] {
        auto store = ml::RunStore::open(path);
        for (int64_t id : ids) store.exportCsv(id, d + "/run-" + std::to_string(id));
        return true;
      },
      [this, dir](const Outcome<bool>& r) {
        if (!r.value)
          Q_EMIT errorOccurred(tr("Cannot export the runs"), r.error);
        else
          storeLabel_->setText(tr("Exported to %1 (one folder per run: steps, epochs, replica steps, device samples).").arg(dir));
      });
}

void RunsView::exportTensorBoard(const std::vector<int64_t>& ids, const QString& dir) {
  runAsync<size_t>(
      this,
      [p = storePath_().toStdString(), ids, d = dir.toStdString()] {
        auto store = ml::RunStore::open(p);
        return ml::exportTensorBoard(store, ids, d).size();
      },
      [this, dir](const Outcome<size_t>& r) {
        if (!r.value) {
          Q_EMIT errorOccurred(tr("Cannot export the runs for TensorBoard"), r.error);
          return;
        }
        storeLabel_->setText(
            tr("%n run(s) written to %1 for TensorBoard: tensorboard --logdir %1", nullptr, static_cast<int>(*r.value)).arg(dir));
        Q_EMIT tensorBoardExported(dir);
      });
}

void RunsView::exportTraceSelected() {
  const auto ids = selectedIds();
  if (ids.size() != 1) {
    Q_EMIT errorOccurred(tr("Export trace"), tr("Select one run: a trace file holds the timeline of one run."));
    return;
  }
  const QString path = QFileDialog::getSaveFileName(
      this, tr("Export the run's timeline"), QStringLiteral("run-%1.trace.json").arg(ids.front()), tr("Chrome trace (*.json)"));
  if (!path.isEmpty()) exportTrace(ids.front(), path);
}

void RunsView::exportTrace(int64_t runId, const QString& path) {
  runAsync<ml::TraceExportSummary>(
      this,
      [p = storePath_().toStdString(), runId, out = path.toStdString()] {
        auto store = ml::RunStore::open(p);
        return ml::exportRunTrace(store, runId, out);
      },
      [this, path](const Outcome<ml::TraceExportSummary>& r) {
        if (!r.value) {
          Q_EMIT errorOccurred(tr("Cannot export the trace"), r.error);
          return;
        }
        storeLabel_->setText(
            tr("Trace written to %1: %2 steps, %3 device tracks, %4 spans. Open it in ui.perfetto.dev or chrome://tracing.")
                .arg(path)
                .arg(r.value->steps)
                .arg(r.value->tracks)
                .arg(r.value->spans));
        Q_EMIT traceExported(path);
      });
}

void RunsView::openSelected() {
  const auto ids = selectedIds();
  if (ids.size() != 1) return;
  for (const auto& c : compared_)
    if (c.detail.summary.id == ids.front()) {
      try {
        const auto p = ml::Project::fromJson(
            ml::parseJsonText(c.detail.projectJson, "run #" + std::to_string(ids.front()), "the stored project is damaged"),
            "run #" + std::to_string(ids.front()));
        Q_EMIT openProjectRequested(p, q(c.detail.summary.name));
      } catch (const std::exception& e) {
        Q_EMIT errorOccurred(tr("Cannot open the run's project"), q(e.what()));
      }
    }
}

}  // namespace mlui
