// "The mirrored step": replays the steps of the latest run in this studio or of any stored run
// in slow motion on a StepDiagram, step by step (Single step) or continuously (Play). The store
// is read off the UI thread.
#pragma once
#include <functional>
#include <vector>

#include <QElapsedTimer>
#include <QTimer>
#include <QWidget>

#include "learn/StepDiagram.h"

class QComboBox;
class QLabel;
class QPushButton;
class QSlider;
class QSpinBox;

namespace mlui {

class StepReplayPanel : public QWidget {
  Q_OBJECT
 public:
  StepReplayPanel(std::function<QString()> storePath, QWidget* parent = nullptr);

  StepDiagram* diagram() const { return diagram_; }
  // Reloads the stored runs for the source list (async).
  void refreshRuns();
  // Replays a stored run (async); emits stepsLoaded when its steps are in.
  void loadRun(int64_t runId);
  // The steps to replay (with per-replica timings) and what the diagram needs to know.
  void setSteps(std::vector<ml::StepEvent> steps, const StepSceneInfo& info, const QString& source);
  const std::vector<ml::StepEvent>& steps() const { return steps_; }
  int currentIndex() const { return index_; }
  void showStep(int index);
  // Live: the latest training run of the studio (its steps as they arrive).
  void onLiveRunStarted(const ml::RunStarted& started);
  void onLiveEvents(const std::vector<ml::Event>& events);

  // Starts playing by itself the next time steps are loaded (the first visit of the tab).
  void setAutoPlay(bool on) { autoPlay_ = on; }
  void play();  // continuously, step after step
  void pause();
  void singleStep();  // plays the current step once, then stops on the next
  bool isPlaying() const { return timer_.isActive(); }
  // Animation seconds one step takes to replay (the slow-motion setting).
  double secondsPerStep() const;
  // Advances the animation by `seconds` of animation time (the timer calls it; tests too).
  void advance(double seconds);

 Q_SIGNALS:
  void runsListed();
  void stepsLoaded();
  void errorOccurred(const QString& title, const QString& message);

 private:
  void onSourceChanged();
  void tick();
  void updateLabels();
  // Shows the live steps that arrived since the last time (the newest one when idle). Events only
  // accumulate while the panel is hidden; it follows at most 4 times a second while it is shown.
  void followLive();
  void showEvent(QShowEvent* e) override;

  std::function<QString()> storePath_;
  StepDiagram* diagram_;
  QComboBox* source_;
  QSpinBox* stepBox_;
  QPushButton* play_;
  QPushButton* single_;
  QSlider* speed_;
  QLabel* speedLabel_;
  QLabel* info_;
  QTimer timer_;
  QElapsedTimer clock_;
  std::vector<ml::StepEvent> steps_;
  std::vector<ml::StepEvent> live_;
  StepSceneInfo liveInfo_;
  QString liveEnded_;       // the live run's final status once it ended
  size_t pendingLive_ = 0;  // live steps not yet shown
  QElapsedTimer sinceFollow_;
  QTimer followLater_;
  void describeLive();
  StepSceneInfo storedInfo_;
  int index_ = -1;
  bool stopAtEnd_ = false;
  bool showingLive_ = true;
  bool autoPlay_ = false;
  int loadGeneration_ = 0;
};

}  // namespace mlui
