// The training loop: plan arithmetic, learning-rate rule and warm-up, pinned losses of a
// fixed-seed run, cancellation, divergence naming the step and replica, dropped telemetry.
#include <gtest/gtest.h>

#include <thread>

#include "Error.h"
#include "nn/Sgemm.h"
#include "support/TestData.h"
#include "train/Trainer.h"

namespace {

using mltest::drainAll;

ml::Project makeProject(const std::string& devices, int64_t batch) {
  auto p = mltest::makeProject("trainer test", mltest::makeModel(true), devices, batch);
  p.training.optimizer.learningRate = 0.01;
  return p;
}

std::shared_ptr<const ml::DataSplit> makeData(int64_t n = 600) { return mltest::makeSplit(n, 200); }

TEST(RunPlan, SpellsOutReplicasBatchAndLearningRate) {
  auto p = makeProject("cpu:4", 64);
  p.training.perDeviceBatch = true;
  p.training.lrScaling = "linear";
  p.training.warmupEpochs = 1;
  p.training.optimizer.learningRate = 0.001;
  const auto plan = ml::planRun(p, 4, 60000);
  EXPECT_EQ(plan.globalBatch, 256);
  EXPECT_EQ(plan.perReplicaBatch, 64);
  EXPECT_DOUBLE_EQ(plan.lr, 0.004);
  EXPECT_EQ(plan.stepsPerEpoch, 235);
  EXPECT_EQ(
      plan.sentence(),
      "4 replicas x 64 = 256 samples per step; learning rate 0.004 (0.001 was set for a global batch of 64; the global batch "
      "is 256, so linear scaling gives 0.001 x 4 = 0.004), 1 epoch warm-up");
}

TEST(RunPlan, ImpossibleBatchesAreUserErrorsAndSmallOnesWarn) {
  auto p = makeProject("cpu:4", 100000);
  try {
    ml::planRun(p, 4, 60000);
    FAIL();
  } catch (const ml::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("larger than the training set (60000 samples)"), std::string::npos) << e.what();
  }
  p.training.batchSize = 3;
  const auto plan = ml::planRun(p, 4, 60000);
  ASSERT_FALSE(plan.warnings.empty());
  EXPECT_NE(plan.warnings[0].find("smaller than the number of replicas"), std::string::npos);
  p.training.perDeviceBatch = true;
  p.training.batchSize = 64;
  EXPECT_NE(ml::planRun(p, 4, 60000).warnings.back().find("learning rate is unscaled"), std::string::npos);
}

TEST(Trainer, FirstTenLossesOfAFixedSeedRunArePinned) {
  // Regenerate only on purpose: a change here means training is no longer the same computation.
  const double pinned[10] = {1.563115, 1.396753, 1.397063, 1.303889, 1.286757, 1.235246, 1.276163, 1.330096, 1.271741, 1.248066};
  for (const char* devices : {"cpu:1", "cpu:3"}) {
    ml::TelemetryHub hub;
    auto ch = hub.subscribe();
    ml::TrainerOptions o;
    o.maxSteps = 10;
    ml::Trainer t(makeProject(devices, 32), makeData(), hub, o);
    const auto fin = t.run();
    ASSERT_EQ(fin.status, ml::RunStatus::Finished) << fin.message;
    int k = 0;
    for (const auto& e : drainAll(*ch))
      if (const auto* s = std::get_if<ml::StepEvent>(&e)) {
        ASSERT_LT(k, 10);
        EXPECT_NEAR(s->loss, pinned[k], 2e-5) << devices << " step " << s->step;
        ++k;
      }
    EXPECT_EQ(k, 10);
  }
}

