// A run's figures against what happened: a real run's live telemetry and the same run read back
// from the store give the same figures, and those are the sums of its steps (every training sample
// counted once an epoch, the run's own end time, sync parts that add up to at most the whole).
// Speed-up above what the cores allow comes with its reason; a small step runs on one thread.
#include <gtest/gtest.h>

#include <filesystem>

#include "nn/Sequential.h"
#include "nn/TeamSize.h"
#include "project/LayerJson.h"
#include "store/Recorder.h"
#include "store/RunFigures.h"
#include "store/RunStore.h"
#include "support/TestData.h"
#include "train/Trainer.h"

namespace {

struct TempStore {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("runfigures-" + std::to_string(::getpid()));
  TempStore() { std::filesystem::create_directories(dir); }
  ~TempStore() { std::filesystem::remove_all(dir); }
  std::string file() const { return (dir / "runs.sqlite").string(); }
};

TEST(RunFigures, LiveAndStoredFiguresAreTheRunsOwnSums) {
  TempStore tmp;
  auto p = mltest::makeProject("figures", mltest::makeModel(false), "cpu:3", 64);
  p.training.epochs = 2;
  const auto data = mltest::makeSplit(500, 100);  // 7 full steps of 64 and one of 52 an epoch
  ml::TelemetryHub hub;
  auto mine = hub.subscribe();
  ml::Trainer trainer(p, data, hub, {});
  ml::Recorder recorder(tmp.file(), hub.subscribe());
  trainer.run();
  hub.closeAll();
  recorder.stop();
  ASSERT_TRUE(recorder.runId());

  std::optional<ml::RunFigures> live;
  ml::RunFinished finished;
  double replicaSum = 0, allreduce = 0, wait = 0;
  int64_t replicaSteps = 0;
  for (const ml::Event& e : mltest::drainAll(*mine)) {
    if (const auto* s = std::get_if<ml::RunStarted>(&e)) live = ml::figuresFor(*s, 2);
    if (const auto* s = std::get_if<ml::StepEvent>(&e)) {
      live->addStep(*s);
      for (const auto& r : s->replicas) {
        replicaSum += r.phases.total();
        allreduce += r.phases.allreduce;
        wait += r.phases.wait;
        ++replicaSteps;
      }
    }
    if (const auto* f = std::get_if<ml::RunFinished>(&e)) {
      finished = *f;
      live->finish(*f);
    }
  }
  ASSERT_TRUE(live);
  ASSERT_EQ(finished.status, ml::RunStatus::Finished);
  auto store = ml::RunStore::open(tmp.file());
  const ml::RunFigures stored = figuresOf(store.loadRun(*recorder.runId()), store.loadCurves(*recorder.runId()));

  const ml::RunFigures& liveRef = *live;
  for (const ml::RunFigures* f : {&liveRef, &stored}) {
    EXPECT_EQ(f->replicas, 3);
    EXPECT_EQ(f->steps, 16);
    EXPECT_EQ(f->steps, finished.steps);
    EXPECT_EQ(f->samples, 2 * 500);  // every training sample once an epoch
    EXPECT_DOUBLE_EQ(f->elapsedSeconds, finished.seconds);
    EXPECT_GT(f->stepSeconds, 0);
    EXPECT_LE(f->stepSeconds, finished.seconds);  // steps are part of the run's time
    EXPECT_DOUBLE_EQ(f->samplesPerSec(), 1000.0 / f->stepSeconds);
    EXPECT_EQ(f->phases.replicaSteps, 3 * 16);
    const ml::SyncCost sync = f->sync();
    const double us = f == &stored ? 1e-6 : 1e-12;  // the store keeps phase times in microseconds
    EXPECT_NEAR(sync.whole, replicaSum / static_cast<double>(replicaSteps), us);
    EXPECT_NEAR(sync.allreduce, allreduce / static_cast<double>(replicaSteps), us);
    EXPECT_NEAR(sync.wait, wait / static_cast<double>(replicaSteps), us);
    EXPECT_LE(sync.parts(), sync.whole);
    EXPECT_LE(sync.share(), 1.0);
  }
  EXPECT_NEAR(stored.stepSeconds, live->stepSeconds, 1e-9);
  EXPECT_EQ(stored.threadsPerReplica, 1);  // several replicas: one thread each
}

TEST(RunFigures, ShardSentenceSaysUnequalShards) {
  EXPECT_EQ(ml::shardSentence(3, 64), "3 replicas × 21-22 = 64 samples per step");
  EXPECT_EQ(ml::shardSentence(4, 64), "4 replicas × 16 = 64 samples per step");
  EXPECT_EQ(ml::shardSentence(1, 32), "1 replica × 32 = 32 samples per step");
  EXPECT_EQ(ml::shardSentence(3, 64, 2), "2 micro-batches of 32 per step, 3 replicas × 10-11 each = 64 samples per step");
}

ml::RunFigures figures(int replicas, int threads, int cores, double samplesPerSec) {
  ml::RunFigures f;
  f.replicas = replicas;
  f.threadsPerReplica = threads;
  f.hostCores = cores;
  f.steps = 10;
  f.samples = 1000;
  f.stepSeconds = 1000.0 / samplesPerSec;
  return f;
}

TEST(RunFigures, SpeedupAboveWhatTheCoresAllowSaysWhy) {
  // cpu:4 against cpu:1 on one thread, 2 cores: at most 2x.
  auto s = ml::scalingVs(figures(1, 1, 2, 1000), figures(4, 1, 2, 1800));
  EXPECT_DOUBLE_EQ(s.speedup, 1.8);
  EXPECT_DOUBLE_EQ(s.efficiency, 0.45);
  EXPECT_DOUBLE_EQ(s.bound, 2.0);
  EXPECT_TRUE(s.note.empty());
  // Against one replica that used both cores, cpu:4 on the same 2 cores allows 1x: 13.28x is not
  // more compute, and the figure says so.
  s = ml::scalingVs(figures(1, 2, 2, 1000), figures(4, 1, 2, 13280));
  EXPECT_DOUBLE_EQ(s.bound, 1.0);
  EXPECT_NE(s.note.find("13.28x is more than the cores allow (2 cores against 2, at most 1.00x)"), std::string::npos) << s.note;
}

TEST(TeamSize, CountsTheForwardWorkAndKeepsSmallStepsOnOneThread) {
  ml::ModelSpec mlp;
  mlp.inputShape = {28, 28};
  mlp.layers = {ml::makeLayerSpec("Flatten"), ml::makeLayerSpec("Dense", {{"units", 128}, {"activation", "relu"}}),
                ml::makeLayerSpec("Dense", {{"units", 10}, {"activation", "softmax"}})};
  // Flatten: 784 values; Dense 784x128 + 128; Dense 128x10 + 10.
  EXPECT_DOUBLE_EQ(ml::forwardMacsPerSample(ml::Sequential(mlp)), 784 + 100480 + 1290);
  ml::ModelSpec wine;  // 13 features -> 32 -> 3: a few thousand multiply-adds a sample
  wine.inputShape = {13};
  wine.layers = {ml::makeLayerSpec("Dense", {{"units", 32}, {"activation", "relu"}}),
                 ml::makeLayerSpec("Dense", {{"units", 3}, {"activation", "softmax"}})};
  const ml::TeamChoice tiny = ml::chooseTeam(wine, 32);
  EXPECT_EQ(tiny.threads, 1);
  EXPECT_NE(tiny.why.find("a step of 17,504 multiply-adds is too small to split"), std::string::npos) << tiny.why;
  mlp.layers[1].as<ml::DenseSpec>()->units = 512;
  EXPECT_EQ(ml::chooseTeam(mlp, 256).threads, 0);  // 784-512-10 at 256 rows: every core
}

TEST(TeamSize, ASmallCpuStepTrainsOnOneThreadAndSaysWhy) {
  auto p = mltest::makeProject("tiny", mltest::makeModel(false), "cpu:1", 32);
  ml::TelemetryHub hub;
  auto events = hub.subscribe();
  ml::Trainer trainer(p, mltest::makeSplit(64), hub, {});
  trainer.run();
  hub.closeAll();
  for (const ml::Event& e : mltest::drainAll(*events))
    if (const auto* s = std::get_if<ml::RunStarted>(&e)) {
      EXPECT_NE(s->configJson.find("\"threads_per_device\":1"), std::string::npos) << s->configJson;
      EXPECT_NE(s->description.find("too small to split across threads"), std::string::npos) << s->description;
      return;
    }
  FAIL() << "no RunStarted";
}

}  // namespace
