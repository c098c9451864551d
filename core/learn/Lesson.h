// Lessons as data (projects/lessons/*.json, so a teacher can write more): an idea, a project, a
// list of experiments, a question to commit to before running, and a reveal text whose
// {placeholders} are filled from the measured figures. The format is described in
// projects/lessons/README.md.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "project/Project.h"

namespace ml {

inline constexpr int kLessonSchemaVersion = 1;

// One training run of a lesson: the lesson's project with these settings changed.
struct LessonExperiment {
  std::string label;  // [a-z][a-z0-9_]*: names the figures ({final_acc_<label>})
  std::string title;  // for the view ("4 devices, unscaled")
  DeviceList devices = parseDevices("cpu:1");
  std::string batchPolicy = "global";         // global | per-device: what `batch` means
  int64_t batch = 0;                          // 0: the project's batch size
  std::optional<LrRule> lrScaling;            // none keeps the project's
  double warmupEpochs = -1;                   // < 0 keeps the project's
  double learningRate = 0;                    // base rate (before scaling); 0 keeps the project's
  int epochs = 0;                             // 0 keeps the project's
  int64_t steps = 0;                          // stop after this many updates (0: every epoch)
  std::vector<Fault> faults;                  // injected faults ("slow:cpu:1=3x"): the run shows what they do
  std::optional<Precision> precision;         // none keeps the project's
  std::optional<double> lossScale;            // mixed_float16's initial loss scale; 0 for none (no scaling)
  std::optional<bool> batchnormSynchronized;  // every BatchNormalization layer's "synchronized"

  // The project with this experiment's settings applied.
  Project apply(const Project& base) const;
};

struct LessonQuestion {
  std::string text;
  std::vector<std::string> choices;
  int correct = 0;          // index into choices, from 0
  std::string explanation;  // why the correct choice is right (shown with the reveal)
};

struct Lesson {
  int schemaVersion = kLessonSchemaVersion;
  std::string id;  // [a-z0-9-]+, unique
  int order = 0;   // position in the list
  std::string title;
  std::string idea;  // the one idea this lesson teaches, a sentence or two
  Project project;
  std::string projectRef;  // the path relative to projects/, or "inline"
  std::vector<LessonExperiment> experiments;
  LessonQuestion question;
  std::string reveal;      // with {placeholders}
  std::string sourcePath;  // the file it came from ("" when parsed from JSON)
};

// Parses and validates; errors are UserError "<source>: <field> <what is wrong and allowed>".
// projectsDir resolves a project given as a path ("spirals.json" -> projectsDir/spirals.json); when
// it is not there, the lesson file's own folder and the shipped projects are tried.
Lesson parseLesson(const nlohmann::json& j, const std::string& source, const std::string& projectsDir);
Lesson loadLesson(const std::string& path, const std::string& projectsDir);
// Every *.json in dir, sorted by order then id; a bad file throws naming it. projectsDir defaults
// to the projects beside an installed lesson folder (share/mirrorlab/lessons -> share/mirrorlab/projects),
// else to the parent of dir (projects/lessons -> projects).
std::vector<Lesson> loadLessons(const std::string& dir, const std::string& projectsDir = "");
// The same folder read whole: every lesson that loads, and one message per file that does not
// (naming it), so that one broken lesson does not hide the others.
struct LessonFolder {
  std::vector<Lesson> lessons;
  std::vector<std::string> problems;
};
LessonFolder scanLessons(const std::string& dir, const std::string& projectsDir = "");
// The lesson folder: $MIRRORLAB_LESSONS, else the one beside the example projects that
// findSharedData() finds (build tree, install prefix, XDG data folders).
std::string defaultLessonsDir();

// The placeholders a text uses, in order of first appearance, without braces.
std::vector<std::string> placeholdersIn(const std::string& text);
// Every figure name LessonRunner produces for this lesson (the reveal may use only these).
std::vector<std::string> lessonFigureNames(const Lesson& lesson);

}  // namespace ml
