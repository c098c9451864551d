// Mirrored training on GPUs through the plugin, held against the CPU path: 20 steps on gpu:0 against
// cpu:1, 1 against 4 logical GPUs (the mirrored-step invariant), replicas bit-identical after every
// step, phase timings from CUDA events, the non-finite check naming the replica, evaluation, the
// errors (a GPU that does not exist, out of memory), and the run's NVML telemetry (or, without
// NVML, its computed utilization and the reason). Skips with the probe's reason where there is no
// usable GPU; MIRRORLAB_REQUIRE_GPU=1 turns the skip into a failure (tests/gpu/run.sh sets it).
#include "GpuTrainingTest.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <sstream>

#include <filesystem>

#include "Error.h"
#include "backend/CudaPlugin.h"
#include "backend/DeviceProbe.h"
#include "distribute/MirroredStrategy.h"
#include "project/LayerJson.h"
#include "store/Recorder.h"
#include "store/RunStore.h"
#include "support/Strategies.h"
#include "support/TestData.h"
#include "support/Training.h"
#include "train/Trainer.h"

namespace {

using mltest::makeClassification;
using mltest::makeModel;
using mltest::makeStrategy;
using mltest::optimizer;
using mltest::relDiff;
using mltest::train;

using mlgputest::report;

class GpuTraining : public mlgputest::NeedsGpu {};

std::unique_ptr<ml::MirroredStrategy> strategy(const ml::ModelSpec& model, const std::string& devices, const std::string& opt,
                                               int64_t bucketBytes, bool tf32) {
  ml::StrategyOptions so;
  so.bucketBytes = bucketBytes;
  so.tf32 = tf32;
  return makeStrategy(model, devices, optimizer(opt), so);
}

std::unique_ptr<ml::MirroredStrategy> strategy(const std::string& devices, const std::string& opt, bool dropout,
                                               int64_t bucketBytes = 1 << 20, bool tf32 = false) {
  return strategy(makeModel(dropout), devices, opt, bucketBytes, tf32);
}

const ml::Dataset& data() {
  static const ml::Dataset d = makeClassification(4000);
  return d;
}

// cuBLAS and OpenBLAS add in different orders, so the GPU is held to float rounding, not to bits:
// the per-step losses closely, the weights after 20 steps to a relative 1e-4 (SGD, linear in the
// gradient) and 5e-4 (Adam, whose m / sqrt(v) magnifies rounding where gradients are near zero).
TEST_F(GpuTraining, TwentyStepsOnGpuMatchTheCpu) {
  for (const auto& [opt, tol] : {std::pair<std::string, double>{"sgd", 1e-4}, {"adam", 5e-4}}) {
    auto cpu = strategy("cpu:1", opt, true);
    auto gpu = strategy("gpu:0", opt, true);
    EXPECT_EQ(relDiff(gpu->model(0).params(), cpu->model(0).params()), 0.0) << "initial weights differ";
    const auto want = train(*cpu, data(), 100, 20);
    const auto got = train(*gpu, data(), 100, 20);
    EXPECT_LT(relDiff(got.weights, want.weights), tol) << opt;
    for (size_t k = 0; k < want.losses.size(); ++k)
      EXPECT_NEAR(got.losses[k], want.losses[k], 1e-4 * (1 + want.losses[k])) << opt << " step " << k + 1;
    EXPECT_LT(got.losses.back(), got.losses.front()) << opt << ": the loss did not go down";
  }
}

// The TF32 setting reaches cuBLAS: the products then see inputs with 10 mantissa bits, so 20 steps
// end measurably away from float32's weights (more than float32's own rounding against the CPU),
// yet close to them, and the loss still goes down; off, the float32 run above holds. The model is
// 512 wide at batch 256: cuBLAS may keep small GEMMs (the 12-16-8-4 model's at batch 100) on
// float32 kernels even with TF32 allowed, and then nothing would move; Gpu.Tf32IsOffByDefault-
// AndAvailableOnRequest holds one 512^3 product's TF32 rounding by itself.
TEST_F(GpuTraining, Tf32ChangesTheProductsAndStillTrains) {
  static const ml::Dataset wide = makeClassification(20 * 256, 512);
  ml::ModelSpec m;
  m.inputShape = {512};
  m.layers.push_back(ml::makeLayerSpec("Dense", {{"units", 512}, {"activation", "relu"}}));
  m.layers.push_back(ml::makeLayerSpec("Dense", {{"units", 512}, {"activation", "tanh"}}));
  m.layers.push_back(ml::makeLayerSpec("Dense", {{"units", 4}, {"activation", "softmax"}}));
  auto cpu = strategy(m, "cpu:1", "sgd", 1 << 20, false);
  auto f32 = strategy(m, "gpu:0", "sgd", 1 << 20, false);
  auto tf32 = strategy(m, "gpu:0", "sgd", 1 << 20, true);
  const auto want = train(*cpu, wide, 256, 20), exact = train(*f32, wide, 256, 20), rounded = train(*tf32, wide, 256, 20);
  const double f32Off = relDiff(exact.weights, want.weights), tf32Off = relDiff(rounded.weights, exact.weights);
  std::printf("TF32 against float32 after 20 steps: %.3g relative (float32 GPU against the CPU: %.3g)\n", tf32Off, f32Off);
  EXPECT_GT(tf32Off, 2 * f32Off + 1e-5);
  EXPECT_LT(tf32Off, 1e-2);
  EXPECT_LT(rounded.losses.back(), rounded.losses.front());
}

// The mirrored-step invariant on one GPU: 4 logical replicas (shards 25/25/25/25, then 3/3/3/4 with
// batch 13, and accumulation) give the weights of one replica, and every step keeps them identical.
TEST_F(GpuTraining, FourLogicalGpusGiveTheWeightsOfOne) {
  for (const auto& [B, K] : {std::pair<int64_t, int>{100, 1}, {13, 1}, {64, 4}}) {
    auto one = strategy("gpu:0x1", "adam", true);
    auto four = strategy("gpu:0x4", "adam", true);
    const auto ref = train(*one, data(), B, 6, K);
    const auto got = train(*four, data(), B, 6, K);
    EXPECT_LT(relDiff(got.weights, ref.weights), 1e-5) << "batch " << B << ", " << K << " micro-batches";
  }
}

TEST_F(GpuTraining, LogicalReplicasStayBitIdenticalWithManyBuckets) {
  auto s = strategy("gpu:0x4", "adam", true, 400);  // several buckets: all-reduce overlaps backward
  ASSERT_GT(s->bucketCount(), 1);
  EXPECT_EQ(s->allReduceName(), "device-memory");
  EXPECT_NE(s->allReducePath().find("NCCL refuses two ranks on one GPU"), std::string::npos) << s->allReducePath();
  auto ref = strategy("gpu:0x1", "adam", true);
  const auto want = train(*ref, data(), 128, 10);
  const auto got = train(*s, data(), 128, 10);  // checks the checksums after every step
  EXPECT_LT(relDiff(got.weights, want.weights), 1e-5);
  // Optimizer slots too: every replica applied the same update to the same bits.
  const auto slots0 = s->optimizerSlots(0);
  ASSERT_EQ(slots0.size(), 2u);
  for (int r = 1; r < 4; ++r) {
    const auto slots = s->optimizerSlots(r);
    ASSERT_EQ(slots.size(), 2u);
    for (size_t k = 0; k < 2; ++k) {
      ASSERT_EQ(slots[k].size(), slots0[k].size());
      EXPECT_EQ(std::memcmp(slots[k].data(), slots0[k].data(), slots[k].size_bytes()), 0) << "replica " << r << " slot " << k;
    }
  }
}

TEST_F(GpuTraining, TwoPhysicalGpusWithNcclGiveTheWeightsOfOne) {
  if (report().gpus.size() < 2) GTEST_SKIP() << "needs 2 GPUs, this machine has " << report().gpus.size();
  auto two = strategy("gpu:0,1", "sgd", true, 400);
  EXPECT_EQ(two->allReduceName(), "nccl");
  auto one = strategy("gpu:0", "sgd", true);
  EXPECT_LT(relDiff(train(*two, data(), 100, 8).weights, train(*one, data(), 100, 8).weights), 1e-5);
}

TEST_F(GpuTraining, EveryPhaseIsTimedWithEventsAndSamplesAreCounted) {
  auto s = strategy("gpu:0x2", "sgd", false);
  std::vector<int64_t> idx(101);
  std::iota(idx.begin(), idx.end(), 0);
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = s->trainStep(data(), idx, 1, 0.1f, 1);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(r.replicas.size(), 2u);
  EXPECT_EQ(r.replicas[0].samples, 50);
  EXPECT_EQ(r.replicas[1].samples, 51);
  for (const auto& rs : r.replicas) {
    EXPECT_GT(rs.phases.input, 0);  // the indices' copy and the rows' gather, before the forward timer starts
    EXPECT_GT(rs.phases.forward, 0);
    EXPECT_GT(rs.phases.backward, 0);
    EXPECT_GT(rs.phases.optimizer, 0);
    // Device events placed inside the host's step: a unit mistake (ms) or a phase counted twice
    // would exceed the step's wall time.
    EXPECT_LE(rs.phases.total(), wall);
  }
}

// The input pipeline: each micro-batch's indices go through one of two pinned slots used in turn,
// so with 4 micro-batches a slot is written again while the copy of two micro-batches before may
// still be queued (the fake runs queued work only when the host synchronises, and reads the host
// memory then): the weights must match the CPU's. Staging the rows through host memory instead of
// gathering them from the data set on the device (MIRRORLAB_GPU_DATA=host) gives the same bits.
TEST_F(GpuTraining, MicroBatchesThroughPinnedSlotsMatchTheCpuAndHostStagingGivesTheSameBits) {
  auto cpu = strategy("cpu:1", "adam", true);
  auto gpu = strategy("gpu:0", "adam", true);
  const auto want = train(*cpu, data(), 64, 6, 4);
  const auto resident = train(*gpu, data(), 64, 6, 4);
  EXPECT_LT(relDiff(resident.weights, want.weights), 5e-4);
  for (size_t k = 0; k < want.losses.size(); ++k)
    EXPECT_NEAR(resident.losses[k], want.losses[k], 1e-4 * (1 + want.losses[k])) << "step " << k + 1;
  ASSERT_EQ(setenv("MIRRORLAB_GPU_DATA", "host", 1), 0);
  auto staged = strategy("gpu:0", "adam", true);
  const auto host = train(*staged, data(), 64, 6, 4);
  unsetenv("MIRRORLAB_GPU_DATA");
  ASSERT_EQ(host.weights.size(), resident.weights.size());
  EXPECT_EQ(std::memcmp(host.weights.data(), resident.weights.data(), host.weights.size() * sizeof(float)), 0);
}

TEST_F(GpuTraining, EvaluateOnGpuMatchesTheCpu) {
  auto cpu = strategy("cpu:1", "sgd", true);
  auto gpu = strategy("gpu:0x3", "sgd", true);
  std::vector<int64_t> idx(1500);  // more than one 1024-row chunk on no replica, uneven shards
  std::iota(idx.begin(), idx.end(), 7);
  std::vector<float> a(idx.size() * 4), b(idx.size() * 4);
  const auto ra = cpu->evaluate(data(), idx, a.data());
  const auto rb = gpu->evaluate(data(), idx, b.data());
  EXPECT_EQ(rb.samples, 1500);
  EXPECT_NEAR(rb.lossSum, ra.lossSum, 1e-4 * ra.lossSum);
  EXPECT_NEAR(rb.metricSum, ra.metricSum, 2.0);  // correct predictions: a near-tie may flip one or two
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(b[i], a[i], 1e-5) << i;
}

TEST_F(GpuTraining, NonFiniteGradientNamesTheReplica) {
  ml::Dataset d = data();
  d.x[40 * 12] = std::numeric_limits<float>::quiet_NaN();  // relu(NaN) = 0: only dW sees it
  for (int64_t bytes : {int64_t{1} << 20, int64_t{400}}) {
    ml::StrategyOptions so;
    so.bucketBytes = bytes;
    auto s = makeStrategy(makeModel(false), "gpu:0x2", optimizer("sgd"), so);
    std::vector<int64_t> idx(60);
    std::iota(idx.begin(), idx.end(), 0);  // sample 40 is in replica 1's half
    const auto r = s->trainStep(d, idx, 1, 0.1f, 1);
    EXPECT_FALSE(r.finite) << "bucket bytes " << bytes;
    EXPECT_EQ(r.badReplica, 1);
    EXPECT_EQ(r.badWhat, "gradient");
  }
}

TEST_F(GpuTraining, AGpuThatDoesNotExistIsNamedWithTheMachinesGpus) {
  const int n = static_cast<int>(report().gpus.size());
  try {
    strategy("gpu:" + std::to_string(n), "sgd", false);
    FAIL() << "gpu:" << n << " was accepted";
  } catch (const ml::UserError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("gpu:" + std::to_string(n) + " does not exist: this machine has " + std::to_string(n) + " GPU"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find(report().gpus[0].name), std::string::npos) << m;
  }
}

ml::Project trainerProject(const std::string& devices, int64_t batch) {
  ml::Project p;
  p.name = "gpu trainer";
  p.model = makeModel(true);
  p.data.kind = ml::DataKind::Spirals;  // not loaded: the tests hand the data in
  p.training.epochs = 2;
  p.training.batchSize = batch;
  p.training.optimizer = optimizer("adam");
  p.distribute.devices = ml::parseDevices(devices);
  return p;
}

// A batch whose activations cannot fit: 60000 rows of a 2^20-unit layer are 240 GB per buffer. The
// run ends as failed, with the plugin's message (device, size, the fix); nothing crashes, and the
// GPU is usable afterwards.
TEST_F(GpuTraining, OutOfMemoryInAStepFailsTheRunWithThePluginsMessage) {
  auto p = trainerProject("gpu:0", 60000);
  p.model.inputShape = {2};
  p.model.layers = {ml::makeLayerSpec("Dense", {{"units", 1 << 20}, {"activation", "relu"}}),
                    ml::makeLayerSpec("Dense", {{"units", 4}, {"activation", "softmax"}})};
  p.training.epochs = 1;
  auto split = std::make_shared<ml::DataSplit>();
  split->train = makeClassification(60000, 2);
  ml::TelemetryHub hub;
  ml::Trainer t(p, split, hub);
  const auto fin = t.run();
  EXPECT_EQ(fin.status, ml::RunStatus::Failed);
  EXPECT_NE(fin.message.find("out of GPU memory on gpu:0"), std::string::npos) << fin.message;
  EXPECT_NE(fin.message.find("smaller batch"), std::string::npos) << fin.message;
  auto s = strategy("gpu:0", "sgd", false);
  EXPECT_EQ(train(*s, data(), 50, 2).losses.size(), 2u);
}

// The whole loop: the Trainer's events for a GPU run, with the all-reduce line and device names.
TEST_F(GpuTraining, TrainerRunsOnLogicalGpusAndSaysWhichAllReduceRan) {
  const auto p = trainerProject("gpu:0x2", 100);
  auto split = std::make_shared<ml::DataSplit>();
  split->train = makeClassification(1000);
  split->validation = makeClassification(200, 12, 9);
  ml::TelemetryHub hub;
  auto ch = hub.subscribe(1 << 14);
  ml::Trainer t(p, split, hub);
  const auto lines = t.startLines();
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  EXPECT_NE(all.find("2 replicas on gpu:0/0,gpu:0/1"), std::string::npos) << all;
  EXPECT_NE(all.find("all-reduce: logical GPUs share GPU 0: NCCL refuses two ranks on one GPU, so Mirrorlab's "
                     "device-memory all-reduce is used"),
            std::string::npos)
      << all;
  const auto fin = t.run();
  EXPECT_EQ(fin.status, ml::RunStatus::Finished) << fin.message;
  EXPECT_EQ(fin.steps, 20);
  std::vector<ml::Event> events;
  ch->drain(events);
  int epochs = 0;
  for (const auto& e : events) {
    if (const auto* s = std::get_if<ml::RunStarted>(&e)) {
      ASSERT_EQ(s->devices.size(), 2u);
      EXPECT_NE(s->devices[0].find(report().gpus[0].name), std::string::npos) << s->devices[0];
    }
    if (const auto* ep = std::get_if<ml::EpochEvent>(&e)) {
      ++epochs;
      EXPECT_TRUE(ep->inSync);
      EXPECT_TRUE(ep->valLoss.has_value());
    }
  }
  EXPECT_EQ(epochs, 2);
}

// ---- NVML telemetry ------------------------------------------------------------------------------

// The fake plugin (tests/gpu/fake) answers NVML with fixed figures: 60 + 10 x device % busy, the
// bytes it holds on the device, 16 GiB in all, 45 + device degrees; FAKE_NVML=0 makes NVML fail.
bool fakePlugin() {
  const ml::CudaPlugin* p = ml::cudaPlugin();
  return p && p->buildInfo.find("fake CUDA plugin") != std::string::npos;
}

struct RecordedRun {
  ml::RunFinished fin;
  ml::RunStarted started;
  std::vector<ml::DeviceSample> samples;  // as the Trainer published them
  ml::RunDetail stored;
  std::vector<ml::DeviceSample> storedSamples;
};

// Trains `devices` for 2 epochs of 10 steps with NVML samples every 20 ms, recorded in a fresh store.
RecordedRun recordGpuRun(const std::string& devices) {
  static int runs = 0;
  const auto db = std::filesystem::temp_directory_path() /
                  ("mirrorlab-nvml-" + std::to_string(::getpid()) + "-" + std::to_string(++runs) + ".sqlite");
  auto split = std::make_shared<ml::DataSplit>();
  split->train = makeClassification(1000);
  ml::TelemetryHub hub;
  auto ch = hub.subscribe(1 << 14);
  ml::TrainerOptions o;
  o.gpuSampleInterval = 0.02;
  ml::Trainer t(trainerProject(devices, 100), split, hub, o);
  RecordedRun out;
  {
    ml::Recorder recorder(db.string(), hub.subscribe());
    out.fin = t.run();
    hub.closeAll();
    recorder.stop();
    EXPECT_EQ(recorder.error(), "");
    auto store = ml::RunStore::open(db.string());
    out.stored = store.loadRun(recorder.runId().value());
    out.storedSamples = store.loadDeviceSamples(recorder.runId().value());
  }
  std::vector<ml::Event> events;
  ch->drain(events);
  for (const auto& e : events) {
    if (const auto* s = std::get_if<ml::RunStarted>(&e)) out.started = *s;
    if (const auto* d = std::get_if<ml::DeviceSample>(&e)) out.samples.push_back(*d);
  }
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db.string() + suffix);
  return out;
}

