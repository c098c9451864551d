// Generated TensorFlow and PyTorch programs for the current project.
#include "learn/CodePanel.h"

#include <QApplication>
#include <QClipboard>
#include <QFileDialog>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSaveFile>
#include <QTabWidget>
#include <QVBoxLayout>

#include "Theme.h"
#include "learn/CodeGen.h"

namespace mlui {

CodePanel::CodePanel(QWidget* parent) : QWidget(parent) {
  auto* v = new QVBoxLayout(this);
  v->setContentsMargins(14, 10, 14, 10);
  v->setSpacing(8);
  v->addWidget(pageHint(tr("The same model, data, batch and learning-rate rule as a program for the frameworks you will "
                           "use: TensorFlow builds and compiles the model inside strategy.scope() and scales batch and "
                           "learning rate with num_replicas_in_sync; PyTorch wraps the model in DistributedDataParallel, "
                           "one process per device. Both run as they are (python3 FILE)."),
                        this));
  auto* row = new QHBoxLayout;
  note_ = new QLabel(this);
  note_->setWordWrap(true);
  setRole(note_, "caption");
  row->addWidget(note_, 1);
  auto* copy = new QPushButton(icon(QStringLiteral("copy")), tr("Copy"), this);
  copy->setToolTip(tr("Copy the program shown to the clipboard"));
  copy->setObjectName(QStringLiteral("CopyCode"));
  auto* save = new QPushButton(icon(QStringLiteral("save")), tr("Save as…"), this);
  row->addWidget(copy);
  row->addWidget(save);
  v->addLayout(row);
  tabs_ = new QTabWidget(this);
  const QFont mono = QFontDatabase::systemFont(QFontDatabase::FixedFont);
  for (QPlainTextEdit** e : {&tf_, &torch_}) {
    *e = new QPlainTextEdit(tabs_);
    (*e)->setReadOnly(true);
    (*e)->setFont(mono);
    (*e)->setLineWrapMode(QPlainTextEdit::WidgetWidth);  // long lines wrap: no sideways scrolling at 1024 px
  }
  tabs_->addTab(tf_, tr("TensorFlow / Keras (MirroredStrategy)"));
  tabs_->addTab(torch_, tr("PyTorch (DistributedDataParallel)"));
  v->addWidget(tabs_, 1);
  connect(copy, &QPushButton::clicked, this, &CodePanel::copyCurrent);
  connect(save, &QPushButton::clicked, this, &CodePanel::saveCurrent);
}

void CodePanel::setProject(const ml::Project& project) {
  project_ = project;
  error_.clear();
  try {
    tf_->setPlainText(QString::fromStdString(ml::generateTensorFlowProgram(project)));
    torch_->setPlainText(QString::fromStdString(ml::generatePyTorchProgram(project)));
    note_->setText(
        tr("Generated from the project \u201c%1\u201d on %2; it changes as you edit the model or the training settings.")
            .arg(QString::fromStdString(project.name), QString::fromStdString(project.distribute.devices.spec)));
  } catch (const std::exception& e) {
    error_ = QString::fromStdString(e.what());
    const QString text = tr("# The model does not build, so there is no program to show:\n# %1\n").arg(error_);
    tf_->setPlainText(text);
    torch_->setPlainText(text);
    note_->setText(tr("Fix the model on the Model screen first."));
  }
}

QString CodePanel::tensorFlowCode() const { return tf_->toPlainText(); }
QString CodePanel::pyTorchCode() const { return torch_->toPlainText(); }
void CodePanel::showFramework(int index) { tabs_->setCurrentIndex(index); }

void CodePanel::copyCurrent() {
  const bool torch = tabs_->currentIndex() == 1;
  QApplication::clipboard()->setText(torch ? pyTorchCode() : tensorFlowCode());
  note_->setText(torch ? tr("The PyTorch program is on the clipboard.") : tr("The TensorFlow program is on the clipboard."));
  Q_EMIT copied(torch ? QStringLiteral("torch") : QStringLiteral("tf"));
}

void CodePanel::saveCurrent() {
  const ml::Framework f = tabs_->currentIndex() == 1 ? ml::Framework::PyTorch : ml::Framework::TensorFlow;
  const QString suggested = QString::fromStdString(ml::suggestedFileName(project_, f));
  const QString path = QFileDialog::getSaveFileName(this, tr("Save the program"), suggested, tr("Python (*.py)"));
  if (path.isEmpty()) return;
  QSaveFile out(path);
  const QByteArray bytes = (f == ml::Framework::PyTorch ? pyTorchCode() : tensorFlowCode()).toUtf8();
  if (!out.open(QIODevice::WriteOnly) || out.write(bytes) != bytes.size() || !out.commit()) {
    Q_EMIT errorOccurred(tr("Cannot save the program"),
                         tr("%1 cannot be written: %2. Choose another folder.").arg(path, out.errorString()));
    return;
  }
  note_->setText(tr("Saved to %1.").arg(path));
}

}  // namespace mlui
