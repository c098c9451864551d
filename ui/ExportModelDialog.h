// The studio's "Export model" dialog: a trained model as an ONNX model, PyTorch weights (.npz) or
// Keras 3 weights (.weights.h5). Opened from the Runs screen for a stored run (its own project and
// the weights it kept) or from File > Export model for the open project and a weights file. The
// output path is checked before anything is read; the export runs off the UI thread.
#pragma once
#include <cstdint>
#include <optional>

#include <QDialog>

#include "export/ModelExport.h"
#include "project/Project.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;

namespace mlui {

class ExportModelDialog : public QDialog {
  Q_OBJECT
 public:
  // A stored run: its project and the weights it kept come from the store.
  ExportModelDialog(const QString& storePath, int64_t runId, const QString& runName, QWidget* parent = nullptr);
  // The open project with a weights file (.mlw); `weights` may be empty (the user picks one).
  ExportModelDialog(const ml::Project& project, const QString& storePath, const QString& weights, QWidget* parent = nullptr);

  void setFormat(ml::ExportFormat f);
  ml::ExportFormat format() const;
  void setOutputPath(const QString& path);
  QString outputPath() const;
  void setWeightsPath(const QString& path);
  // Checks the output path at once (a refusal is shown and emitted), then exports off the UI thread.
  void startExport();
  bool isBusy() const { return busy_; }
  QString statusText() const;  // what the dialog says now: the result or the reason it failed

 Q_SIGNALS:
  void exported(const QString& path, const QString& description);
  void exportFailed(const QString& message);

 private:
  void build(const QString& source, bool pickWeights);
  void onFormatChanged();
  void browseOutput();
  void browseWeights();
  void showStatus(const QString& text, bool error);

  std::optional<ml::Project> project_;  // project mode
  std::optional<int64_t> runId_;        // run mode
  QString storePath_;
  QString baseName_;
  QComboBox* format_ = nullptr;
  QLabel* formatHint_ = nullptr;
  QLineEdit* weights_ = nullptr;
  QLineEdit* output_ = nullptr;
  QLabel* status_ = nullptr;
  QPushButton* exportButton_ = nullptr;
  bool busy_ = false;
};

// Opens the dialog for a stored run (non-modal, deleted when closed); returns it for tests.
ExportModelDialog* openRunExportDialog(QWidget* parent, const QString& storePath, int64_t runId, const QString& runName);
// Opens it for the open project, with the weights the session's last run kept when there are some.
ExportModelDialog* openProjectExportDialog(QWidget* parent, const ml::Project& project, const QString& storePath,
                                           std::optional<int64_t> lastRun);

}  // namespace mlui