// Two logical GPUs on GPU 0: every device sample is NVML's, one per sample time for the physical
// GPU (stored under replica 0, saying it stands for 2 replicas), with the fake's figures for
// device 0, in time order, and the store gives the same back. The run trains as before.
TEST_F(GpuTraining, NvmlSamplesTheSharedPhysicalGpuOnceForItsReplicas) {
  const auto r = recordGpuRun("gpu:0x2");
  ASSERT_EQ(r.fin.status, ml::RunStatus::Finished) << r.fin.message;
  EXPECT_EQ(r.fin.steps, 20);
  EXPECT_NE(r.started.telemetry.find("GPU telemetry from NVML every 0.02 s"), std::string::npos) << r.started.telemetry;
  EXPECT_NE(r.started.telemetry.find("gpu:0 (one sample of the physical GPU for the 2 replicas that share it)"),
            std::string::npos)
      << r.started.telemetry;
  EXPECT_NE(r.started.description.find(r.started.telemetry), std::string::npos) << r.started.description;
  ASSERT_GE(r.samples.size(), 2u);  // one as training starts, one as it ends, however short the run
  double last = -1;
  for (const auto& d : r.samples) {
    EXPECT_EQ(d.source, ml::SampleSource::Nvml);
    EXPECT_EQ(d.device, 0);
    EXPECT_EQ(d.gpu, 0);
    EXPECT_EQ(d.gpuReplicas, 2);
    EXPECT_GT(d.memoryBytes, 0);  // the parameters and activations the replicas hold
    EXPECT_GE(d.wallTime, last);
    last = d.wallTime;
    if (fakePlugin()) {
      EXPECT_DOUBLE_EQ(d.utilization, 0.60);
      EXPECT_EQ(d.temperatureC, std::optional<double>(45));
      EXPECT_DOUBLE_EQ(d.memoryTotalBytes, 16.0 * (int64_t{1} << 30));
      EXPECT_EQ(d.memoryBusy, std::optional<double>(0.2));
    } else {
      EXPECT_GE(d.utilization, 0.0);
      EXPECT_LE(d.utilization, 1.0);
      EXPECT_GE(d.memoryTotalBytes, d.memoryBytes);
    }
  }
  EXPECT_LE(last, r.fin.seconds);
  ASSERT_EQ(r.storedSamples.size(), r.samples.size());
  for (size_t i = 0; i < r.samples.size(); ++i) {
    const auto &a = r.storedSamples[i], &b = r.samples[i];
    EXPECT_EQ(a.source, ml::SampleSource::Nvml);
    EXPECT_EQ(a.gpu, b.gpu);
    EXPECT_EQ(a.gpuReplicas, 2);
    EXPECT_EQ(a.utilization, b.utilization);
    EXPECT_EQ(a.memoryBytes, b.memoryBytes);
    EXPECT_EQ(a.temperatureC, b.temperatureC);
  }
  EXPECT_NE(r.stored.description.find("GPU telemetry from NVML"), std::string::npos) << r.stored.description;
}

