// Long runs: a checkpoint file read back bit for bit and refused when damaged; the watchdog's hang
// diagnosis (an injected hang, a small T) ending the run failed without leaving it stuck; a
// straggler named with its device and phase; an injected NaN naming its replica; fault specs
// refused with the reason; an injected kill at its step.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "Error.h"
#include "distribute/Faults.h"
#include "support/TestData.h"
#include "train/Checkpoint.h"
#include "train/Trainer.h"

namespace {

ml::Project project(const std::string& devices, int units = 16) {
  ml::ModelSpec m;
  m.inputShape = {12};
  m.layers.push_back(ml::makeLayerSpec("Dense", {{"units", units}, {"activation", "relu"}}));
  if (units > 16) m.layers.push_back(ml::makeLayerSpec("Dense", {{"units", units}, {"activation", "relu"}}));
  m.layers.push_back(ml::makeLayerSpec("Dense", {{"units", 4}, {"activation", "softmax"}}));
  auto p = mltest::makeProject("long run test", std::move(m), devices, 48);
  p.training.seed = 7;
  return p;
}

std::shared_ptr<const ml::DataSplit> data(int64_t n = 480) { return mltest::makeSplit(n); }

std::vector<ml::Event> drain(ml::Channel& ch) { return mltest::drainAll(ch); }

TEST(Checkpoint, RoundTripsEveryFieldAndRefusesADamagedFile) {
  ml::Checkpoint c;
  c.runId = 12;
  c.architecture = {{"input_shape", {2}}, {"layers", nlohmann::json::array()}};
  c.optimizer = "adam";
  c.seed = 5;
  c.shuffleKey = 99;
  c.globalBatch = 24;
  c.replicas = 3;
  c.devices = "cpu:3";
  c.at.step = 15;
  c.at.epoch = 2;
  c.at.stepInEpoch = 5;
  c.at.lossSum = 1.25;
  c.at.lastValLoss = 0.5;
  c.params = {1.5f, -2.0f, 3.25f};
  c.optimizerSlots = {{0.1f, 0.2f, 0.3f}, {1e-7f, 2e-7f, 3e-7f}};
  c.optimizerIterations = 15;
  const std::string path = (std::filesystem::temp_directory_path() / "ml_ckpt_test.mlck").string();
  const uint64_t sum = ml::saveCheckpoint(c, path);
  EXPECT_NE(sum, 0u);
  const ml::Checkpoint r = ml::loadCheckpoint(path);
  EXPECT_EQ(r.runId, 12);
  EXPECT_EQ(r.params, c.params);
  EXPECT_EQ(r.optimizerSlots, c.optimizerSlots);
  EXPECT_EQ(r.optimizerIterations, 15);
  EXPECT_EQ(r.at.step, 15);
  EXPECT_EQ(r.at.stepInEpoch, 5);
  EXPECT_EQ(r.at.lossSum, 1.25);
  EXPECT_EQ(r.at.lastValLoss, std::optional<double>(0.5));
  EXPECT_FALSE(r.at.lastValMetric);
  EXPECT_EQ(r.architecture, c.architecture);
  EXPECT_FALSE(r.lossScale);  // a run without loss scaling
  {                           // mixed_float16's loss scale and its count of finite steps
    ml::Checkpoint scaled = c;
    scaled.lossScale = 4096.0;
    scaled.lossScaleGoodSteps = 7;
    const std::string p2 = path + ".scaled";
    ml::saveCheckpoint(scaled, p2);
    const ml::Checkpoint back = ml::loadCheckpoint(p2);
    EXPECT_EQ(back.lossScale, std::optional<double>(4096.0));
    EXPECT_EQ(back.lossScaleGoodSteps, 7);
    std::filesystem::remove(p2);
  }
  {  // one flipped bit in the parameters
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-30, std::ios::end);
    char b = 0;
    f.read(&b, 1);
    b ^= 0x10;
    f.seekp(-30, std::ios::end);
    f.write(&b, 1);
  }
  try {
    ml::loadCheckpoint(path);
    FAIL() << "a damaged checkpoint was read";
  } catch (const ml::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("damaged (checksum mismatch)"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

TEST(Faults, SpecsAreParsedAndBadOnesNamed) {
  const auto devices = ml::parseDevices("cpu:3");
  const auto plan = ml::parseFaults({"slow:cpu:1=3x", "hang:cpu:2@step=50", "nan:cpu:0@step=20", "kill@step=30"}, devices);
  EXPECT_DOUBLE_EQ(plan.slowFactor(1), 3.0);
  EXPECT_DOUBLE_EQ(plan.slowFactor(0), 1.0);
  EXPECT_EQ(plan.hangReplica, 2);
  EXPECT_EQ(plan.hangStep, 50);
  EXPECT_EQ(plan.nanReplica, 0);
  EXPECT_EQ(plan.nanStep, 20);
  EXPECT_EQ(plan.killStep, 30);
  EXPECT_EQ(plan.killPoint, ml::FaultPlan::KillPoint::AfterStep);
  // The two sides of a checkpoint's file (cli.kill_resume kills there).
  EXPECT_EQ(ml::parseFaults({"kill:before-checkpoint@step=8"}, devices).killPoint, ml::FaultPlan::KillPoint::BeforeCheckpoint);
  const auto after = ml::parseFaults({"kill:after-checkpoint@step=8"}, devices);
  EXPECT_EQ(after.killPoint, ml::FaultPlan::KillPoint::AfterCheckpoint);
  EXPECT_EQ(after.killStep, 8);
  auto refused = [&](const std::string& spec, const std::string& words) {
    try {
      ml::parseFaults({spec}, devices);
      ADD_FAILURE() << spec << " was accepted";
    } catch (const ml::UserError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  refused("slow:cpu:7=3x", "'cpu:7' is not one of this run's devices");
  refused("hang:cpu:1", "hang needs a device and @step=N");
  refused("slow:cpu:1=0.5x", "factor must be a number from 1 to 1000");
  refused("melt:cpu:1", "unknown kind 'melt'");
  refused("kill@step=0", "not a step number");
  refused("kill:cpu:1@step=3", "only before-checkpoint or after-checkpoint");
}

// T = 0.3 s: the hang at step 5 (the first step's 10x allowance is long over) ends the run failed
// with the diagnosis, and run() returns: the injected hang is released.
TEST(Watchdog, AHangStopsTheRunWithAPlainDiagnosis) {
  auto p = project("cpu:3");
  p.distribute.hangSeconds = 0.3;
  p.distribute.faults = {ml::parseFault("hang:cpu:2@step=5")};
  ml::TelemetryHub hub;
  auto ch = hub.subscribe(1 << 14);
  ml::Trainer t(p, data(), hub);
  const ml::RunFinished f = t.run();
  EXPECT_EQ(f.status, ml::RunStatus::Failed);
  EXPECT_NE(f.message.find("replica 2 (cpu:2) has not finished backward of step 5 for "), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("the other 2 replicas are waiting in the all-reduce of bucket 1"), std::string::npos) << f.message;
  EXPECT_LE(f.steps, 5);
  bool tagged = false;
  for (const auto& e : drain(*ch))
    if (const auto* s = std::get_if<ml::RunStarted>(&e)) tagged = s->tags == std::vector<std::string>{"fault injected"};
  EXPECT_TRUE(tagged);
}

// A replica whose compute takes 20x longer arrives at the all-reduce ~19 compute times late: the
// warning names it, its device and the phase its extra time is in; the fast replicas' waiting
// share shows it. (StragglerTest.cpp checks the rule itself, with timings made by hand.)
TEST(Watchdog, AStragglerIsNamedWithItsDeviceAndPhase) {
  auto p = project("cpu:2", 256);
  p.training.epochs = 12;
  p.training.batchSize = 480;
  p.distribute.faults = {ml::parseFault("slow:cpu:1=20x")};
  ml::TelemetryHub hub;
  auto ch = hub.subscribe(1 << 14);
  ml::TrainerOptions o;
  o.maxSteps = 22;  // the watchdog judges a window of 16 steps
  ml::Trainer t(p, data(960), hub, o);
  ASSERT_EQ(t.run().status, ml::RunStatus::Finished);
  std::vector<ml::WatchdogWarning> warnings;
  double wait0 = 0, wait1 = 0;
  for (const auto& e : drain(*ch)) {
    if (const auto* w = std::get_if<ml::WatchdogWarning>(&e)) warnings.push_back(*w);
    if (const auto* s = std::get_if<ml::StepEvent>(&e)) {
      wait0 += s->replicas[0].phases.wait;
      wait1 += s->replicas[1].phases.wait;
    }
  }
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].replica, 1);
  EXPECT_EQ(warnings[0].device, "cpu:1");
  EXPECT_EQ(warnings[0].phase, "backward");
  EXPECT_GT(warnings[0].lateSeconds, warnings[0].typicalSeconds);
  EXPECT_NE(warnings[0].message.find("replica 1 (cpu:1) is a straggler"), std::string::npos) << warnings[0].message;
  EXPECT_GT(wait0, 3 * wait1) << "the fast replica waits for the slow one";
}

TEST(Faults, AnInjectedNanNamesItsReplicaAndStep) {
  auto p = project("cpu:3");
  p.distribute.faults = {ml::parseFault("nan:cpu:1@step=4")};
  ml::TelemetryHub hub;
  ml::Trainer t(p, data(), hub);
  const ml::RunFinished f = t.run();
  EXPECT_EQ(f.status, ml::RunStatus::Diverged);
  EXPECT_EQ(f.steps, 4);
  EXPECT_NE(f.message.find("non-finite gradient at step 4 (epoch 1) on replica 1 (cpu:1) (an injected nan fault)"),
            std::string::npos)
      << f.message;
}

TEST(Faults, AnInjectedKillHappensAfterItsStep) {
  auto p = project("cpu:2");
  p.distribute.faults = {ml::parseFault("kill@step=7")};
  ml::TelemetryHub hub;
  auto ch = hub.subscribe(1 << 14);
  ml::TrainerOptions o;
  o.killEndsRunWith = "killed";  // the run ends where the process would have died
  ml::Trainer t(p, data(), hub, o);
  const ml::RunFinished f = t.run();
  EXPECT_EQ(f.status, ml::RunStatus::Failed);
  EXPECT_EQ(f.steps, 7);
  EXPECT_EQ(f.message, "killed (training stopped after step 7)");
  int64_t lastStep = 0;
  for (const auto& e : drain(*ch))
    if (const auto* s = std::get_if<ml::StepEvent>(&e)) lastStep = s->step;
  EXPECT_EQ(lastStep, 7);
}

}  // namespace
