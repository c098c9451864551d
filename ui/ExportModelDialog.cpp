// The export dialog: format, weights and output file, the export itself on a worker thread, and
// the exported file recorded with the run it came from.
#include "ExportModelDialog.h"

#include <filesystem>

#include <QComboBox>
#include <QDialogButtonBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QVBoxLayout>

#include "Async.h"
#include "Error.h"
#include "Theme.h"
#include "export/ExportJob.h"
#include "store/RunStore.h"

namespace mlui {

namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

const ml::ExportFormat kFormats[] = {ml::ExportFormat::Onnx, ml::ExportFormat::Torch, ml::ExportFormat::Keras,
                                     ml::ExportFormat::KerasWeights};

QString formatLabel(ml::ExportFormat f) {
  switch (f) {
    case ml::ExportFormat::Onnx: return QObject::tr("ONNX model (.onnx)");
    case ml::ExportFormat::Torch: return QObject::tr("PyTorch weights (.npz)");
    case ml::ExportFormat::Keras: return QObject::tr("Keras 3 model (.keras)");
    case ml::ExportFormat::KerasWeights: return QObject::tr("Keras 3 weights (.weights.h5)");
  }
  return {};
}

QString formatHint(ml::ExportFormat f) {
  switch (f) {
    case ml::ExportFormat::Onnx:
      return QObject::tr(
                 "The inference graph (opset %1, Dropout left out, any batch size) with the project, run and "
                 "Mirrorlab version in its metadata: ONNX Runtime, TensorRT, OpenVINO and others run it.")
          .arg(13);
    case ml::ExportFormat::Torch:
      return QObject::tr(
          "The model's state_dict as a NumPy .npz: the generated PyTorch program (Learn › Equivalent code) "
          "starts from it with --weights FILE.");
    case ml::ExportFormat::Keras:
      return QObject::tr(
          "The whole model (layers, weights, loss and optimizer) as Keras 3 saves it: "
          "keras.saving.load_model(FILE) opens it, ready to predict, evaluate or train on.");
    case ml::ExportFormat::KerasWeights:
      return QObject::tr(
          "Weights in Keras 3's layout for a Sequential model: the generated TensorFlow program loads them "
          "with model.load_weights(FILE).");
  }
  return {};
}

// "Fashion-MNIST MLP" -> "fashion-mnist-mlp"
QString fileStem(const QString& name) {
  QString s;
  for (QChar c : name.toLower()) s += c.isLetterOrNumber() ? c : QChar('-');
  while (s.contains(QStringLiteral("--"))) s.replace(QStringLiteral("--"), QStringLiteral("-"));
  s = s.section(QChar('-'), 0, -1, QString::SectionSkipEmpty);
  return s.isEmpty() ? QStringLiteral("model") : s;
}

}  // namespace

ExportModelDialog::ExportModelDialog(const QString& storePath, int64_t runId, const QString& runName, QWidget* parent)
    : QDialog(parent), runId_(runId), storePath_(storePath), baseName_(QStringLiteral("run-%1").arg(runId)) {
  build(tr("Run #%1 “%2”: the weights it kept at its end, and its own project").arg(runId).arg(runName), false);
}

ExportModelDialog::ExportModelDialog(const ml::Project& project, const QString& storePath, const QString& weights,
                                     QWidget* parent)
    : QDialog(parent), project_(project), storePath_(storePath), baseName_(fileStem(q(project.name))) {
  build(tr("The model of “%1” with trained weights from a file").arg(q(project.name)), true);
  setWeightsPath(weights);
}

void ExportModelDialog::build(const QString& source, bool pickWeights) {
  setWindowTitle(tr("Export model"));
  setObjectName(QStringLiteral("ExportModelDialog"));
  auto* v = new QVBoxLayout(this);
  auto* what = new QLabel(source, this);
  what->setWordWrap(true);
  v->addWidget(what);
  auto* form = new QFormLayout;
  if (pickWeights) {
    auto* row = new QHBoxLayout;
    weights_ = new QLineEdit(this);
    weights_->setPlaceholderText(tr("a .mlw file saved by a run (train --save-weights)"));
    auto* browse = new QPushButton(tr("Browse…"), this);
    connect(browse, &QPushButton::clicked, this, &ExportModelDialog::browseWeights);
    row->addWidget(weights_, 1);
    row->addWidget(browse);
    form->addRow(tr("Weights"), row);
  }
  format_ = new QComboBox(this);
  for (ml::ExportFormat f : kFormats) {
    format_->addItem(formatLabel(f), static_cast<int>(f));
    if (!ml::formatBuilt(f)) format_->setItemData(format_->count() - 1, tr("Not in this build"), Qt::ToolTipRole);
  }
  form->addRow(tr("Format"), format_);
  formatHint_ = new QLabel(this);
  formatHint_->setWordWrap(true);
  setRole(formatHint_, "hint");
  auto* row = new QHBoxLayout;
  output_ = new QLineEdit(this);
  auto* browse = new QPushButton(tr("Browse…"), this);
  connect(browse, &QPushButton::clicked, this, &ExportModelDialog::browseOutput);
  row->addWidget(output_, 1);
  row->addWidget(browse);
  form->addRow(tr("Save as"), row);
  v->addLayout(form);
  v->addWidget(formatHint_);
  status_ = new QLabel(this);
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  v->addWidget(status_);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
  exportButton_ = buttons->addButton(tr("Export"), QDialogButtonBox::AcceptRole);
  connect(exportButton_, &QPushButton::clicked, this, &ExportModelDialog::startExport);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  v->addWidget(buttons);
  output_->setText(QDir(QDir::homePath()).filePath(baseName_ + QString::fromLatin1(ml::defaultSuffix(ml::ExportFormat::Onnx))));
  connect(format_, &QComboBox::currentIndexChanged, this, &ExportModelDialog::onFormatChanged);
  onFormatChanged();
  setMinimumWidth(640);
  adjustSize();
}

