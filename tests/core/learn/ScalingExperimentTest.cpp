// The scaling experiment: one real run per device count with the batch policy applied, rows
// computed from the step events, speed-ups against the first row, stored runs, and errors
// before anything runs.
#include <gtest/gtest.h>

#include <cmath>

#include "Error.h"
#include "LearnTestUtil.h"
#include "data/Dataset.h"
#include "learn/ScalingExperiment.h"
#include "store/RunStore.h"

using namespace ml;

namespace {

Project spirals() {
  Project p = Project::load(mltest::projectPath("spirals.json"));
  p.training.batchSize = 48;
  p.training.perDeviceBatch = false;
  return p;
}

std::shared_ptr<const DataSplit> dataOf(const Project& p) { return std::make_shared<const DataSplit>(loadData(p.data)); }

StepEvent stepWith(double stepTime, std::vector<PhaseTimes> phases) {
  StepEvent s;
  s.stepTime = stepTime;
  for (size_t r = 0; r < phases.size(); ++r) {
    ReplicaStep rs;
    rs.replica = static_cast<int>(r);
    rs.phases = phases[r];
    s.replicas.push_back(rs);
  }
  return s;
}

}  // namespace

TEST(ScalingExperiment, KeepsTheGlobalBatchAndStoresOneRunPerCount) {
  mltest::TempDir dir("scaling");
  const std::string db = (dir.path() / "runs.sqlite").string();
  const Project p = spirals();
  ScalingOptions o;
  o.devices = "cpu:1,2,3";
  o.keep = BatchPolicy::KeepGlobal;
  o.steps = 12;
  o.storePath = db;
  ScalingExperiment e(p, dataOf(p), o);
  ASSERT_EQ(e.projects().size(), 3u);
  std::vector<size_t> started, finished;
  e.onRowStarted = [&](size_t i, const Project& proj, const RunPlan& plan) {
    started.push_back(i);
    EXPECT_EQ(plan.globalBatch, 48);
    EXPECT_EQ(plan.replicas, static_cast<int>(i) + 1);
    EXPECT_EQ(proj.distribute.devices.spec, "cpu:" + std::to_string(i + 1));
  };
  e.onRowFinished = [&](size_t i, const ScalingRow&) { finished.push_back(i); };
  const ScalingResult r = e.run();
  ASSERT_TRUE(r.completed) << r.message;
  EXPECT_EQ(started, (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(finished, (std::vector<size_t>{0, 1, 2}));
  ASSERT_EQ(r.rows.size(), 3u);
  EXPECT_EQ(r.rows[2].perReplicaBatch, 16);
  EXPECT_DOUBLE_EQ(r.rows[0].speedup, 1.0);
  for (const auto& row : r.rows) {
    EXPECT_EQ(row.globalBatch, 48);
    EXPECT_EQ(row.steps, 12);
    EXPECT_GT(row.stepSeconds, 0);
    EXPECT_NEAR(row.samplesPerSecond, 48 / row.stepSeconds, 1e-6 * row.samplesPerSecond);
    EXPECT_NEAR(row.speedup, row.samplesPerSecond / r.rows[0].samplesPerSecond, 1e-12);
    EXPECT_NEAR(row.efficiency, row.speedup / row.replicas, 1e-12);
    ASSERT_TRUE(row.runId.has_value());
  }
  EXPECT_EQ(r.rows[0].syncShare, 0.0);  // one replica never synchronises
  auto store = RunStore::open(db);
  const auto runs = store.listRuns();
  ASSERT_EQ(runs.size(), 3u);
  for (const auto& row : r.rows) {
    const auto d = store.loadRun(*row.runId);
    EXPECT_EQ(d.summary.replicas, row.replicas);
    EXPECT_EQ(d.summary.status, "finished");
    EXPECT_EQ(*d.steps, 12);
  }
  EXPECT_NE(r.explanation.find("3 devices ran"), std::string::npos) << r.explanation;
}

TEST(ScalingExperiment, KeepsThePerDeviceBatch) {
  const Project p = spirals();
  ScalingOptions o;
  o.devices = "cpu:1,2,4";
  o.keep = BatchPolicy::KeepPerDevice;
  o.steps = 3;
  ScalingExperiment e(p, dataOf(p), o);
  ASSERT_EQ(e.projects().size(), 3u);
  EXPECT_EQ(e.projects()[0].training.batchSize, 48);
  EXPECT_EQ(e.projects()[1].training.batchSize, 96);
  EXPECT_EQ(e.projects()[2].training.batchSize, 192);
  const auto r = e.run();
  ASSERT_TRUE(r.completed) << r.message;
  EXPECT_FALSE(r.rows[2].runId.has_value());  // no store given: nothing recorded
  EXPECT_EQ(r.rows[2].perReplicaBatch, 48);
  EXPECT_NE(r.explanation.find("weak scaling"), std::string::npos);
}

TEST(ScalingExperiment, RowFromStepsUsesTheMedianAfterWarmUp) {
  RunPlan plan;
  plan.replicas = 2;
  plan.globalBatch = 100;
  plan.perReplicaBatch = 50;
  std::vector<StepEvent> steps;
  // 20 steps: the first two (warm-up, 10%) are slow and must not count.
  for (int i = 0; i < 20; ++i) {
    PhaseTimes a{0.004, 0.004, 0.001, 0.001, 0.0}, b{0.004, 0.004, 0.002, 0.0, 0.0};
    steps.push_back(stepWith(i < 2 ? 1.0 : (i % 2 ? 0.010 : 0.012), {a, b}));
  }
  const ScalingRow row = scalingRowFromSteps("cpu:2", plan, steps);
  EXPECT_DOUBLE_EQ(row.stepSeconds, 0.012);  // 18 values, 9 of each: the upper median
  EXPECT_DOUBLE_EQ(row.samplesPerSecond, 100 / 0.012);
  EXPECT_NEAR(row.allreduceShare, 0.003 / 0.020, 1e-12);
  EXPECT_NEAR(row.waitShare, 0.001 / 0.020, 1e-12);
  EXPECT_NEAR(row.syncShare, 0.004 / 0.020, 1e-12);
}

TEST(ScalingExperiment, ExplainsWhatTheRowsShow) {
  std::vector<ScalingRow> rows(2);
  rows[0].replicas = 1;
  rows[0].samplesPerSecond = 1000;
  rows[0].syncShare = 0.01;
  rows[1].replicas = 4;
  rows[1].samplesPerSecond = 1500;
  rows[1].syncShare = 0.40;
  computeSpeedups(rows);
  EXPECT_DOUBLE_EQ(rows[1].speedup, 1.5);
  EXPECT_DOUBLE_EQ(rows[1].efficiency, 0.375);
  const std::string s = explainScaling(rows, BatchPolicy::KeepGlobal, 2);
  EXPECT_NE(s.find("4 devices ran 1.50x"), std::string::npos) << s;
  EXPECT_NE(s.find("from 1% to 40%"), std::string::npos) << s;
  EXPECT_NE(s.find("2 cores"), std::string::npos) << s;
}

TEST(ScalingExperiment, RefusesBadSettingsBeforeRunning) {
  const Project p = spirals();
  const auto data = dataOf(p);
  ScalingOptions o;
  o.devices = "tpu:1,2";
  EXPECT_THROW(ScalingExperiment(p, data, o), UserError);
  o.devices = "cpu:1,2";
  o.steps = 0;
  EXPECT_THROW(ScalingExperiment(p, data, o), UserError);
  o.steps = 5;
  Project big = p;
  big.training.batchSize = 1000000;  // more than the data set holds
  EXPECT_THROW(ScalingExperiment(big, data, o), UserError);
  mltest::TempDir dir("scaling-bad");
  mltest::writeFile(dir.path() / "not-a-store.sqlite", "hello, this is text");
  o.storePath = (dir.path() / "not-a-store.sqlite").string();
  EXPECT_THROW(ScalingExperiment(p, data, o), UserError);
  EXPECT_THROW(parseBatchPolicy("both"), UserError);
}
