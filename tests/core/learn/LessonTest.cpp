// Lesson files load and validate with errors naming the file and the field; real short runs of
// lessons 2 and 4 fill every placeholder with measured numbers; a recorded lesson run exports a
// Chrome trace whose spans sum to the stored phase times.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <set>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "Error.h"
#include "LearnTestUtil.h"
#include "learn/Lesson.h"
#include "learn/LessonRunner.h"
#include "learn/TraceExport.h"
#include "store/RunStore.h"

namespace fs = std::filesystem;
using namespace ml;
using nlohmann::json;

namespace {

std::string lessonsDir() { return (fs::path(MIRRORLAB_SOURCE_DIR) / "projects" / "lessons").string(); }
std::string projectsDir() { return (fs::path(MIRRORLAB_SOURCE_DIR) / "projects").string(); }

Lesson shipped(const std::string& id) {
  for (auto& l : loadLessons(lessonsDir()))
    if (l.id == id) return l;
  throw std::runtime_error("no shipped lesson " + id);
}

json validLesson() {
  return json::parse(R"({
    "schema_version": 1, "id": "tiny", "title": "Tiny", "idea": "An idea.", "project": "spirals.json",
    "experiments": [{"label": "two", "devices": "cpu:2", "batch_size": 32, "steps": 5}],
    "question": {"text": "Q?", "choices": ["a", "b"], "correct": 0},
    "reveal": "{final_acc_two} {speedup_2}"
  })");
}

// Writes j to a lesson file and returns the UserError message of loading it.
std::string loadError(const json& j, const std::string& name = "bad.json") {
  mltest::TempDir dir("lesson");
  const fs::path file = dir.path() / name;
  mltest::writeFile(file, j.dump(2));
  try {
    loadLesson(file.string(), projectsDir());
  } catch (const UserError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(file.string()), std::string::npos) << "the error names the file: " << msg;
    return msg;
  }
  ADD_FAILURE() << "loaded without error: " << j.dump();
  return "";
}

void expectAllFilled(const LessonOutcome& out) {
  EXPECT_EQ(out.reveal.find('{'), std::string::npos) << out.reveal;
  EXPECT_EQ(out.reveal.find('}'), std::string::npos) << out.reveal;
}

}  // namespace

TEST(Lessons, AllShippedLessonsLoad) {
  const auto lessons = loadLessons(lessonsDir());
  ASSERT_GE(lessons.size(), 5u);
  const std::vector<std::string> want = {"copies-and-shards",    "gradients-averaged", "scale-learning-rate",
                                         "devices-not-accuracy", "speedup-not-linear", "linear-scaling-rule",
                                         "one-slow-device",      "loss-scaling",       "batchnorm-devices"};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(lessons[i].id, want[i]) << "lessons are listed in order";
  for (const auto& l : lessons) {
    SCOPED_TRACE(l.sourcePath);
    EXPECT_FALSE(l.title.empty());
    EXPECT_FALSE(l.idea.empty());
    EXPECT_FALSE(l.experiments.empty());
    EXPECT_GE(l.question.choices.size(), 2u);
    EXPECT_LT(l.question.correct, static_cast<int>(l.question.choices.size()));
    EXPECT_FALSE(placeholdersIn(l.reveal).empty()) << "a reveal quotes measured figures";
    const auto known = lessonFigureNames(l);
    for (const auto& p : placeholdersIn(l.reveal)) EXPECT_NE(std::find(known.begin(), known.end(), p), known.end()) << p;
  }
  // Lesson 3 carries its project inline; the others name a file in projects/.
  EXPECT_EQ(lessons[2].projectRef, "inline");
  EXPECT_EQ(lessons[2].project.training.optimizer.kind, ml::OptimizerKind::Sgd);
  EXPECT_EQ(lessons[0].projectRef, "spirals.json");
  // The experiment settings reach the project that runs.
  const Project p = lessons[2].experiments[2].apply(lessons[2].project);
  EXPECT_EQ(p.distribute.devices.spec, "cpu:4");
  EXPECT_TRUE(p.training.perDeviceBatch);
  EXPECT_EQ(p.training.lrScaling, ml::LrRule::Linear);
  EXPECT_DOUBLE_EQ(p.training.warmupEpochs, 1.0);
}

