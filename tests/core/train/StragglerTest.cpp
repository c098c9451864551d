// The straggler rule, relative at every scale: a replica whose compute is the slowest at all but
// one step of the window, later than a replica's compute time and by a share of the step, is named;
// jitter that takes turns, a sliver of a long step and lateness below the compute time are not.
// Fed with step timings made by hand (exact, no clock), then the lesson "One slow device slows
// them all" trained for real: its slow device is named on the small spirals model.
#include <gtest/gtest.h>

#include <filesystem>

#include "data/Dataset.h"
#include "distribute/MirroredStrategy.h"
#include "learn/Lesson.h"
#include "support/TestData.h"
#include "train/Trainer.h"
#include "train/Watchdog.h"

#ifndef MIRRORLAB_SOURCE_DIR
#define MIRRORLAB_SOURCE_DIR "."
#endif

namespace {

class Straggler : public ::testing::Test {
 protected:
  Straggler()
      : strategy_(mltest::makeModel(false), ml::Loss::make(ml::LossKind::SparseCategoricalCrossentropy, false),
                  ml::MetricKind::Accuracy, ml::OptimizerSpec{}, options()) {}
  static ml::StrategyOptions options() {
    ml::StrategyOptions so;
    so.devices = ml::parseDevices("cpu:2");
    return so;
  }
  // One step: both replicas compute `compute` seconds; `late[r]` more for replica r; the step
  // lasts the slower one's arrival plus `rest` (all-reduce and optimizer).
  static ml::StepEvent step(int64_t n, double compute, std::array<double, 2> late, double rest) {
    ml::StepEvent ev;
    ev.step = n;
    for (int r = 0; r < 2; ++r) {
      ml::ReplicaStep rs;
      rs.replica = r;
      rs.start = 0;
      rs.phases.forward = compute / 3;
      rs.phases.backward = 2 * compute / 3 + late[static_cast<size_t>(r)];
      ev.replicas.push_back(rs);
    }
    ev.stepTime = compute + std::max(late[0], late[1]) + rest;
    return ev;
  }
  // Feeds the steps and returns the warnings, in order.
  std::vector<ml::WatchdogWarning> feed(const std::vector<ml::StepEvent>& steps) {
    ml::WatchdogOptions o;
    o.hangSeconds = 1e6;  // the hang thread plays no part here
    ml::Watchdog w(strategy_, o, [](const std::string&) {});
    std::vector<ml::WatchdogWarning> out;
    for (const auto& s : steps)
      if (auto warning = w.afterStep(s)) out.push_back(*warning);
    return out;
  }