void ExportModelDialog::setFormat(ml::ExportFormat f) { format_->setCurrentIndex(format_->findData(static_cast<int>(f))); }
ml::ExportFormat ExportModelDialog::format() const { return static_cast<ml::ExportFormat>(format_->currentData().toInt()); }
void ExportModelDialog::setOutputPath(const QString& path) { output_->setText(path); }
QString ExportModelDialog::outputPath() const { return output_->text().trimmed(); }
void ExportModelDialog::setWeightsPath(const QString& path) {
  if (weights_) weights_->setText(path);
}
QString ExportModelDialog::statusText() const { return status_->text(); }

// The output file follows the format: its ending changes with it.
void ExportModelDialog::onFormatChanged() {
  formatHint_->setText(formatHint(format()));
  QString out = outputPath();
  for (ml::ExportFormat f : kFormats) {
    const QString suffix = QString::fromLatin1(ml::defaultSuffix(f));
    if (out.endsWith(suffix)) {
      out.chop(suffix.size());
      output_->setText(out + QString::fromLatin1(ml::defaultSuffix(format())));
      break;
    }
  }
  showStatus(QString(), false);
}

void ExportModelDialog::browseOutput() {
  const QString suffix = QString::fromLatin1(ml::defaultSuffix(format()));
  const QString path = QFileDialog::getSaveFileName(this, tr("Export the model as"), outputPath(),
                                                    formatLabel(format()).replace(QStringLiteral("("), QStringLiteral("(*")));
  if (path.isEmpty()) return;
  output_->setText(path.endsWith(suffix) ? path : path + suffix);
}

void ExportModelDialog::browseWeights() {
  const QString path =
      QFileDialog::getOpenFileName(this, tr("Trained weights"), weights_->text(), tr("Mirrorlab weights (*.mlw)"));
  if (!path.isEmpty()) weights_->setText(path);
}

void ExportModelDialog::showStatus(const QString& text, bool error) {
  status_->setText(text);
  status_->setStyleSheet(error ? QStringLiteral("color: #b3261e;") : QString());
  adjustSize();  // room for a long message: never a clipped reason
}

void ExportModelDialog::startExport() {
  if (busy_) return;
  const ml::ExportFormat f = format();
  const std::string out = outputPath().toStdString();
  try {
    ml::checkExportPath(f, out);  // refused before anything is read
    if (weights_ && weights_->text().trimmed().isEmpty())
      throw ml::UserError("choose the trained weights (.mlw) to export: a finished run keeps them (Runs › Export model)");
  } catch (const std::exception& e) {
    showStatus(q(e.what()), true);
    Q_EMIT exportFailed(q(e.what()));
    return;
  }
  busy_ = true;
  exportButton_->setEnabled(false);
  showStatus(tr("Exporting…"), false);
  const std::string store = storePath_.toStdString();
  const std::string weights = weights_ ? weights_->text().trimmed().toStdString() : std::string();
  runAsync<ml::ExportResult>(
      this,
      [store, weights, f, out, project = project_, run = runId_] {
        ml::ExportRequest r;
        r.format = f;
        r.output = out;
        std::optional<ml::RunStore> s;
        std::error_code ec;
        if (!store.empty() && std::filesystem::exists(store, ec)) s.emplace(ml::RunStore::open(store));
        if (run) {
          if (!s) throw ml::UserError("the run store '" + store + "' is not there any more");
          ml::StoredWeights w = ml::storedWeights(*s, *run);
          r.project = std::move(w.project);
          r.weights = w.weights;
          r.runId = run;
        } else {
          r.project = *project;
          r.weights = weights;
          if (s) r.runId = ml::runOfWeights(*s, weights);
        }
        ml::ExportResult res = ml::runExport(r);
        if (s && r.runId) ml::recordExport(*s, *r.runId, res, f);
        return res;
      },
      [this](const Outcome<ml::ExportResult>& r) {
        busy_ = false;
        exportButton_->setEnabled(true);
        if (!r.value) {
          showStatus(r.error, true);
          Q_EMIT exportFailed(r.error);
          return;
        }
        showStatus(tr("Exported to %1 (%2 bytes): %3.").arg(q(r.value->path)).arg(r.value->bytes).arg(q(r.value->description)),
                   false);
        Q_EMIT exported(q(r.value->path), q(r.value->description));
      });
}

ExportModelDialog* openRunExportDialog(QWidget* parent, const QString& storePath, int64_t runId, const QString& runName) {
  auto* d = new ExportModelDialog(storePath, runId, runName, parent);
  d->setAttribute(Qt::WA_DeleteOnClose);
  d->show();
  return d;
}

ExportModelDialog* openProjectExportDialog(QWidget* parent, const ml::Project& project, const QString& storePath,
                                           std::optional<int64_t> lastRun) {
  QString weights;
  if (lastRun) {
    const QString kept = q(ml::keptWeightsPath(storePath.toStdString(), *lastRun));
    if (QFileInfo::exists(kept)) weights = kept;
  }
  auto* d = new ExportModelDialog(project, storePath, weights, parent);
  d->setAttribute(Qt::WA_DeleteOnClose);
  d->show();
  return d;
}

}  // namespace mlui