TEST(Lessons, BadFilesNameTheFileAndTheField) {
  json j = validLesson();
  j.erase("question");
  EXPECT_NE(loadError(j).find("question is missing"), std::string::npos);

  j = validLesson();
  j["experiments"][0]["devices"] = "tpu:4";
  EXPECT_NE(loadError(j).find("experiments[0].devices is 'tpu:4'"), std::string::npos);

  j = validLesson();
  j["question"]["correct"] = 2;
  EXPECT_NE(loadError(j).find("question.correct is 2 but there are only 2 choices"), std::string::npos);

  j = validLesson();
  j["reveal"] = "{final_acc_two} and {speedup_8}";
  EXPECT_NE(loadError(j).find("reveal uses {speedup_8}"), std::string::npos);

  j = validLesson();
  j["expriments"] = j["experiments"];
  EXPECT_NE(loadError(j).find("'expriments' at the top of the file is not a known field"), std::string::npos);

  j = validLesson();
  j["project"] = "no-such-project.json";
  EXPECT_NE(loadError(j).find("project names 'no-such-project.json'"), std::string::npos);

  j = validLesson();
  j["experiments"].push_back(j["experiments"][0]);
  EXPECT_NE(loadError(j).find("experiments[1].label 'two' is used twice"), std::string::npos);

  j = validLesson();
  j["experiments"][0]["label"] = "Two Devices";
  EXPECT_NE(loadError(j).find("experiments[0].label is 'Two Devices'"), std::string::npos);

  j = validLesson();
  j["experiments"][0]["lr_scaling"] = "cubic";
  EXPECT_NE(loadError(j).find("experiments[0].lr_scaling is 'cubic'"), std::string::npos);

  j = validLesson();
  j["project"] = json{{"model", {{"input_shape", {2}}, {"layers", json::array()}}}, {"training", {{"epochs", 0}}}};
  EXPECT_NE(loadError(j).find("Training screen › Epochs (epochs in the file's training section)"), std::string::npos);

  mltest::TempDir dir("lesson-json");
  mltest::writeFile(dir.path() / "broken.json", "{\"id\": ");
  try {
    loadLesson((dir.path() / "broken.json").string(), projectsDir());
    FAIL() << "broken JSON loaded";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("broken.json: not valid JSON"), std::string::npos) << e.what();
  }
}

TEST(Lessons, BadPrecisionOrLossScaleNamesTheExperimentField) {
  json j = validLesson();
  j["experiments"][0]["precision"] = "fp16";
  EXPECT_NE(loadError(j).find("experiments[0].precision is 'fp16' (allowed: float32, mixed_bfloat16, mixed_float16)"),
            std::string::npos)
      << loadError(j);
  for (const json& bad : {json(0), json(-1), json("dynamic")}) {
    j = validLesson();
    j["experiments"][0]["loss_scale"] = bad;
    EXPECT_NE(loadError(j).find("experiments[0].loss_scale must be a positive initial scale"), std::string::npos) << loadError(j);
  }
}

TEST(Lessons, FillPlaceholdersLeavesUnknownNames) {
  LessonFigures f{{"a", {1, "one"}}, {"speedup_4", {3.2, "3.20"}}};
  EXPECT_EQ(fillPlaceholders("{a} and {speedup_4} but {b}, {a}", f), "one and 3.20 but {b}, one");
  EXPECT_EQ(placeholdersIn("{x} {y} {x} {not valid}"), (std::vector<std::string>{"x", "y"}));
}