TEST(Trainer, TheRunIsInTheStoreBeforeItsFirstStep) {
  // A process killed at step 1 must leave a stored run (marked interrupted later), so the trainer
  // waits for the recorder's run id before it steps; here the id arrives 50 ms late, as on a
  // loaded machine, and no step may have been published by then.
  ml::TelemetryHub hub;
  auto ch = hub.subscribe(1 << 14);
  ml::TrainerOptions o;
  o.maxSteps = 5;
  struct LateRecord : ml::RunRecord {  // the store's answer, 50 ms late
    std::shared_ptr<ml::Channel> ch;
    std::string path;
    int calls = 0;
    int64_t stepsSeenAtCall = -1;
    const std::string& storePath() const override { return path; }
    std::optional<int64_t> awaitRunId() override {
      ++calls;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      stepsSeenAtCall = 0;
      for (const auto& e : drainAll(*ch)) stepsSeenAtCall += std::holds_alternative<ml::StepEvent>(e);
      return 7;
    }
    bool awaitStep(int64_t) override { return true; }
  } record;
  record.ch = ch;
  o.record = &record;
  ml::Trainer t(makeProject("cpu:2", 32), makeData(), hub, o);
  ASSERT_EQ(t.run().status, ml::RunStatus::Finished);
  EXPECT_EQ(record.calls, 1);
  EXPECT_EQ(record.stepsSeenAtCall, 0);
  int steps = 0;
  for (const auto& e : drainAll(*ch)) steps += std::holds_alternative<ml::StepEvent>(e);
  EXPECT_EQ(steps, 5);
}

TEST(Trainer, WarmupRampsFromTheBaseToTheScaledRate) {
  auto p = makeProject("cpu:2", 60);
  p.training.lrScaling = "linear";
  p.training.lrReferenceBatch = 30;  // the rate was set for 30: a global batch of 60 doubles it
  p.training.warmupEpochs = 1;       // 10 steps of 60 over 600 samples
  ml::TelemetryHub hub;
  auto ch = hub.subscribe();
  ml::TrainerOptions o;
  o.maxSteps = 12;
  ml::Trainer t(p, makeData(), hub, o);
  EXPECT_DOUBLE_EQ(t.plan().lr, 0.02);
  ASSERT_EQ(t.run().status, ml::RunStatus::Finished);
  std::vector<double> lrs;
  for (const auto& e : drainAll(*ch))
    if (const auto* s = std::get_if<ml::StepEvent>(&e)) lrs.push_back(s->lr);
  ASSERT_EQ(lrs.size(), 12u);
  EXPECT_DOUBLE_EQ(lrs[0], 0.01);
  EXPECT_NEAR(lrs[5], 0.015, 1e-12);
  EXPECT_DOUBLE_EQ(lrs[10], 0.02);
  EXPECT_DOUBLE_EQ(lrs[11], 0.02);
}

// Step decay after finished epochs, on top of the warm-up: epoch 1 ramps 0.01 -> 0.02, epoch 2 runs
// at 0.02 x 0.5, epoch 3 at 0.02 x 0.25; the start lines say so.
TEST(Trainer, StepDecayMultipliesTheRateAfterTheListedEpochs) {
  auto p = makeProject("cpu:2", 60);
  p.training.lrScaling = "linear";
  p.training.lrReferenceBatch = 30;
  p.training.warmupEpochs = 1;  // 10 steps of 60 over 600 samples
  p.training.epochs = 3;
  p.training.lrDecayEpochs = {1, 2};
  p.training.lrDecayFactor = 0.5;
  ml::TelemetryHub hub;
  auto ch = hub.subscribe();
  ml::Trainer t(p, makeData(), hub);
  ASSERT_EQ(t.run().status, ml::RunStatus::Finished);
  std::vector<double> lrs;
  for (const auto& e : drainAll(*ch))
    if (const auto* s = std::get_if<ml::StepEvent>(&e)) lrs.push_back(s->lr);
  ASSERT_EQ(lrs.size(), 30u);
  EXPECT_DOUBLE_EQ(lrs[0], 0.01);
  EXPECT_NEAR(lrs[5], 0.015, 1e-12);
  EXPECT_NEAR(lrs[9], 0.019, 1e-12);
  for (int i = 10; i < 20; ++i) EXPECT_DOUBLE_EQ(lrs[static_cast<size_t>(i)], 0.01) << i;
  for (int i = 20; i < 30; ++i) EXPECT_DOUBLE_EQ(lrs[static_cast<size_t>(i)], 0.005) << i;
  bool said = false;
  for (const auto& line : t.startLines()) said |= line.find("; multiplied by 0.5 after epochs 1 and 2") != std::string::npos;
  EXPECT_TRUE(said);
}

