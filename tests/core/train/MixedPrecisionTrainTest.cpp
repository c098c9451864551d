// Mixed precision through the trainer: the step events carry the loss scale and the skipped
// steps as they happened, and a policy the chosen devices cannot run is refused by its field.
#include <gtest/gtest.h>

#include "backend/DeviceProbe.h"

#include <cmath>
#include <filesystem>
#include <map>

#include "Error.h"
#include "backend/DeviceProbe.h"
#include "store/RunStore.h"
#include "support/TestData.h"
#include "train/Checkpoint.h"
#include "train/RecordedRun.h"
#include "train/Trainer.h"

namespace {

using mltest::drainAll;

ml::Project makeProject(const std::string& devices, const std::string& precision) {
  auto p = mltest::makeProject("mixed precision", mltest::makeModel(false), devices, 32);
  p.training.optimizer.learningRate = 0.01;
  p.training.precision = ml::parsePrecision(precision).value();
  return p;
}

TEST(MixedPrecisionTrainer, StepEventsCarryTheScaleAndTheSkippedSteps) {
  ml::Project p = makeProject("cpu:2", "mixed_float16");
  p.training.lossScale = std::ldexp(1.0, 24);  // overflows float16 until it has halved enough
  p.training.lossScaleGrowthSteps = 4;
  ml::TelemetryHub hub;
  auto ch = hub.subscribe(1 << 14);
  ml::TrainerOptions o;
  o.maxSteps = 24;
  ml::Trainer t(p, mltest::makeSplit(600, 100), hub, o);
  const auto fin = t.run();
  ASSERT_EQ(fin.status, ml::RunStatus::Finished) << fin.message;
  std::vector<ml::StepEvent> steps;
  for (const auto& e : drainAll(*ch))
    if (const auto* s = std::get_if<ml::StepEvent>(&e)) steps.push_back(*s);
  ASSERT_EQ(steps.size(), 24u);
  // Each event's scale follows from the ones before: halved after a skipped step, doubled after 4
  // finite steps in a row, unchanged otherwise.
  EXPECT_EQ(steps[0].lossScale, std::ldexp(1.0, 24));
  EXPECT_TRUE(steps[0].skipped);
  int skipped = 0, finiteRun = 0;
  for (size_t k = 1; k < steps.size(); ++k) {
    const ml::StepEvent& prev = steps[k - 1];
    skipped += prev.skipped ? 1 : 0;
    finiteRun = prev.skipped ? 0 : finiteRun + 1;
    double want = prev.lossScale;
    if (prev.skipped) want /= 2;
    if (finiteRun == 4) {
      want *= 2;
      finiteRun = 0;
    }
    EXPECT_EQ(steps[k].lossScale, want) << "step " << steps[k].step;
  }
  EXPECT_GE(skipped, 3);
  EXPECT_LT(skipped, 20);
  for (const auto& s : steps) EXPECT_TRUE(std::isfinite(s.loss)) << "step " << s.step;
}

// The scale of each step, by step number.
std::map<int64_t, double> scalesOf(ml::Channel& ch) {
  std::map<int64_t, double> m;
  for (const auto& e : drainAll(ch))
    if (const auto* s = std::get_if<ml::StepEvent>(&e)) m[s->step] = s->lossScale;
  return m;
}

// A float16 run resumed from a checkpoint goes on with the scale it had there (halved from 2^24 by
// the overflows of its first steps, doubled after 5 finite steps), not from the initial scale:
// each resumed step has the uninterrupted run's scale.
TEST(MixedPrecisionTrainer, AResumedRunGoesOnWithTheCheckpointsLossScale) {
  const auto dir = std::filesystem::temp_directory_path() / ("ml_scale_resume_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string store = (dir / "runs.sqlite").string();
  ml::Project p = makeProject("cpu:2", "mixed_float16");
  p.training.lossScale = std::ldexp(1.0, 24);
  p.training.lossScaleGrowthSteps = 5;
  p.training.checkpointEvery = 12;
  p.training.checkpointInSteps = true;
  const auto data = mltest::makeSplit(600, 100);

  ml::RecordedRunOptions a;
  a.trainer.maxSteps = 24;
  a.storePath = store;
  ml::RecordedRun recorded(p, data, a);
  auto chA = recorded.subscribe(1 << 14);
  const auto result = recorded.run();
  ASSERT_EQ(result.finished.status, ml::RunStatus::Finished);
  ASSERT_TRUE(result.runId.has_value());
  const auto uninterrupted = scalesOf(*chA);

  const ml::Checkpoint ck = ml::loadCheckpoint(ml::checkpointFile(ml::checkpointFolder(store, *result.runId), 12));
  ASSERT_TRUE(ck.lossScale);
  EXPECT_LT(*ck.lossScale, std::ldexp(1.0, 24));   // the scale moved before the checkpoint
  EXPECT_EQ(*ck.lossScale, uninterrupted.at(13));  // the scale of the step after it

  ml::TelemetryHub hubB;
  auto chB = hubB.subscribe(1 << 14);
  ml::TrainerOptions b;
  b.maxSteps = 24;
  b.resume = ck;
  ASSERT_EQ(ml::Trainer(p, data, hubB, b).run().status, ml::RunStatus::Finished);
  const auto resumed = scalesOf(*chB);
  ASSERT_EQ(resumed.size(), 12u);
  for (const auto& [step, scale] : resumed) EXPECT_EQ(scale, uninterrupted.at(step)) << "step " << step;
  std::filesystem::remove_all(dir);
}

TEST(MixedPrecisionTrainer, Bfloat16AndFloat32RunsHaveNoLossScale) {
  for (const char* precision : {"float32", "mixed_bfloat16"}) {
    ml::TelemetryHub hub;
    auto ch = hub.subscribe(1 << 14);
    ml::TrainerOptions o;
    o.maxSteps = 3;
    ml::Trainer t(makeProject("cpu:2", precision), mltest::makeSplit(600), hub, o);
    ASSERT_EQ(t.run().status, ml::RunStatus::Finished);
    for (const auto& e : drainAll(*ch)) {
      if (const auto* s = std::get_if<ml::StepEvent>(&e)) {
        EXPECT_EQ(s->lossScale, 0.0) << precision;
        EXPECT_FALSE(s->skipped) << precision;
      } else if (const auto* st = std::get_if<ml::RunStarted>(&e)) {
        EXPECT_EQ(st->description.find("precision ") != std::string::npos, std::string(precision) != "float32")
            << st->description;
      }
    }
  }
}

// GPUs run the mixed policies now (tests/gpu/test_gpu_training_mixed.cpp holds them against the CPU
// on the fake plugin): the policy is not what refuses a GPU run. On a machine without a GPU the
// refusal names the missing GPU and the CPU devices to use instead, whatever the precision.
TEST(MixedPrecisionTrainer, AGpuRunWithAMixedPolicyIsNotRefusedForItsPrecision) {
  if (!ml::probeDevices().gpus.empty()) GTEST_SKIP() << "this machine has a GPU: tests/gpu covers the run";
  for (const char* precision : {"float32", "mixed_bfloat16", "mixed_float16"}) {
    ml::TelemetryHub hub;
    try {
      ml::Trainer t(makeProject("gpu:0", precision), mltest::makeSplit(100), hub);
      FAIL() << "a GPU run was accepted on a machine without a GPU";
    } catch (const ml::UserError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("asks for GPUs"), std::string::npos) << precision << ": " << m;
      EXPECT_NE(m.find("cpu:N"), std::string::npos) << precision << ": " << m;
      EXPECT_EQ(m.find("Precision"), std::string::npos) << precision << ": " << m;
    }
  }
}

}  // namespace