// Off the training threads: a training thread publishes only between steps, so two samples that
// fall inside one step came from the sampler's own thread. The fake's steps run on the host and
// take tens of ms with 1024-unit layers, many times the 5 ms period.
TEST_F(GpuTraining, NvmlSamplesArriveWhileAStepRuns) {
  if (!fakePlugin()) GTEST_SKIP() << "needs steps much slower than the sample period: the fake plugin's, on the host";
  auto p = trainerProject("gpu:0x2", 1000);
  p.model.layers = {ml::makeLayerSpec("Dense", {{"units", 1024}, {"activation", "relu"}}),
                    ml::makeLayerSpec("Dense", {{"units", 1024}, {"activation", "relu"}}),
                    ml::makeLayerSpec("Dense", {{"units", 4}, {"activation", "softmax"}})};
  auto split = std::make_shared<ml::DataSplit>();
  split->train = makeClassification(2000);
  ml::TelemetryHub hub;
  auto ch = hub.subscribe(1 << 14);
  ml::TrainerOptions o;
  o.gpuSampleInterval = 0.005;
  o.maxSteps = 2;
  ml::Trainer t(p, split, hub, o);
  ASSERT_EQ(t.run().status, ml::RunStatus::Finished);
  std::vector<ml::Event> events;
  ch->drain(events);
  std::vector<double> stepEnds = {0}, samples;
  for (const auto& e : events) {
    if (const auto* s = std::get_if<ml::StepEvent>(&e)) stepEnds.push_back(s->wallTime);
    if (const auto* d = std::get_if<ml::DeviceSample>(&e)) samples.push_back(d->wallTime);
  }
  ASSERT_EQ(stepEnds.size(), 3u);
  int most = 0;
  for (size_t k = 1; k < stepEnds.size(); ++k)
    most = std::max<int>(most, static_cast<int>(std::count_if(samples.begin(), samples.end(), [&](double w) {
                           return w > stepEnds[k - 1] + 1e-9 && w < stepEnds[k] - 1e-9;
                         })));
  EXPECT_GE(most, 2) << "steps end at " << stepEnds[1] << " and " << stepEnds[2] << " s; " << samples.size() << " samples";
}