// The start lines name the kernel of the Dense products: oneDNN's matmul where this CPU has its
// blocked kernel, else OpenBLAS, with the reason.
TEST(Trainer, ADenseRunNamesItsProductKernel) {
  auto p = makeProject("cpu:2", 60);
  p.training.epochs = 1;
  ml::TelemetryHub hub;
  ml::Trainer t(p, makeData(), hub);
  ASSERT_EQ(t.run().status, ml::RunStatus::Finished);
  int said = 0;
  for (const auto& line : t.startLines()) said += line == "Dense products on " + ml::sgemm::kernelDescription() ? 1 : 0;
  EXPECT_EQ(said, 1) << ml::sgemm::kernelDescription();
  EXPECT_TRUE(ml::sgemm::kernelDescription().rfind("oneDNN ", 0) == 0 ||
              ml::sgemm::kernelDescription().rfind("OpenBLAS sgemm", 0) == 0)
      << ml::sgemm::kernelDescription();
}

TEST(Trainer, CancelStopsWithinOneStepMidEpoch) {
  ml::TelemetryHub hub;
  auto ch = hub.subscribe();
  auto p = makeProject("cpu:2", 8);
  p.training.epochs = 50;
  ml::Trainer t(p, makeData(), hub);
  ml::RunFinished fin;
  std::thread worker([&] { fin = t.run(); });
  int64_t seen = 0;
  while (seen < 5) {
    ch->waitFor(std::chrono::milliseconds(10));
    for (const auto& e : drainAll(*ch))
      if (std::holds_alternative<ml::StepEvent>(e)) ++seen;
  }
  t.requestCancel();
  worker.join();
  EXPECT_EQ(fin.status, ml::RunStatus::Cancelled);
  EXPECT_LT(fin.steps, 75 * 50);
  EXPECT_GE(fin.steps, 5);
}

TEST(Trainer, DivergenceNamesTheStepAndTheReplica) {
  auto data = std::make_shared<ml::DataSplit>(*makeData());
  const int64_t bad = 123;
  data->train.x[static_cast<size_t>(bad * 12 + 3)] = std::numeric_limits<float>::quiet_NaN();
  // Where does sample 123 land? Epoch 1's order, batch 50, 3 replicas.
  const auto order = ml::epochOrder(data->train.size, 42, 1);
  const int64_t pos = std::find(order.begin(), order.end(), bad) - order.begin();
  const int64_t step = pos / 50 + 1, row = pos % 50;
  int replica = 0;
  while (ml::shardRange(50, replica, 3).second <= row) ++replica;
  ml::TelemetryHub hub;
  ml::Trainer t(makeProject("cpu:3", 50), data, hub);
  const auto fin = t.run();
  EXPECT_EQ(fin.status, ml::RunStatus::Diverged);
  EXPECT_EQ(fin.steps, step);
  EXPECT_NE(fin.message.find("at step " + std::to_string(step) + " "), std::string::npos) << fin.message;
  EXPECT_NE(fin.message.find("on replica " + std::to_string(replica) + " "), std::string::npos) << fin.message;
}

TEST(Trainer, ASlowConsumerLosesEventsNotTrainingSpeed) {
  ml::TelemetryHub hub;
  auto tiny = hub.subscribe(4);  // never drained
  auto full = hub.subscribe();
  ml::TrainerOptions o;
  o.maxSteps = 30;
  ml::Trainer t(makeProject("cpu:2", 16), makeData(), hub, o);
  EXPECT_EQ(t.run().status, ml::RunStatus::Finished);
  EXPECT_GT(tiny->dropped(), 20u);
  EXPECT_EQ(full->dropped(), 0u);
  int steps = 0;
  for (const auto& e : drainAll(*full)) steps += std::holds_alternative<ml::StepEvent>(e);
  EXPECT_EQ(steps, 30);
}

