// One mirrored step as a diagram, drawn to the measured durations: the global batch cut into
// shards (one per replica), a lane per replica with its forward, backward, wait, all-reduce and
// optimizer spans (widths proportional to the measured times, on one time axis), and the
// communication pattern — gradient chunks travelling around the ring (reduce-scatter, then
// all-gather) or into replica 0 and back out (reduce-to-one) — while the playhead is in the
// all-reduce. setProgress() moves the playhead; the panel around it animates it in slow motion.
#pragma once
#include <QString>
#include <QWidget>

#include <vector>

#include "Theme.h"
#include "telemetry/Events.h"

namespace mlui {

struct StepSceneInfo {
  QString algo = QStringLiteral("ring");  // ring | reduce-to-one | none
  int buckets = 1;
  int64_t gradientBytes = 0;
  QStringList deviceNames;        // "cpu:0", ... (optional)
  bool shardedOptimizer = false;  // ZeRO stage 1: update 1/N, then all-gather
};

// From a run's effective configuration (RunStarted::configJson): algorithm, buckets, gradient
// size and device names; anything missing keeps its default.
StepSceneInfo sceneInfoFromConfig(const std::string& configJson);

class StepDiagram : public QWidget {
  Q_OBJECT
 public:
  // Input first: each replica brings its shard to the device before the forward pass (runs stored
  // before the input was its own phase have none, and draw none).
  static constexpr int kPhases = 7;
  static constexpr Phase kOrder[kPhases] = {Phase::Input,     Phase::Forward,   Phase::Backward, Phase::Wait,
                                            Phase::AllReduce, Phase::Optimizer, Phase::AllGather};

  explicit StepDiagram(QWidget* parent = nullptr);

  // A step with per-replica timings; a step without them shows an empty diagram with a note.
  void setStep(const ml::StepEvent& step, const StepSceneInfo& info);
  void clear();
  // The text shown while there is no step.
  void setPlaceholder(const QString& text) {
    placeholder_ = text;
    update();
  }
  bool hasStep() const { return !step_.replicas.empty(); }
  const ml::StepEvent& step() const { return step_; }
  const StepSceneInfo& info() const { return info_; }

  // Measured seconds from the earliest replica start to the latest replica end.
  double duration() const { return duration_; }
  // The playhead, in measured seconds into the step (clamped to [0, duration]).
  void setProgress(double seconds);
  double progress() const { return t_; }

  int replicaCount() const { return static_cast<int>(step_.replicas.size()); }
  double phaseSeconds(int replica, Phase phase) const;
  // Where a span is drawn (widget coordinates); empty when the replica does not exist.
  QRectF segmentRect(int replica, Phase phase) const;
  QRectF shardRect(int replica) const;
  // Pixels per measured second on the lanes.
  double pixelsPerSecond() const;
  // What the playhead is on, for the caption: "all-reduce (reduce-scatter, hop 2 of 6)".
  QString currentActivity() const;
  // Which phase replica r is in at the playhead (Optimizer after its end, Forward before its start).
  Phase phaseAt(int replica, double seconds) const;

  QSize sizeHint() const override { return {980, 420}; }
  QSize minimumSizeHint() const override { return {640, 320}; }

 protected:
  void paintEvent(QPaintEvent*) override;

 private:
  struct Lane {
    double offset = 0;                              // start relative to the earliest replica
    double begin[kPhases] = {}, end[kPhases] = {};  // per kOrder, relative to the step start
  };
  QRectF lanesArea() const;
  double laneHeight() const;
  QRectF commArea() const;
  double phaseStart(int replica, Phase p) const;
  void paintComm(QPainter& p, const QRectF& area) const;
  // Progress (0..1) through the all-reduce of the replica that is furthest into it; < 0 when no
  // replica is in its all-reduce at the playhead.
  double commProgress() const;

  ml::StepEvent step_;
  StepSceneInfo info_;
  std::vector<Lane> lanes_;
  double duration_ = 0, t_ = 0;
  QString placeholder_;
};

}  // namespace mlui
