// Sweeps: list parsing and every bad input refused before anything is stored; a 2x2 grid on the
// spirals as four stored runs tagged with the sweep; results read back from those runs; cancel
// (finished points kept, the rest cancelled) and resume; early stopping; the CSV.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include "Error.h"
#include "Format.h"
#include "LearnTestUtil.h"
#include "data/Dataset.h"
#include "learn/Sweep.h"
#include "learn/SweepResults.h"
#include "store/RunStore.h"
#include "store/SweepStore.h"
#include "support/Errors.h"
#include "train/Trainer.h"

using namespace ml;

namespace {

using mltest::errorOf;

Project spirals() { return Project::load(mltest::projectPath("spirals.json")); }
std::shared_ptr<const DataSplit> dataOf(const Project& p) { return std::make_shared<const DataSplit>(loadData(p.data)); }

SweepOptions twoByTwo() {
  SweepOptions o;
  o.grid.batchSizes = {32, 64};
  o.grid.lrs = {0.003, 0.01};
  o.grid.devices = {"cpu:1"};
  o.grid.lrScalings = {"none"};
  o.epochs = 2;
  o.target = 0.5;
  return o;
}

}  // namespace

TEST(SweepLists, ParseNumbersDevicesAndRules) {
  EXPECT_EQ(parseBatchList(" 64, 128 ,256"), (std::vector<int64_t>{64, 128, 256}));
  EXPECT_EQ(parseLrList("1e-3,3e-3"), (std::vector<double>{1e-3, 3e-3}));
  EXPECT_EQ(parseDeviceSpecList("cpu:1,cpu:2"), (std::vector<std::string>{"cpu:1", "cpu:2"}));
  EXPECT_EQ(parseDeviceSpecList("cpu:1,2,4"), (std::vector<std::string>{"cpu:1", "cpu:2", "cpu:4"}));
  EXPECT_EQ(parseDeviceSpecList("gpu:0;gpu:0,1"), (std::vector<std::string>{"gpu:0", "gpu:0,1"}));
  EXPECT_EQ(parseScalingList("none,linear"), (std::vector<std::string>{"none", "linear"}));
}

TEST(SweepLists, BadListsSayWhatAndHow) {
  EXPECT_NE(errorOf([] { parseBatchList(""); }).find("--batch-size: the list is empty"), std::string::npos);
  EXPECT_NE(errorOf([] { parseLrList("1e-3,abc"); }).find("--lr: 'abc' is not a number"), std::string::npos);
  EXPECT_NE(errorOf([] { parseBatchList("64,,128"); }).find("empty item"), std::string::npos);
  EXPECT_NE(errorOf([] { parseBatchList("64.5"); }).find("whole number"), std::string::npos);
  EXPECT_NE(errorOf([] { parseLrList("-0.1"); }).find("positive"), std::string::npos);
  EXPECT_NE(errorOf([] { parseBatchList("64,64"); }).find("twice"), std::string::npos);
  EXPECT_NE(errorOf([] { parseScalingList("none,cubic"); }).find("'cubic' is not a scaling rule"), std::string::npos);
  EXPECT_NE(errorOf([] { parseDeviceSpecList("tpu:1"); }).find("--devices"), std::string::npos);
}

TEST(SweepGridTest, ExpandsTheCartesianProductInAFixedOrder) {
  SweepGrid g;
  g.batchSizes = {32, 64};
  g.lrs = {0.1, 0.2, 0.3};
  g.devices = {"cpu:1", "cpu:2"};
  g.lrScalings = {"none", "linear"};
  const auto pts = expandGrid(g);
  ASSERT_EQ(pts.size(), 24u);
  EXPECT_EQ(pts[0].devices, "cpu:1");
  EXPECT_EQ(pts[1].lr, 0.2);
  EXPECT_EQ(pts[3].batchSize, 64);
  EXPECT_EQ(pts[6].lrScaling, "linear");
  EXPECT_EQ(pts[23].devices, "cpu:2");
  for (size_t i = 0; i < pts.size(); ++i) EXPECT_EQ(pts[i].point, static_cast<int>(i));
  const auto back = SweepGrid::fromJson(g.toJson());
  EXPECT_EQ(back.lrs, g.lrs);
  EXPECT_EQ(back.devices, g.devices);
}