TEST(Trainer, EpochsReportValidationSyncSharesAndEqualChecksums) {
  ml::TelemetryHub hub;
  auto ch = hub.subscribe();
  auto p = makeProject("cpu:3", 40);
  p.training.epochs = 3;
  ml::Trainer t(p, makeData(), hub);
  ASSERT_EQ(t.run().status, ml::RunStatus::Finished);
  std::vector<ml::EpochEvent> epochs;
  const auto events = drainAll(*ch);
  for (const auto& e : events)
    if (const auto* ep = std::get_if<ml::EpochEvent>(&e)) epochs.push_back(*ep);
  ASSERT_EQ(epochs.size(), 3u);
  for (const auto& ep : epochs) {
    ASSERT_EQ(ep.checksums.size(), 3u);
    EXPECT_TRUE(ep.inSync);
    EXPECT_EQ(ep.checksums[0], ep.checksums[2]);
    ASSERT_TRUE(ep.valMetric.has_value());
    EXPECT_GE(ep.allreduceShare + ep.waitShare, 0.0);
    EXPECT_LE(ep.allreduceShare + ep.waitShare, 1.0);
  }
  EXPECT_LT(epochs.back().trainLoss, epochs.front().trainLoss);
  // At least one utilization sample per device per epoch, however short the epoch.
  std::vector<int> samples(3, 0);
  for (const auto& e : events)
    if (const auto* ds = std::get_if<ml::DeviceSample>(&e)) {
      ++samples[static_cast<size_t>(ds->device)];
      EXPECT_GT(ds->utilization, 0.0);
      EXPECT_LE(ds->utilization, 1.0);
    }
  for (int n : samples) EXPECT_GE(n, 3);
  EXPECT_GT(*epochs.back().valMetric, 0.5);  // 4 classes: well above chance
}

}  // namespace

// Issue 11: a loss or metric that does not fit the labels read past the label buffer and was
// stored as a finished run (loss 6e31). Now it is refused before anything runs, with the fix.
TEST(TrainerPreflight, LossAndMetricMustFitTheLabels) {
  ml::TelemetryHub hub;
  auto message = [&](const std::string& loss, const std::string& metric) {
    auto p = makeProject("cpu:2", 32);
    ml::setLoss(p.training, loss, "test");
    p.training.metrics = {metric};
    try {
      ml::Trainer t(p, makeData(), hub);
    } catch (const ml::UserError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string cat = message("categorical_crossentropy", "accuracy");
  EXPECT_NE(cat.find("Training screen › Loss (loss in the file's training section) is categorical_crossentropy, which "
                     "expects one-hot labels"),
            std::string::npos)
      << cat;
  EXPECT_NE(cat.find("use sparse_categorical_crossentropy"), std::string::npos) << cat;
  const std::string mae = message("sparse_categorical_crossentropy", "mae");
  EXPECT_NE(mae.find("Training screen › Metrics (metrics in the file's training section) is mae, which compares each"),
            std::string::npos)
      << mae;
  EXPECT_NE(mae.find("use accuracy"), std::string::npos) << mae;
  const std::string mse = message("mean_squared_error", "accuracy");
  EXPECT_NE(mse.find("these are class labels, use sparse_categorical_crossentropy"), std::string::npos) << mse;
  EXPECT_NE(message("sparse_categorical_crossentropy", "top_k").find("unknown metric 'top_k'"), std::string::npos);
  EXPECT_EQ(message("sparse_categorical_crossentropy", "accuracy"), "");
}

// The recorder calls abort() when the store cannot be written: the run ends failed, with the
// reason, at the next step.
TEST(Trainer, AbortEndsTheRunFailedWithTheReason) {
  ml::TelemetryHub hub;
  auto ch = hub.subscribe();
  auto p = makeProject("cpu:2", 8);
  p.training.epochs = 50;
  ml::Trainer t(p, makeData(), hub);
  ml::RunFinished fin;
  std::thread worker([&] { fin = t.run(); });
  int64_t seen = 0;
  while (seen < 3) {
    ch->waitFor(std::chrono::milliseconds(10));
    for (const auto& e : drainAll(*ch))
      if (std::holds_alternative<ml::StepEvent>(e)) ++seen;
  }
  t.abort("the run store x could not record the run: disk full");
  worker.join();
  EXPECT_EQ(fin.status, ml::RunStatus::Failed);
  EXPECT_NE(fin.message.find("disk full (training stopped after step"), std::string::npos) << fin.message;
  EXPECT_LT(fin.steps, 75 * 50);
}