// Two physical GPUs: a sample of each, under its own replica, with its own figures.
TEST_F(GpuTraining, NvmlSamplesEachPhysicalGpuUnderItsReplica) {
  if (report().gpus.size() < 2) GTEST_SKIP() << "needs 2 GPUs, this machine has " << report().gpus.size();
  const auto r = recordGpuRun("gpu:0,1");
  ASSERT_EQ(r.fin.status, ml::RunStatus::Finished) << r.fin.message;
  int seen[2] = {0, 0};
  for (const auto& d : r.samples) {
    ASSERT_EQ(d.source, ml::SampleSource::Nvml);
    ASSERT_TRUE(d.gpu == 0 || d.gpu == 1) << d.gpu;
    EXPECT_EQ(d.device, d.gpu);
    EXPECT_EQ(d.gpuReplicas, 1);
    ++seen[d.gpu];
    if (fakePlugin()) {
      EXPECT_DOUBLE_EQ(d.utilization, 0.60 + 0.10 * d.gpu);
      EXPECT_EQ(d.temperatureC, std::optional<double>(45 + d.gpu));
    }
  }
  EXPECT_GE(seen[0], 2);
  EXPECT_EQ(seen[0], seen[1]);
}

// Without NVML the run trains as it did before NVML was read: the computed utilization of each
// replica, and the start line (printed by the CLI, stored with the run) says once why.
TEST_F(GpuTraining, WithoutNvmlTheRunKeepsTheComputedUtilizationAndSaysWhy) {
  if (!fakePlugin()) GTEST_SKIP() << "needs the fake plugin, whose NVML FAKE_NVML=0 turns off";
  setenv("FAKE_NVML", "0", 1);
  struct Restore {
    ~Restore() { unsetenv("FAKE_NVML"); }
  } restore;
  const auto r = recordGpuRun("gpu:0x2");
  ASSERT_EQ(r.fin.status, ml::RunStatus::Finished) << r.fin.message;
  EXPECT_EQ(r.fin.steps, 20);
  const std::string why =
      "GPU utilization is compute time / step time per replica, as on CPU devices: NVML cannot be "
      "read (fake plugin: FAKE_NVML=0, no NVML)";
  EXPECT_EQ(r.started.telemetry, why);
  EXPECT_NE(r.stored.description.find(why + "\n"), std::string::npos) << r.stored.description;
  int lines = 0;  // said once
  std::istringstream text(r.stored.description);
  for (std::string line; std::getline(text, line);) lines += line.find("NVML") != std::string::npos;
  EXPECT_EQ(lines, 1) << r.stored.description;
  int perReplica[2] = {0, 0};
  ASSERT_FALSE(r.samples.empty());
  for (const auto& d : r.samples) {
    EXPECT_EQ(d.source, ml::SampleSource::Computed);
    EXPECT_EQ(d.gpu, -1);
    ASSERT_TRUE(d.device == 0 || d.device == 1) << d.device;
    ++perReplica[d.device];
    EXPECT_GT(d.utilization, 0.0);
    EXPECT_LE(d.utilization, 1.0);
    EXPECT_FALSE(d.temperatureC.has_value());
  }
  EXPECT_GE(perReplica[0], 2);  // at least one per epoch
  EXPECT_EQ(perReplica[0], perReplica[1]);
  ASSERT_EQ(r.storedSamples.size(), r.samples.size());
  for (const auto& d : r.storedSamples) EXPECT_EQ(d.source, ml::SampleSource::Computed);
}

}  // namespace