TEST(SweepValidation, RefusesBadGridsBeforeAnythingIsStored) {
  mltest::TempDir dir("sweep-bad");
  const std::string db = (dir.path() / "runs.sqlite").string();
  const Project p = spirals();
  const auto data = dataOf(p);
  SweepOptions tooBig = twoByTwo();
  tooBig.grid.batchSizes = {8, 16, 32, 64};
  tooBig.maxPoints = 6;
  EXPECT_NE(errorOf([&] { SweepRunner(p, data, tooBig, db); }).find("the grid has 8 points"), std::string::npos);
  EXPECT_NE(errorOf([&] { SweepRunner(p, data, tooBig, db); }).find("--max-points 8"), std::string::npos);
  SweepOptions unsplittable = twoByTwo();
  unsplittable.grid.batchSizes = {1, 64};
  unsplittable.grid.devices = {"cpu:2"};
  EXPECT_NE(errorOf([&] {
              SweepRunner(p, data, unsplittable, db);
            }).find("batch size 1 cannot be split across the 2 replicas of cpu:2"),
            std::string::npos);
  SweepOptions empty = twoByTwo();
  empty.grid.lrs.clear();
  EXPECT_NE(errorOf([&] { SweepRunner(p, data, empty, db); }).find("--lr: the list is empty"), std::string::npos);
  SweepOptions huge = twoByTwo();
  huge.grid.batchSizes = {64, 1000000};
  EXPECT_NE(errorOf([&] { SweepRunner(p, data, huge, db); }).find("larger than the training set"), std::string::npos);
  // Nothing ran, so nothing was stored (the store may not even exist).
  if (std::filesystem::exists(db)) {
    RunStore store = RunStore::open(db);
    EXPECT_TRUE(listSweeps(store).empty());
    EXPECT_TRUE(store.listRuns().empty());
  }
}

// A sweep in which no point trains has no result: it ends failed (the CLI exits 1), each point
// keeps its reason, and a resume would train them all again. One trained point is a result: the
// sweep with it is finished, and only the failed point is pending. Each point is one epoch, a
// fault fails replica 0 at step 3: batch 32 has 75 steps and fails, batch 1200 has 2 and trains.
TEST(SweepRunnerTest, ASweepInWhichNoPointTrainedEndsFailed) {
  mltest::TempDir dir("sweep-failed");
  const std::string db = (dir.path() / "runs.sqlite").string();
  Project p = spirals();
  p.distribute.faults = {parseFault("fail:cpu:0@step=3")};
  SweepOptions o = twoByTwo();
  o.grid.batchSizes = {32};
  o.epochs = 1;
  o.target.reset();
  SweepRunner failing(p, dataOf(p), o, db);
  EXPECT_EQ(failing.run(), "failed");
  for (const auto& pt : failing.points()) {
    EXPECT_EQ(pt.status, "failed");
    EXPECT_NE(pt.message.find("step 3"), std::string::npos) << pt.message;
  }
  EXPECT_EQ(failing.pending().size(), 2u);
  {
    RunStore store = RunStore::open(db);
    EXPECT_EQ(loadSweepResults(store, failing.id()).sweep.status, "failed");
  }

  o.grid.batchSizes = {32, 1200};
  o.grid.lrs = {0.01};
  SweepRunner mixed(p, dataOf(p), o, db);
  EXPECT_EQ(mixed.run(), "finished");
  ASSERT_EQ(mixed.points().size(), 2u);
  EXPECT_EQ(mixed.points()[0].status, "failed");
  EXPECT_EQ(mixed.points()[1].status, "finished");
  EXPECT_EQ(mixed.pending(), std::vector<int>{0});
}