TEST(LessonRunner, GradientsAveragedLessonFillsEveryPlaceholder) {
  Lesson lesson = shipped("gradients-averaged");
  LessonRunnerOptions opts;
  opts.maxSteps = 12;  // a short run: the figures are real, just fewer steps
  LessonRunner runner(lesson, opts);
  size_t started = 0;
  runner.onExperimentStarted = [&](size_t, const ExperimentOutcome& o) {
    ++started;
    EXPECT_EQ(o.plan.replicas, 4);
  };
  const LessonOutcome out = runner.run();
  ASSERT_TRUE(out.completed) << out.message;
  EXPECT_EQ(started, 1u);
  expectAllFilled(out);
  const ExperimentOutcome& four = out.experiments.at(0);
  EXPECT_EQ(four.finished.steps, 12);
  EXPECT_EQ(four.steps.size(), 12u);
  EXPECT_EQ(four.plan.globalBatch, 64);
  EXPECT_EQ(out.figures.at("checksums_equal").text, "yes");
  EXPECT_EQ(out.figures.at("shard_sizes_four").text, "16, 16, 16, 16");
  EXPECT_EQ(out.figures.at("steps_four").text, "12");
  // A 16-sample gradient is not the 64-sample one: the difference is real and moderate.
  const double d = out.figures.at("replica_grad_diff").value;
  EXPECT_GT(d, 0.01);
  EXPECT_LT(d, 10.0);
  EXPECT_NE(out.reveal.find("16 samples alone"), std::string::npos) << out.reveal;
  EXPECT_NE(out.reveal.find(out.figures.at("checksum_four").text), std::string::npos);
  EXPECT_EQ(out.figures.at("checksum_four").value, 1.0) << "one distinct checksum across the replicas";
}

TEST(LessonRunner, DevicesNotAccuracyLessonGivesTheSameCurveAndARecordedTrace) {
  Lesson lesson = shipped("devices-not-accuracy");
  mltest::TempDir dir("lesson-run");
  const std::string db = (dir.path() / "runs.sqlite").string();
  LessonRunnerOptions opts;
  opts.maxSteps = 40;
  opts.storePath = db;
  LessonRunner runner(lesson, opts);
  auto watcher = runner.hub().subscribe();  // what the studio does to watch live
  const LessonOutcome out = runner.run();
  ASSERT_TRUE(out.completed) << out.message;
  expectAllFilled(out);
  ASSERT_EQ(out.experiments.size(), 2u);
  EXPECT_TRUE(watcher->closed());
  std::vector<Event> seen;
  watcher->drain(seen);
  EXPECT_GE(seen.size(), 80u) << "both experiments' steps reached the subscriber";

  const auto& f = out.figures;
  // Same global batch, same seed: the same updates on 1 and 4 devices, to float rounding.
  EXPECT_LT(f.at("max_loss_diff").value, 1e-4);
  EXPECT_NEAR(f.at("final_acc_one").value, f.at("final_acc_four").value, 0.005);
  EXPECT_GT(f.at("final_acc_one").value, 0.34) << "40 steps learn something beyond chance (1/3)";
  EXPECT_EQ(f.at("checksums_equal_four").text, "yes");
  EXPECT_EQ(f.at("replicas_one").value, 1);
  EXPECT_EQ(f.at("replicas_four").value, 4);
  EXPECT_DOUBLE_EQ(f.at("speedup_1").value, 1.0);
  EXPECT_TRUE(std::isfinite(f.at("speedup_4").value));
  EXPECT_GT(f.at("speedup_4").value, 0.0);
  EXPECT_GT(f.at("step_ms_4").value, 0.0);
  EXPECT_GE(f.at("sync_share_4").value, 0.0);
  EXPECT_LE(f.at("sync_share_4").value, 1.0);

  // Both runs were recorded; the 4-device one exports as a trace with 4 lanes.
  ASSERT_TRUE(out.experiments[1].runId.has_value());
  RunStore store = RunStore::open(db);
  const int64_t run = *out.experiments[1].runId;
  const auto steps = store.loadSteps(run, 1, 1000);
  ASSERT_EQ(steps.size(), 40u);
  const RunDetail detail = store.loadRun(run);
  const json trace = json::parse(chromeTrace(steps, TraceOptions{"lesson", detail.deviceNames}).dump());
  int lanes = 0;
  std::map<std::pair<int, int>, double> spanSum;  // (step, replica) -> sum of span durations, us
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name") ++lanes;
    if (e.at("ph") == "X") spanSum[{e.at("args").at("step").get<int>(), e.at("tid").get<int>()}] += e.at("dur").get<double>();
  }
  EXPECT_EQ(lanes, 4);
  ASSERT_EQ(spanSum.size(), 40u * 4u);
  for (const auto& s : steps)
    for (const auto& r : s.replicas) {
      const std::pair<int, int> key(static_cast<int>(s.step), r.replica);
      EXPECT_NEAR(spanSum[key], r.phases.total() * 1e6, 1e-3);
    }
}