  ml::MirroredStrategy strategy_;
};

TEST_F(Straggler, ASmallModelsSlowReplicaIsNamed) {
  // 0.1 ms of compute, replica 1 3x slower: 0.2 ms late, two thirds of a 0.3 ms step. The old
  // 5 ms floor hid it (and the 10x slower replica, whose wait was 44.8% of the time).
  std::vector<ml::StepEvent> steps;
  for (int64_t i = 1; i <= 30; ++i) steps.push_back(step(i, 1e-4, {0, 2e-4}, 1e-5));
  const auto w = feed(steps);
  ASSERT_EQ(w.size(), 1u) << "named once, not at every step";
  EXPECT_EQ(w[0].replica, 1);
  EXPECT_EQ(w[0].step, 16) << "after one window of 16 steps";
  EXPECT_NEAR(w[0].lateSeconds, 2e-4, 1e-12);
  EXPECT_NE(w[0].message.find("replica 1 (cpu:1) is a straggler"), std::string::npos) << w[0].message;
  EXPECT_NE(w[0].message.find("(65% of a step)"), std::string::npos) << w[0].message;
  // The same shape a thousand times larger is named alike: the rule has no absolute scale.
  steps.clear();
  for (int64_t i = 1; i <= 30; ++i) steps.push_back(step(i, 0.1, {0, 0.2}, 0.01));
  ASSERT_EQ(feed(steps).size(), 1u);
  // One step in the window where another replica was held up (a hiccup) does not hide it.
  steps.clear();
  for (int64_t i = 1; i <= 16; ++i) steps.push_back(i == 9 ? step(i, 1e-4, {5e-4, 2e-4}, 1e-5) : step(i, 1e-4, {0, 2e-4}, 1e-5));
  ASSERT_EQ(feed(steps).size(), 1u);
}

TEST_F(Straggler, JitterThatTakesTurnsIsNotNamed) {
  // Each replica is the late one at random, by twice the compute: neither is last at 15 of 16 steps.
  std::vector<ml::StepEvent> steps;
  uint64_t x = 12345;
  for (int64_t i = 1; i <= 400; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const int r = static_cast<int>((x >> 33) % 2);
    std::array<double, 2> late{0, 0};
    late[static_cast<size_t>(r)] = 2e-4;
    steps.push_back(step(i, 1e-4, late, 1e-5));
  }
  EXPECT_TRUE(feed(steps).empty());
}

TEST_F(Straggler, AThreadThatStartsLateIsNotASlowDevice) {
  // Replica 1's thread wakes 5 ms after replica 0's at every step (a loaded machine, seen here at
  // load 17 on 2 cores) but computes as fast: the host's scheduling, not its device.
  std::vector<ml::StepEvent> steps;
  for (int64_t i = 1; i <= 40; ++i) {
    ml::StepEvent ev = step(i, 6e-4, {0, 0}, 1e-4);
    ev.replicas[1].start = 5e-3;
    ev.stepTime += 5e-3;
    steps.push_back(ev);
  }
  EXPECT_TRUE(feed(steps).empty());
}

TEST_F(Straggler, LatenessBelowTheComputeOrASliverOfTheStepIsNotNamed) {
  std::vector<ml::StepEvent> steps;
  // Always last, but by half its compute time.
  for (int64_t i = 1; i <= 40; ++i) steps.push_back(step(i, 1e-3, {0, 5e-4}, 1e-4));
  EXPECT_TRUE(feed(steps).empty());
  // Always last by twice the compute, but in a step 100x longer (a large all-reduce): 0.4% of it.
  steps.clear();
  for (int64_t i = 1; i <= 40; ++i) steps.push_back(step(i, 1e-4, {0, 2e-4}, 5e-2));
  EXPECT_TRUE(feed(steps).empty());
  // Raised above the share, it is named.
  steps.clear();
  for (int64_t i = 1; i <= 40; ++i) steps.push_back(step(i, 1e-4, {0, 2e-4}, 1e-3));
  EXPECT_EQ(feed(steps).size(), 1u);
}

// The lesson as shipped: spirals, 2 devices, global batch 1024, cpu:1 3x slower (a sleep of twice
// its own compute before its backward), 30 steps. Its slow device is named, from its own timings.
TEST(StragglerLesson, TheSlowDeviceOfTheLessonIsNamed) {
  const std::string dir = std::string(MIRRORLAB_SOURCE_DIR) + "/projects";
  const ml::Lesson lesson = ml::loadLesson(dir + "/lessons/07-one-slow-device.json", dir);
  const ml::LessonExperiment* slow = nullptr;
  for (const auto& x : lesson.experiments)
    if (x.label == "slow") slow = &x;
  ASSERT_NE(slow, nullptr);
  const ml::Project p = slow->apply(lesson.project);
  ASSERT_EQ(ml::faultTexts(p.distribute.faults), std::vector<std::string>{"slow:cpu:1=3x"});
  ml::TelemetryHub hub;
  auto ch = hub.subscribe(1 << 14);
  ml::TrainerOptions o;
  o.maxSteps = slow->steps;
  ml::Trainer t(p, std::make_shared<ml::DataSplit>(ml::loadData(p.data)), hub, o);
  ASSERT_EQ(t.run().status, ml::RunStatus::Finished);
  std::vector<ml::WatchdogWarning> warnings;
  for (const auto& e : mltest::drainAll(*ch))
    if (const auto* w = std::get_if<ml::WatchdogWarning>(&e)) warnings.push_back(*w);
  ASSERT_FALSE(warnings.empty()) << "the lesson's slow device was not named";
  EXPECT_EQ(warnings[0].replica, 1);
  EXPECT_EQ(warnings[0].device, "cpu:1");
  EXPECT_GT(warnings[0].lateSeconds, warnings[0].typicalSeconds);
}

}  // namespace