TEST(SweepRunnerTest, TwoByTwoStoresFourTaggedRunsAndResultsReadBack) {
  mltest::TempDir dir("sweep-2x2");
  const std::string db = (dir.path() / "runs.sqlite").string();
  const Project p = spirals();
  SweepRunner runner(p, dataOf(p), twoByTwo(), db);
  std::vector<int> finished;
  runner.onPointFinished = [&](const SweepPointRow& pt) { finished.push_back(pt.point); };
  EXPECT_EQ(runner.run(), "finished");
  EXPECT_EQ(finished, (std::vector<int>{0, 1, 2, 3}));

  RunStore store = RunStore::open(db);
  RunFilter f;
  f.tag = sweepTag(runner.id());
  const auto runs = store.listRuns(f);
  ASSERT_EQ(runs.size(), 4u);
  const SweepResults r = loadSweepResults(store, runner.id());
  EXPECT_EQ(r.sweep.status, "finished");
  ASSERT_EQ(r.points.size(), 4u);
  for (const auto& pt : r.points) {
    ASSERT_TRUE(pt.point.runId);
    const RunDetail d = store.loadRun(*pt.point.runId);
    EXPECT_EQ(d.summary.status, "finished");
    EXPECT_EQ(d.summary.globalBatch, pt.point.batchSize);
    ASSERT_TRUE(d.baseLr);
    EXPECT_DOUBLE_EQ(*d.baseLr, pt.point.lr);
    EXPECT_EQ(d.summary.epochsDone, 2);
    ASSERT_TRUE(pt.finalValMetric && d.summary.finalValMetric);
    EXPECT_DOUBLE_EQ(*pt.finalValMetric, *d.summary.finalValMetric);
    EXPECT_GT(*pt.samplesPerSec, 0);
    // Spirals pass 50% validation accuracy within 2 epochs at these rates.
    ASSERT_TRUE(pt.secondsToTarget);
    EXPECT_LE(*pt.secondsToTarget, *d.seconds + 1e-9);
    EXPECT_EQ(*pt.samplesToTarget, store.samplesThroughEpoch(*pt.point.runId, *pt.epochToTarget));
  }
  ASSERT_TRUE(r.best);
  for (const auto& pt : r.points) EXPECT_GE(*pt.secondsToTarget, *r.points[*r.best].secondsToTarget);
  const std::string table = formatSweepTable(r);
  EXPECT_NE(table.find("* best: #" + std::to_string(r.points[*r.best].point.point + 1)), std::string::npos);

  // The CSV: a header and one row per point with the stored figures.
  const auto csvPath = dir.path() / "sweep.csv";
  writeSweepCsv(r, csvPath.string());
  std::ifstream in(csvPath);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line.rfind("sweep_id,point,devices,", 0), 0u);
  int rows = 0, bestRows = 0;
  while (std::getline(in, line)) {
    ++rows;
    bestRows += line.back() == '1';
    EXPECT_NE(line.find(formatNumber("%.10g", *r.points[static_cast<size_t>(rows - 1)].finalValMetric)), std::string::npos);
  }
  EXPECT_EQ(rows, 4);
  EXPECT_EQ(bestRows, 1);
}

