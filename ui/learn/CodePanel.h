// The current project as the equivalent TensorFlow/Keras program (tf.distribute.MirroredStrategy)
// and PyTorch program (DistributedDataParallel), regenerated on every edit, with Copy and Save.
#pragma once
#include <QWidget>

#include "project/Project.h"

class QLabel;
class QPlainTextEdit;
class QTabWidget;

namespace mlui {

class CodePanel : public QWidget {
  Q_OBJECT
 public:
  explicit CodePanel(QWidget* parent = nullptr);

  // Regenerates both programs; a model that does not build shows the reason instead.
  void setProject(const ml::Project& project);
  QString tensorFlowCode() const;
  QString pyTorchCode() const;
  QString error() const { return error_; }
  // Copies the visible program to the clipboard.
  void copyCurrent();
  void showFramework(int index);  // 0: TensorFlow, 1: PyTorch

 Q_SIGNALS:
  void copied(const QString& what);
  void errorOccurred(const QString& title, const QString& message);

 private:
  void saveCurrent();

  ml::Project project_;
  QTabWidget* tabs_;
  QPlainTextEdit* tf_;
  QPlainTextEdit* torch_;
  QLabel* note_;
  QString error_;
};

}  // namespace mlui
