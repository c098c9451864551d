// Two promises the studio's comparisons rest on: the learning rate follows the global batch (one
// rule, in per-device and global batch modes alike), and paused time is not training time.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "project/LrScaling.h"
#include "support/TestData.h"
#include "train/Trainer.h"

namespace {

ml::Project project(const std::string& devices, int64_t batch, bool perDevice, const std::string& rule) {
  auto p = mltest::makeProject("honest", mltest::makeModel(true), devices, batch);
  p.training.epochs = 3;
  p.training.perDeviceBatch = perDevice;
  p.training.lrScaling = ml::parseLrRule(rule).value();
  p.training.optimizer.learningRate = 0.01;
  return p;
}

TEST(LrScaling, GlobalBatchModeWithAnUnchangedBatchChangesNothing) {
  const auto plan = ml::planRun(project("cpu:3", 16, false, "linear"), 3, 178);
  EXPECT_EQ(plan.globalBatch, 16);
  EXPECT_DOUBLE_EQ(plan.lr, 0.01);
  EXPECT_NE(plan.sentence().find(
                "0.01 was set for a global batch of 16 and the global batch is still 16, so linear scaling changes nothing"),
            std::string::npos)
      << plan.sentence();
}

TEST(LrScaling, PerDeviceModeScalesWithTheGlobalBatch) {
  const auto plan = ml::planRun(project("cpu:3", 16, true, "linear"), 3, 178);
  EXPECT_EQ(plan.globalBatch, 48);
  EXPECT_DOUBLE_EQ(plan.lr, 0.03);
  EXPECT_NE(plan.sentence().find(
                "0.01 was set for a global batch of 16; the global batch is 48, so linear scaling gives 0.01 x 3 = 0.03"),
            std::string::npos)
      << plan.sentence();
  const auto sq = ml::planRun(project("cpu:4", 16, true, "sqrt"), 4, 178);
  EXPECT_DOUBLE_EQ(sq.lr, 0.02);
}

TEST(LrScaling, AReferenceBatchScalesAGlobalBatchChosenByHand) {
  auto p = project("cpu:2", 64, false, "linear");
  p.training.lrReferenceBatch = 16;
  const auto plan = ml::planRun(p, 2, 600);
  EXPECT_DOUBLE_EQ(plan.lr, 0.04);
  // The field survives a round trip and is absent from files that rely on the default.
  EXPECT_EQ(ml::Project::fromJson(p.toJson()).training.lrReferenceBatch, 16);
  EXPECT_FALSE(project("cpu:2", 64, false, "linear").toJson()["training"].contains("lr_reference_batch"));
  // Accumulation grows the global batch, so the rule grows the rate too.
  auto acc = project("cpu:2", 16, true, "linear");
  acc.training.accumulate = 2;
  EXPECT_DOUBLE_EQ(ml::planRun(acc, 2, 600).lr, 0.04);
  EXPECT_NE(ml::lrScalingPython().find("global_batch / REFERENCE_BATCH"), std::string::npos);
}

struct Timed {
  std::vector<ml::EpochEvent> epochs;
  std::vector<ml::RunPaused> pauses;
  ml::RunFinished fin;
  double realSeconds = 0;  // the test's own clock around run(), the pause included
};

// Trains 3 epochs of kSamples samples; when pauseSeconds > 0, pauses that long early in epoch 2
// (epochs long enough, 0.1 s or more, that a pauser thread starved on a loaded machine still
// pauses before the run ends).
constexpr int64_t kSamples = 60000;
Timed train(double pauseSeconds) {
  auto data = std::make_shared<ml::DataSplit>();
  data->train = mltest::makeClassification(kSamples);
  ml::TelemetryHub hub;
  auto ch = hub.subscribe(1 << 16);
  auto watch = hub.subscribe(1 << 16);
  ml::Trainer t(project("cpu:2", 32, false, "none"), data, hub);
  std::thread pauser;
  if (pauseSeconds > 0) {
    pauser = std::thread([&] {
      std::vector<ml::Event> seen;
      bool paused = false;
      while (!paused) {  // pause once the first step of epoch 2 is done
        watch->drain(seen);
        for (const auto& e : seen)
          if (const auto* s = std::get_if<ml::StepEvent>(&e); s && s->epoch == 2) paused = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      t.setPaused(true);
      std::this_thread::sleep_for(std::chrono::duration<double>(pauseSeconds));
      t.setPaused(false);
    });
  }
  Timed out;
  const auto t0 = std::chrono::steady_clock::now();
  out.fin = t.run();
  out.realSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (pauser.joinable()) pauser.join();
  std::vector<ml::Event> events;
  ch->drain(events);
  for (const auto& e : events) {
    if (const auto* ep = std::get_if<ml::EpochEvent>(&e)) out.epochs.push_back(*ep);
    if (const auto* pa = std::get_if<ml::RunPaused>(&e)) out.pauses.push_back(*pa);
  }
  return out;
}

// Every check compares clocks of the same run with each other, never with another run's speed: on a
// loaded 2-core machine one epoch can take twice another, so "within noise" would be a coin toss.
TEST(HonestTime, APausedRunHasTheEpochTimesOfAnUnpausedOne) {
  const Timed plain = train(0), paused = train(2.0);
  ASSERT_EQ(plain.epochs.size(), 3u);
  ASSERT_EQ(paused.epochs.size(), 3u);
  // The pause is its own event, with its real length (the pauser slept 2 s in it).
  ASSERT_EQ(paused.pauses.size(), 1u);
  EXPECT_GE(paused.pauses[0].seconds, 1.9);
  // The run's time leaves it out: the test's own clock around run() saw the pause and the training;
  // the run's seconds are at most that less the pause (a counted pause would leave only the few
  // milliseconds run() spends outside its clock).
  EXPECT_LE(paused.fin.seconds, paused.realSeconds - paused.pauses[0].seconds + 1e-3)
      << "run " << paused.fin.seconds << " s, real " << paused.realSeconds << " s, pause " << paused.pauses[0].seconds << " s";
  EXPECT_LE(plain.fin.seconds, plain.realSeconds + 1e-3);
  // The epoch that held the pause leaves it out too: the epochs are disjoint spans of the run's
  // clock, so their times add up to no more than the clock at the last epoch's end, and that to no
  // more than the run's seconds. An epoch that counted the 2 s would break the chain by about 2 s.
  double sum = 0;
  for (const auto& ep : paused.epochs) sum += ep.seconds;
  EXPECT_LE(sum, paused.epochs.back().wallTime + 1e-6);
  EXPECT_LE(paused.epochs.back().wallTime, paused.fin.seconds + 1e-6);
  size_t held = 0;
  while (held + 1 < paused.epochs.size() && paused.epochs[held].wallTime < paused.pauses[0].wallTime) ++held;
  const auto& e = paused.epochs[held];
  // The held epoch's throughput is its samples over those seconds, as an unpaused epoch's is.
  EXPECT_NEAR(e.samplesPerSec * e.seconds, plain.epochs[0].samplesPerSec * plain.epochs[0].seconds, 1.0);
}

}  // namespace