TEST(SweepRunnerTest, CancelKeepsFinishedPointsAndResumeCompletesTheRest) {
  mltest::TempDir dir("sweep-cancel");
  const std::string db = (dir.path() / "runs.sqlite").string();
  const Project p = spirals();
  const auto data = dataOf(p);
  SweepOptions o = twoByTwo();
  o.epochs = 3;
  int64_t id = 0;
  {
    SweepRunner runner(p, data, o, db);
    id = runner.id();
    runner.onPointStarted = [&](const SweepPointRow& pt) {
      if (pt.point == 1) runner.requestCancel();
    };
    // Point 0 runs whole; the cancel arrives as point 1 starts.
    EXPECT_EQ(runner.run(), "cancelled");
  }
  RunStore store = RunStore::open(db);
  SweepRecord rec = loadSweep(store, id);
  EXPECT_EQ(rec.status, "cancelled");
  ASSERT_EQ(rec.points.size(), 4u);
  EXPECT_EQ(rec.points[0].status, "finished");
  ASSERT_TRUE(rec.points[0].runId);
  EXPECT_EQ(store.loadRun(*rec.points[0].runId).summary.status, "finished");
  for (int i = 1; i < 4; ++i) EXPECT_EQ(rec.points[static_cast<size_t>(i)].status, "cancelled") << i;
  ASSERT_TRUE(rec.points[1].runId);  // the interrupted one is stored, as cancelled
  EXPECT_EQ(store.loadRun(*rec.points[1].runId).summary.status, "cancelled");
  EXPECT_FALSE(rec.points[2].runId);

  SweepRunner resumed(id, data, db);
  EXPECT_EQ(resumed.pending(), (std::vector<int>{1, 2, 3}));
  std::vector<int> ran;
  resumed.onPointStarted = [&](const SweepPointRow& pt) { ran.push_back(pt.point); };
  EXPECT_EQ(resumed.run(), "finished");
  EXPECT_EQ(ran, (std::vector<int>{1, 2, 3}));
  rec = loadSweep(store, id);
  EXPECT_EQ(rec.status, "finished");
  EXPECT_EQ(rec.finishedPoints(), 4);
  RunFilter f;
  f.tag = sweepTag(id);
  EXPECT_EQ(store.listRuns(f).size(), 4u);  // the cancelled attempt is stored but untagged
  EXPECT_EQ(store.listRuns().size(), 5u);
}

TEST(SweepStoreTest, DeletingAPointsRunLeavesThePointWithoutARun) {
  mltest::TempDir dir("sweep-delete");
  const std::string db = (dir.path() / "runs.sqlite").string();
  const Project p = spirals();
  SweepOptions o = twoByTwo();
  o.grid.batchSizes = {64};
  o.grid.lrs = {0.01};
  o.epochs = 1;
  SweepRunner runner(p, dataOf(p), o, db);
  ASSERT_EQ(runner.run(), "finished");
  RunStore store = RunStore::open(db);
  const auto runId = loadSweep(store, runner.id()).points[0].runId;
  ASSERT_TRUE(runId);
  store.deleteRun(*runId);
  const auto rec = loadSweep(store, runner.id());
  EXPECT_FALSE(rec.points[0].runId);
  EXPECT_EQ(store.db().queryText("PRAGMA foreign_key_check"), "");
  const auto r = loadSweepResults(store, runner.id());
  EXPECT_FALSE(r.points[0].finalValMetric);
  deleteSweep(store, runner.id());
  EXPECT_TRUE(listSweeps(store).empty());
  EXPECT_EQ(store.db().queryInt("SELECT count(*) FROM sweep_points"), 0);
}

