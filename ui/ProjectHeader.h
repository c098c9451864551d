// The project's name and description, editable at the top of the Model screen. Each change is one
// undoable step; runs, scaling runs, exported programs and Save As take the name from here.
#pragma once
#include <QWidget>

class QLineEdit;

namespace mlui {

class ProjectDocument;

class ProjectHeader : public QWidget {
  Q_OBJECT
 public:
  explicit ProjectHeader(ProjectDocument* doc, QWidget* parent = nullptr);
  QLineEdit* nameEdit() const { return name_; }
  QLineEdit* descriptionEdit() const { return description_; }

 private:
  void refresh();
  void commit();
  ProjectDocument* doc_;
  QLineEdit *name_, *description_;
};

}  // namespace mlui
