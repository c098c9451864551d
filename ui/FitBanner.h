// The Model screen's live check that the model fits the data (input shape, last layer, loss), with
// the one-click, undoable "Fit to data". It re-checks whenever the project or the loaded data
// changes and tells the window why Train must wait.
#pragma once
#include <QFrame>
#include <memory>

#include "train/FitCheck.h"

class QLabel;
class QPushButton;

namespace mlui {

class DataCache;
class ProjectDocument;

class FitBanner : public QFrame {
  Q_OBJECT
 public:
  FitBanner(ProjectDocument* doc, QWidget* parent = nullptr);
  void setDataCache(std::shared_ptr<DataCache> cache);
  const ml::FitCheck& check() const { return check_; }
  // Empty when the model fits (or the data is not known yet).
  QString reason() const;
  QPushButton* fitButton() const { return fit_; }
  void fitToData();
  void recheck();

 Q_SIGNALS:
  void checked(const QString& reason);

 private:
  ProjectDocument* doc_;
  std::shared_ptr<DataCache> cache_;
  std::optional<ml::DataFacts> facts_;
  ml::FitCheck check_;
  QLabel* text_;
  QPushButton* fit_;
};

}  // namespace mlui