// A sweep's state follows its process: while it lives the sweep reads running and cannot be
// resumed a second time; once it is gone (a child that exited stands in for a killed sweep), the
// next opening of the store marks it and its running point interrupted, and it resumes to the end.
TEST(SweepStoreTest, ASweepWhoseProcessIsGoneIsInterruptedAndResumes) {
  mltest::TempDir dir("sweep-gone");
  const std::string db = (dir.path() / "runs.sqlite").string();
  const Project p = spirals();
  const auto data = dataOf(p);
  SweepOptions o = twoByTwo();
  o.grid.lrs = {0.01};
  o.epochs = 1;
  int64_t id = 0;
  {
    SweepRunner runner(p, data, o, db);
    id = runner.id();
    RunStore store = RunStore::open(db);
    setSweepStatus(store, id, "running");  // as run() does: this process is the sweep's
    setPointState(store, id, 0, "running", std::nullopt);
  }
  {
    RunStore store = RunStore::open(db);
    const SweepRecord rec = loadSweep(store, id);
    EXPECT_EQ(rec.status, "running");
    EXPECT_EQ(rec.pid, ::getpid());
    EXPECT_NE(errorOf([&] { SweepRunner(id, data, db); }).find("is still running (process " + std::to_string(::getpid())),
              std::string::npos);
  }
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  {
    RunStore store = RunStore::open(db);
    // pid_start 1: even a reused pid is not this sweep's process.
    auto u = store.db().prepare("UPDATE sweeps SET pid=?, pid_start=1 WHERE id=?");
    u.bindAll(int64_t{child}, id).run();
  }
  RunStore store = RunStore::open(db);  // opening marks it
  SweepRecord rec = loadSweep(store, id);
  EXPECT_EQ(rec.status, "interrupted");
  EXPECT_EQ(rec.points[0].status, "interrupted");
  EXPECT_EQ(rec.points[1].status, "pending");
  SweepRunner resumed(id, data, db);
  EXPECT_EQ(resumed.pending(), (std::vector<int>{0, 1}));
  EXPECT_EQ(resumed.run(), "finished");
  rec = loadSweep(store, id);
  EXPECT_EQ(rec.status, "finished");
  EXPECT_EQ(rec.finishedPoints(), 2);
}

TEST(SweepRunnerTest, ParallelPointsAllFinishWithTheirOwnRuns) {
  mltest::TempDir dir("sweep-parallel");
  const std::string db = (dir.path() / "runs.sqlite").string();
  const Project p = spirals();
  SweepOptions o = twoByTwo();
  o.steps = 20;
  o.epochs.reset();
  o.parallel = 2;
  SweepRunner runner(p, dataOf(p), o, db);
  EXPECT_EQ(runner.run(), "finished");
  RunStore store = RunStore::open(db);
  const SweepRecord rec = loadSweep(store, runner.id());
  std::set<int64_t> ids;
  for (const auto& pt : rec.points) {
    EXPECT_EQ(pt.status, "finished");
    ASSERT_TRUE(pt.runId);
    ids.insert(*pt.runId);
    EXPECT_EQ(*store.loadRun(*pt.runId).steps, 20);
  }
  EXPECT_EQ(ids.size(), 4u);
}

TEST(EarlyStopping, StopsAfterEpochsWithoutImprovement) {
  // Adam at 0.01 on the spirals: the validation loss falls, then wanders once the arms are fit.
  Project p = spirals();
  p.training.epochs = 60;
  p.distribute.devices = ml::parseDevices("cpu:1");
  TelemetryHub hub;
  auto ch = hub.subscribe(1 << 18);
  TrainerOptions to;
  to.stopAfterNoImprovement = 2;
  Trainer t(p, dataOf(p), hub, to);
  const RunFinished fin = t.run();
  std::vector<Event> events;
  ch->drain(events);
  std::vector<double> valLoss;
  for (const auto& e : events)
    if (const auto* ep = std::get_if<EpochEvent>(&e)) valLoss.push_back(*ep->valLoss);
  ASSERT_EQ(fin.status, RunStatus::Finished);
  ASSERT_GE(valLoss.size(), 3u);
  ASSERT_LT(valLoss.size(), 60u) << "never stopped early";
  EXPECT_NE(fin.message.find("stopped early after epoch " + std::to_string(valLoss.size())), std::string::npos) << fin.message;
  // The last two epochs did not beat the best before them, and every earlier stretch of two did.
  const size_t n = valLoss.size();
  const double bestBefore = *std::min_element(valLoss.begin(), valLoss.end() - 2);
  EXPECT_GE(valLoss[n - 1], bestBefore);
  EXPECT_GE(valLoss[n - 2], bestBefore);
  double best = valLoss[0];
  int since = 0;
  for (size_t i = 1; i + 1 < n; ++i) {
    since = valLoss[i] < best ? 0 : since + 1;
    best = std::min(best, valLoss[i]);
    EXPECT_LT(since, 2) << "should have stopped after epoch " << i + 1;
  }
}