// Lesson 7: the injected 3x slow-down of cpu:1 makes the fast replica wait at every step.
TEST(LessonRunner, OneSlowDeviceLessonShowsTheFastReplicaWaiting) {
  Lesson lesson = shipped("one-slow-device");
  EXPECT_EQ(ml::faultTexts(lesson.experiments.at(1).apply(lesson.project).distribute.faults),
            std::vector<std::string>{"slow:cpu:1=3x"});
  LessonRunnerOptions opts;
  opts.maxSteps = 40;  // the figures are means: enough steps that one preempted step does not decide them
  // The two experiments run one after the other; on a shared machine a burst of load can land on
  // the even one alone. Up to three tries: a lesson whose slow device is not slower fails all three.
  LessonOutcome out;
  for (int attempt = 0; attempt < 3; ++attempt) {
    LessonRunner runner(lesson, opts);
    out = runner.run();
    ASSERT_TRUE(out.completed) << out.message;
    if (out.figures.at("step_ms_slow").value > 1.5 * out.figures.at("step_ms_even").value) break;
  }
  expectAllFilled(out);
  const double slowStep = out.figures.at("step_ms_slow").value, evenStep = out.figures.at("step_ms_even").value;
  EXPECT_GT(slowStep, 1.5 * evenStep) << "the slow replica sets the pace";
  // The fast replica waits for the slow one: with a 3x slower partner it idles about 2/3 of each
  // step; a quarter of the same run's step is the bound. (Against the even run's step it was a
  // comparison of two runs, which load on a shared machine moves apart.)
  EXPECT_GT(out.figures.at("max_wait_ms_slow").value, 0.25 * slowStep);
  EXPECT_LT(out.figures.at("min_wait_ms_slow").value, 0.25 * out.figures.at("max_wait_ms_slow").value);
}

// The loss-scaling lesson: its experiments set the precision and the scale, and the figures are
// the runs': float16 from 2^24 skips steps (on both replicas alike) and halves once per skipped
// step; float32, bfloat16 and float16 without scaling skip none.
TEST(LessonRunner, LossScalingLessonSkipsAndHalvesFromATooLargeScale) {
  Lesson lesson = shipped("loss-scaling");
  const Project scaled = lesson.experiments.at(2).apply(lesson.project);
  EXPECT_EQ(scaled.training.precision, ml::Precision::MixedFloat16);
  EXPECT_TRUE(scaled.training.lossScaling);
  EXPECT_EQ(scaled.training.lossScale, 16777216.0);
  EXPECT_FALSE(lesson.experiments.at(1).apply(lesson.project).training.lossScaling);
  LessonRunnerOptions opts;
  opts.maxSteps = 30;
  LessonRunner runner(lesson, opts);
  const LessonOutcome out = runner.run();
  ASSERT_TRUE(out.completed) << out.message;
  expectAllFilled(out);
  const auto& f = out.figures;
  const double skipped = f.at("skipped_steps_f16scaled").value;
  EXPECT_GE(skipped, 1);
  EXPECT_LT(skipped, 30);
  // No growth within 30 steps (2,000 finite steps double it): one halving per skipped step.
  EXPECT_EQ(f.at("loss_scale_f16scaled").value, 16777216.0 / std::ldexp(1.0, static_cast<int>(skipped)));
  for (const char* label : {"f32", "f16none", "bf16"}) {
    EXPECT_EQ(f.at(std::string("skipped_steps_") + label).value, 0) << label;
    EXPECT_EQ(f.at(std::string("loss_scale_") + label).text, "none") << label;
  }
  EXPECT_EQ(f.at("checksums_equal_f16scaled").text, "yes");
  const auto& steps = out.experiments.at(2).steps;
  ASSERT_FALSE(steps.empty());
  EXPECT_TRUE(steps.front().skipped) << "2^24 overflows at once";
  EXPECT_EQ(steps.front().lossScale, 16777216.0);
}

