// GPUs across workers: NCCL bootstrapped through the worker group, as Horovod does (worker 0's unique
// id gathered to every worker, then each worker's ranks join one communicator). The workers are
// in-process thread workers standing in for mpirun's processes (the fake plugin's NCCL spans the
// threads of its process; a GPU machine runs the real thing). The DESIGN invariant: W workers x N
// GPU replicas with global batch B give the weights of one GPU replica with batch B (to float
// rounding), with uneven shards and accumulation, and every replica of every worker holds the same
// bits: physical GPUs in one communicator over every worker's GPUs, logical GPUs summed on their
// card and then across the workers by replica 0. Skips with the probe's reason without a GPU.
#include "GpuTrainingTest.h"

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>

#include "backend/CudaPlugin.h"
#include "backend/DeviceProbe.h"
#include "distribute/MirroredStrategy.h"
#include "distribute/ThreadWorkers.h"
#include "project/LayerJson.h"
#include "support/Strategies.h"
#include "support/TestData.h"
#include "support/Training.h"
#include "support/Workers.h"
#include "train/Trainer.h"

namespace {

using mltest::relDiff;
using mltest::train;

using mlgputest::report;

class GpuWorkers : public mlgputest::NeedsGpu {};

const ml::Dataset& data() {
  static const ml::Dataset d = mltest::makeClassification(600);
  return d;
}

// makeModel(true) with Adam over `devices`, in `workers` (none: one process).
std::unique_ptr<ml::MirroredStrategy> strategy(const std::string& devices, ml::WorkerGroup* workers) {
  ml::StrategyOptions so;
  so.bucketBytes = 400;  // several buckets: several cross-worker all-reduces per step
  so.workers = workers;
  return mltest::makeStrategy(mltest::makeModel(true), devices, mltest::optimizer("adam"), so);
}

using mltest::Trained;

// The tests compare every worker's replicas after the last step themselves (finalChecksums).
const mltest::TrainOptions kSteps{.expectFinite = false, .expectFullBatch = false, .checkReplicas = false};

struct Layout {
  int workers;
  int gpus;      // per worker
  bool logical;  // gpus logical replicas on one GPU, else that many physical GPUs
  int64_t batch;
  int accumulate;
  const char* path;  // in the all-reduce's description
};

// The fake plugin lets every thread worker use the same GPUs; real NCCL refuses two ranks of one
// communicator on one GPU, so on a GPU machine worker w takes GPUs of its own.
bool fakePlugin() {
  const ml::CudaPlugin* p = ml::cudaPlugin();
  return p && p->buildInfo.find("fake") != std::string::npos;
}
std::string devicesOf(const Layout& l, int w) {
  const int first = fakePlugin() ? 0 : w * (l.logical ? 1 : l.gpus);
  if (l.logical) return "gpu:" + std::to_string(first) + "x" + std::to_string(l.gpus);
  std::string d = "gpu:";
  for (int g = 0; g < l.gpus; ++g) d += (g ? "," : "") + std::to_string(first + g);
  return d;
}
int gpusNeeded(const Layout& l) {
  if (fakePlugin()) return l.logical ? 1 : l.gpus;
  return l.workers * (l.logical ? 1 : l.gpus);
}

TEST_F(GpuWorkers, WorkersTimesGpuReplicasGiveTheWeightsOfOneGpuReplica) {
  const Layout layouts[] = {
      {2, 1, false, 64, 1, "NCCL over the 2 GPUs of 2 workers"},
      {2, 2, false, 50, 1, "NCCL over the 4 GPUs of 2 workers"},
      {3, 2, true, 13, 1, "replica 0 of each of the 3 workers all-reduces with NCCL"},
      {2, 3, true, 29, 2, "replica 0 of each of the 2 workers all-reduces with NCCL"},
  };
  const int steps = 4;
  int ran = 0;
  for (const Layout& l : layouts) {
    const std::string what = std::to_string(l.workers) + " workers x " + devicesOf(l, 0);
    if (gpusNeeded(l) > static_cast<int>(report().gpus.size())) {
      std::printf("not run: %s needs %d GPUs, this machine has %zu\n", what.c_str(), gpusNeeded(l), report().gpus.size());
      continue;
    }
    ++ran;
    SCOPED_TRACE(what);
    auto one = strategy("gpu:0", nullptr);
    const Trained ref = train(*one, data(), l.batch, steps, l.accumulate, kSteps);
    const auto got = mltest::onWorkers<Trained>(l.workers, 60, [&](int w, ml::WorkerGroup& g) {
      auto s = strategy(devicesOf(l, w), &g);
      return train(*s, data(), l.batch, steps, l.accumulate, kSteps);
    });
    const size_t G = static_cast<size_t>(l.workers * l.gpus);
    double network = 0;  // replica 0's network time, every step of every worker
    for (int w = 0; w < l.workers; ++w) {
      const Trained& t = got[static_cast<size_t>(w)];
      EXPECT_NE(t.allReduce.find(l.path), std::string::npos) << t.allReduce;
      EXPECT_LT(relDiff(t.weights, ref.weights), 1e-5) << "worker " << w;
      ASSERT_EQ(t.finalChecksums.size(), G);
      for (size_t g = 0; g < G; ++g)
        EXPECT_EQ(t.finalChecksums[g], got[0].finalChecksums[0]) << "worker " << w << " replica " << g;
      EXPECT_EQ(t.weights, got[0].weights);
      // Logical GPUs: replica 0's cross-worker hop is timed as the network phase (its events), and
      // only replica 0 carries it; one communicator over physical GPUs has no hop of its own. (A
      // step's network time is capped by its all-reduce time, which the wait for the slowest
      // replica may take whole on a loaded machine: summed over every step and worker below.)
      double others = 0;
      for (const auto& step : t.steps)
        for (size_t g = 0; g < step.replicas.size(); ++g)
          (g % static_cast<size_t>(l.gpus) == 0 ? network : others) += step.replicas[g].phases.network;
      EXPECT_EQ(others, 0.0) << "worker " << w;
      for (int k = 0; k < steps; ++k) {
        const ml::StepResult& r = t.steps[static_cast<size_t>(k)];
        EXPECT_TRUE(r.finite);
        EXPECT_EQ(r.samples, l.batch);
        EXPECT_NEAR(r.lossSum, ref.steps[static_cast<size_t>(k)].lossSum,
                    1e-3 * std::abs(ref.steps[static_cast<size_t>(k)].lossSum));
      }
    }
    if (l.logical)
      EXPECT_GT(network, 0.0);
    else
      EXPECT_EQ(network, 0.0);
  }
  if (ran == 0) GTEST_SKIP() << "every layout needs more GPUs than this machine has";
}

// Synchronized BatchNormalization across workers on GPUs: its per-channel sums go through the
// strategy's cross-replica sum, which spans every worker, so 2 workers x 2 logical GPUs give the
// weights of one GPU replica (shards of 3/2/3/2).
TEST_F(GpuWorkers, SynchronizedBatchNormSpansEveryWorker) {
  if (!fakePlugin() && report().gpus.size() < 2) GTEST_SKIP() << "needs 2 GPUs, this machine has " << report().gpus.size();
  ml::ModelSpec m;
  m.inputShape = {12};
  m.layers.push_back(ml::makeLayerSpec("Reshape", {{"target_shape", {2, 2, 3}}}));
  m.layers.push_back(ml::makeLayerSpec("Conv2D", {{"filters", 4}, {"kernel_size", 2}, {"padding", "same"}}));
  m.layers.push_back(ml::makeLayerSpec("BatchNormalization", {{"momentum", 0.8}, {"synchronized", true}}));
  m.layers.push_back(ml::makeLayerSpec("Activation", {{"activation", "relu"}}));
  m.layers.push_back(ml::makeLayerSpec("Flatten"));
  m.layers.push_back(ml::makeLayerSpec("Dense", {{"units", 4}, {"activation", "softmax"}}));
  auto make = [&](const std::string& devices, ml::WorkerGroup* workers) {
    ml::StrategyOptions so;
    so.workers = workers;
    return mltest::makeStrategy(m, devices, mltest::optimizer("sgd"), so, 7);
  };
  const Trained one = train(*make("gpu:0", nullptr), data(), 10, 5, 1, kSteps);
  const auto got = mltest::onWorkers<Trained>(2, 60, [&](int w, ml::WorkerGroup& g) {
    return train(*make(fakePlugin() ? "gpu:0x2" : "gpu:" + std::to_string(w) + "x2", &g), data(), 10, 5, 1, kSteps);
  });
  for (int w = 0; w < 2; ++w) {
    EXPECT_LT(relDiff(got[static_cast<size_t>(w)].weights, one.weights), 2e-5) << "worker " << w;
    EXPECT_EQ(got[static_cast<size_t>(w)].weights, got[0].weights);
  }
}

TEST_F(GpuWorkers, TheFlatMpiAllReduceIsRefusedOnGpusWithTheWayOut) {
  auto groups = ml::makeThreadWorkers(2, 5);
  ml::StrategyOptions so;
  so.devices = ml::parseDevices("gpu:0");
  so.allreduce = ml::AllReduceAlgo::Mpi;
  so.workers = groups[0].get();
  ml::OptimizerSpec o;
  o.kind = ml::OptimizerKind::Sgd;
  try {
    ml::MirroredStrategy s(mltest::makeModel(false), ml::Loss::make(ml::LossKind::SparseCategoricalCrossentropy, false),
                           ml::MetricKind::Accuracy, o, so);
    ADD_FAILURE() << "the flat mpi all-reduce was accepted on GPUs";
  } catch (const ml::UserError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("worker 1 of 2"), std::string::npos) << m;
    EXPECT_NE(m.find("NCCL"), std::string::npos) << m;
  }
}

}  // namespace
