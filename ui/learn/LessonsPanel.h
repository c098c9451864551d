// Guided lessons: pick a lesson, read its idea, commit to an answer, run its experiments (real,
// stored runs, watched live: loss curves overlaid and the latest step's shards and replicas),
// then see the measured figures fill the reveal, and whether the prediction was right.
#pragma once
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <QTimer>
#include <QWidget>

#include "learn/Lesson.h"
#include "learn/LessonRunner.h"
#include "learn/StepDiagram.h"

class QButtonGroup;
class QCustomPlot;
class QLabel;
class QListWidget;
class QBoxLayout;
class QProgressBar;
class QScrollArea;
class QPushButton;
class QTableWidget;
class QVBoxLayout;

namespace mlui {

class LessonsPanel : public QWidget {
  Q_OBJECT
 public:
  LessonsPanel(std::function<QString()> storePath, QWidget* parent = nullptr);
  ~LessonsPanel() override;  // cancels a running lesson and joins its thread

  // Loads every lesson of dir (default: ml::defaultLessonsDir()); a bad file is shown, not thrown.
  bool loadLessons(const QString& dir = {});
  const std::vector<ml::Lesson>& lessons() const { return lessons_; }
  QString loadError() const { return loadError_; }
  void selectLesson(int index);
  int currentLesson() const { return current_; }
  void chooseAnswer(int choice);
  // Commits to the chosen answer and runs the experiments; false when no answer is chosen.
  bool commitAndRun();
  void stop();
  bool isRunning() const { return running_; }
  // Caps every experiment's steps (quick checks); 0: as the lesson says.
  void setMaxSteps(int64_t steps) { maxSteps_ = steps; }
  void setOtherRunActive(bool active);

  const std::optional<ml::LessonOutcome>& outcome() const { return outcome_; }
  QString revealText() const;
  QString verdictText() const;
  QCustomPlot* lossChart() const { return loss_; }
  StepDiagram* liveDiagram() const { return diagram_; }
  QTableWidget* figuresTable() const { return figures_; }

 Q_SIGNALS:
  void lessonFinished(bool completed);
  void runningChanged(bool running);
  void errorOccurred(const QString& title, const QString& message);

 protected:
  // Below ~950 px the chart and the step diagram stack instead of standing side by side, so the
  // lesson never needs a horizontal scroll bar (1024x700 windows included).
  void resizeEvent(QResizeEvent* e) override;

 private:
  QScrollArea* scroll_ = nullptr;
  QBoxLayout* liveRow_ = nullptr;
  void showLesson();
  void poll();
  void onDone(std::optional<ml::LessonOutcome> outcome, const QString& error);
  void updateButtons();

  std::function<QString()> storePath_;
  std::vector<ml::Lesson> lessons_;
  QString loadError_;
  int current_ = -1;
  int choice_ = -1;
  int64_t maxSteps_ = 0;
  bool running_ = false, otherActive_ = false;

  QListWidget* list_;
  QLabel* title_;
  QLabel* idea_;
  QLabel* setup_;
  QLabel* question_;
  QWidget* choicesBox_;
  QVBoxLayout* choicesLayout_;
  QButtonGroup* choices_;
  QPushButton* run_;
  QPushButton* stop_;
  QLabel* status_;
  QProgressBar* progress_;
  QCustomPlot* loss_;
  StepDiagram* diagram_;
  QLabel* verdict_;
  QLabel* reveal_;
  QTableWidget* figures_;

  std::unique_ptr<ml::LessonRunner> runner_;
  std::shared_ptr<ml::Channel> channel_;
  std::thread worker_;
  QTimer timer_;
  std::vector<ml::Event> batch_;
  int experimentIndex_ = -1;
  StepSceneInfo liveInfo_;                 // of the running experiment
  std::optional<ml::StepEvent> lastStep_;  // the newest step with timings, drawn when visible
  std::optional<ml::LessonOutcome> outcome_;
};

}  // namespace mlui
