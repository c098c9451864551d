// Runs a lesson's experiments with ml::Trainer, one after the other, collects the measured
// figures ({speedup_4}, {final_acc_linear}, {checksums_equal}, ...) and fills the reveal text.
// The studio's Learn panel subscribes to hub() before run() to watch each experiment live, and
// runs it on a worker thread; requestCancel() stops it between steps.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "learn/Lesson.h"
#include "learn/RunSequence.h"
#include "telemetry/Channel.h"
#include "train/Trainer.h"

namespace ml {

struct LessonFigure {
  double value = 0;  // the raw number (shares and accuracies as fractions, times in seconds)
  std::string text;  // as the reveal shows it ("87.3%", "1.84", "yes")
};
using LessonFigures = std::map<std::string, LessonFigure>;

struct LessonRunnerOptions {
  std::string storePath;                 // record every experiment as a stored run there; "" records nothing
  int64_t maxSteps = 0;                  // caps every experiment's updates (quick checks, tests); 0: as the lesson says
  std::string runNamePrefix = "lesson";  // stored runs are named "<prefix> <id>: <experiment title>"
};

struct ExperimentOutcome {
  LessonExperiment experiment;
  Project project;  // as run
  RunPlan plan;
  RunStarted started;
  RunFinished finished;
  std::vector<StepEvent> steps;  // with per-replica timings
  std::vector<EpochEvent> epochs;
  std::optional<int64_t> runId;  // when recorded
};

struct LessonOutcome {
  std::vector<ExperimentOutcome> experiments;
  LessonFigures figures;
  std::string reveal;      // the lesson's reveal with every placeholder filled
  bool completed = false;  // false when cancelled or an experiment failed
  std::string message;     // why not completed
};

class LessonRunner {
 public:
  explicit LessonRunner(Lesson lesson, LessonRunnerOptions options = {});

  const Lesson& lesson() const { return lesson_; }
  // Every experiment's events in turn (each begins with RunStarted). Closed when run() returns.
  TelemetryHub& hub() { return hub_; }
  // Called on run()'s thread before experiment i starts.
  std::function<void(size_t index, const ExperimentOutcome& starting)> onExperimentStarted;

  // Runs every experiment (loading the data set once). Throws UserError for a configuration that
  // cannot run (missing data set, batch larger than the data); a run-time failure or a cancel
  // ends with completed = false and the figures measured so far.
  LessonOutcome run();
  void requestCancel();

  bool isCorrect(int choice) const { return choice == lesson_.question.correct; }

 private:
  Lesson lesson_;
  LessonRunnerOptions options_;
  TelemetryHub hub_;
  RunSequence runs_;
};

// The figures of a lesson's finished experiments (see projects/lessons/README.md for the list).
// `data` is the lesson's data set (for replica_grad_diff); may be null.
LessonFigures computeLessonFigures(const Lesson& lesson, const std::vector<ExperimentOutcome>& outcomes, const DataSplit* data);

// Replaces every {name} that figures holds by its text; unknown names stay as they are.
std::string fillPlaceholders(const std::string& text, const LessonFigures& figures);

// Relative L2 distance between one replica's mean gradient over its shard and the mean gradient
// over the whole global batch, at the project's initial weights on the first batch of epoch 1.
double replicaGradientDifference(const Project& project, const Dataset& train, int replicas, int64_t globalBatch);

}  // namespace ml