// The BatchNorm lesson: its experiments set every BatchNormalization layer's statistics mode; per
// replica, 4 shards of 4 leave the 1-device loss curve, synchronized they follow it to rounding.
TEST(LessonRunner, BatchNormLessonSeparatesPerReplicaFromSynchronizedStatistics) {
  Lesson lesson = shipped("batchnorm-devices");
  for (size_t e : {size_t{1}, size_t{2}}) {
    const Project p = lesson.experiments.at(e).apply(lesson.project);
    int bn = 0;
    for (const auto& l : p.model.layers)
      if (const auto* spec = l.as<BatchNormalizationSpec>()) {
        EXPECT_EQ(spec->synchronized, e == 2);
        ++bn;
      }
    EXPECT_EQ(bn, 2);
  }
  LessonRunnerOptions opts;
  opts.maxSteps = 40;
  LessonRunner runner(lesson, opts);
  const LessonOutcome out = runner.run();
  ASSERT_TRUE(out.completed) << out.message;
  expectAllFilled(out);
  const double perReplica = out.figures.at("loss_diff_perreplica").value, synced = out.figures.at("loss_diff_synced").value;
  EXPECT_EQ(out.figures.at("loss_diff_one").value, 0.0);
  EXPECT_LT(synced, 1e-3) << "synchronized statistics follow 1 device";
  EXPECT_GT(perReplica, 1e-3) << "per-replica statistics leave it";
  EXPECT_GT(perReplica, 10 * synced);
  EXPECT_EQ(out.figures.at("checksums_equal").text, "yes");
}

TEST(Lessons, BatchNormSynchronizedMustBeTrueOrFalse) {
  json j = validLesson();
  j["experiments"][0]["batchnorm_synchronized"] = "yes";
  EXPECT_NE(loadError(j).find("experiments[0].batchnorm_synchronized must be true"), std::string::npos) << loadError(j);
}

TEST(LessonRunner, CancelBeforeRunStopsAtOnce) {
  LessonRunner runner(shipped("devices-not-accuracy"));
  runner.requestCancel();
  const LessonOutcome out = runner.run();
  EXPECT_FALSE(out.completed);
  EXPECT_NE(out.message.find("cancelled"), std::string::npos) << out.message;
  EXPECT_TRUE(out.experiments.empty());
}

TEST(Lessons, AnInstalledLessonFolderFindsTheProjectsBesideIt) {
  // cmake --install puts lessons in share/mirrorlab/lessons and projects in share/mirrorlab/projects.
  const fs::path share = fs::temp_directory_path() / ("mirrorlab-lessons-" + std::to_string(::getpid())) / "share" / "mirrorlab";
  fs::remove_all(share.parent_path().parent_path());
  fs::create_directories(share / "projects");
  fs::copy(lessonsDir(), share / "lessons");
  for (const auto& e : fs::directory_iterator(projectsDir()))
    if (e.is_regular_file()) fs::copy_file(e.path(), share / "projects" / e.path().filename());
  const auto lessons = loadLessons((share / "lessons").string());
  EXPECT_EQ(lessons.size(), loadLessons(lessonsDir()).size());
  EXPECT_EQ(lessons.front().project.name, shipped(lessons.front().id).project.name);
  fs::remove_all(share.parent_path().parent_path());
}
