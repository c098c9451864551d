// The Runs screen: the stored runs in a sortable, filterable table; select several to overlay
// their curves, diff their configurations (only what differs) and read speed-up and scaling
// efficiency against a chosen baseline; rename, tag, delete, export CSV, open the project again.
// Every store access runs off the UI thread.
#pragma once
#include <functional>
#include <vector>

#include <QWidget>

#include "charts/OverlayChart.h"
#include "project/Project.h"

class QAction;
class QComboBox;
class QLabel;
class QLineEdit;
class QSortFilterProxyModel;
class QTableView;
class QTableWidget;

namespace mlui {

class RunTableModel;

class RunsView : public QWidget {
  Q_OBJECT
 public:
  RunsView(std::function<QString()> storePath, QWidget* parent = nullptr);

  void refresh();  // reloads the list (async)
  bool isBusy() const { return busy_ > 0; }
  RunTableModel* model() const { return model_; }
  QTableView* table() const { return table_; }
  QAction* resumeAction() const { return resume_; }
  OverlayChart* overlay() const { return overlay_; }
  QTableWidget* diffTable() const { return diff_; }
  QTableWidget* scalingTable() const { return scaling_; }
  void selectRuns(const std::vector<int64_t>& ids);
  std::vector<int64_t> selectedIds() const;
  // Writes a run's per-device timeline as a Chrome trace (async); emits traceExported or errorOccurred.
  void exportTrace(int64_t runId, const QString& path);
  // Writes the runs as TensorBoard logs, a sub-folder per run (async); emits tensorBoardExported or errorOccurred.
  void exportTensorBoard(const std::vector<int64_t>& ids, const QString& dir);

 Q_SIGNALS:
  void refreshed();
  void comparisonLoaded();
  void traceExported(const QString& path);
  void tensorBoardExported(const QString& dir);
  void openProjectRequested(const ml::Project& project, const QString& runName);
  // Resume: continue an interrupted, failed or cancelled run from its newest checkpoint.
  void resumeRequested(int64_t runId);
  void errorOccurred(const QString& title, const QString& message);

 protected:
  void resizeEvent(QResizeEvent* e) override;

 private:
  void fitRunColumns();
  void onSelectionChanged();
  void showComparison();
  void renameSelected();
  void tagSelected();
  void deleteSelected();
  void exportSelected();
  void exportTraceSelected();
  void openSelected();
  void updateOverlayAxes();

  std::function<QString()> storePath_;
  RunTableModel* model_;
  QSortFilterProxyModel* proxy_;
  QTableView* table_;
  QLineEdit* filter_;
  QComboBox* statusFilter_;
  QComboBox* xAxis_;
  QComboBox* series_;
  QComboBox* baseline_;
  OverlayChart* overlay_;
  QTableWidget* diff_;
  QTableWidget* scaling_;
  QLabel* storeLabel_;
  QAction* resume_ = nullptr;
  std::vector<RunCurves> compared_;
  int busy_ = 0;
  int compareGeneration_ = 0;
};

}  // namespace mlui
