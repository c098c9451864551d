// The first-run welcome page: what mirrored training is in one line, and three ways in — open an
// example, start the first lesson, or import a CSV file. Shown when the studio has no settings yet
// (and from Help > Welcome). A damaged shipped example is listed with its path and the error.
#pragma once
#include <QWidget>

class QLabel;
class QVBoxLayout;

namespace mlui {

class WelcomePage : public QWidget {
  Q_OBJECT
 public:
  explicit WelcomePage(QWidget* parent = nullptr);
  // Re-reads the shipped examples and lessons (they may have changed since the page was built).
  void refresh();
  // The problems found while listing (a damaged example or lesson), one per line; empty when none.
  QString problems() const { return problems_; }

 Q_SIGNALS:
  void openExampleRequested(const QString& path);
  void firstLessonRequested();
  void importCsvRequested();

 private:
  QVBoxLayout* examples_;
  QLabel* lessonTitle_;
  QLabel* problemsLabel_;
  QString problems_;
};

}  // namespace mlui
