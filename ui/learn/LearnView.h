// The Learn screen: guided lessons, the mirrored step replayed in slow motion, the one-click
// scaling experiment, expected against measured sync time with the what-if, and the equivalent
// TensorFlow and PyTorch programs. Only one run uses the cores at a time: a lesson, a scaling
// experiment and the dashboard's training exclude each other.
#pragma once
#include <functional>
#include <memory>

#include <QWidget>

#include "telemetry/Events.h"

class QTabWidget;

namespace mlui {

class CodePanel;
class DataCache;
class LessonsPanel;
class ProjectDocument;
class ScalingPanel;
class StepReplayPanel;
class SyncCostPanel;
class TrainingSession;

class LearnView : public QWidget {
  Q_OBJECT
 public:
  enum Tab { LessonsTab, StepTab, ScalingTab, SyncTab, CodeTab };
  LearnView(ProjectDocument* doc, TrainingSession* session, std::shared_ptr<DataCache> cache, std::function<QString()> storePath,
            QWidget* parent = nullptr);

  void showTab(Tab t);
  Tab currentTab() const;
  LessonsPanel* lessons() const { return lessons_; }
  StepReplayPanel* replay() const { return replay_; }
  ScalingPanel* scaling() const { return scaling_; }
  SyncCostPanel* syncCost() const { return sync_; }
  CodePanel* code() const { return code_; }
  // A lesson or a scaling experiment is running.
  bool isBusy() const;

 Q_SIGNALS:
  void busyChanged(bool busy);
  void errorOccurred(const QString& title, const QString& message);
  void runsChanged();  // new stored runs (lesson or scaling experiment finished)

 private:
  void onTabChanged(int index);
  void updateExclusion();

  ProjectDocument* doc_;
  TrainingSession* session_;
  QTabWidget* tabs_;
  LessonsPanel* lessons_;
  StepReplayPanel* replay_;
  ScalingPanel* scaling_;
  SyncCostPanel* sync_;
  CodePanel* code_;
  bool lessonsLoaded_ = false, replayListed_ = false, syncListed_ = false, replayVisited_ = false;
};

}  // namespace mlui
