// Several workers (processes) as one mirrored run, with in-process thread workers standing in for
// mpirun's processes (the MPI plugin has the same contract; tests/app/mpi_test.sh runs the real
// thing). The DESIGN invariant across workers: W workers x N replicas with global batch B give the
// weights of one replica with batch B (to float rounding), with uneven shards and accumulation,
// and every replica of every worker holds the same bits.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <numeric>
#include <thread>

#include "distribute/MirroredStrategy.h"
#include "distribute/ThreadWorkers.h"
#include "distribute/Workers.h"
#include "support/Strategies.h"
#include "support/TestData.h"
#include "support/Training.h"
#include "support/Workers.h"
#include "telemetry/Channel.h"
#include "train/Trainer.h"

namespace {

using mltest::makeClassification;
using mltest::makeModel;
using mltest::relDiff;
using mltest::train;

const ml::Dataset& data() {
  static const ml::Dataset d = makeClassification(600);
  return d;
}

// n CPU replicas of makeModel(dropout) with Adam, in `workers` (none: one process).
std::unique_ptr<ml::MirroredStrategy> strategy(int n, ml::WorkerGroup* workers, const std::string& algo = "ring",
                                               int64_t bucketBytes = 1 << 20, bool dropout = true) {
  ml::StrategyOptions so;
  so.allreduce = ml::parseAllReduceAlgo(algo);
  so.bucketBytes = bucketBytes;
  so.workers = workers;
  return mltest::makeStrategy(makeModel(dropout), "cpu:" + std::to_string(n), mltest::optimizer("adam"), so);
}

using mltest::Trained;

// The tests compare every worker's replicas after the last step themselves (finalChecksums).
const mltest::TrainOptions kSteps{.expectFinite = false, .expectFullBatch = false, .checkReplicas = false};

using mltest::onWorkers;

TEST(ThreadWorkers, SumsBroadcastsAndGathersWithTheSameBitsEverywhere) {
  const auto got = onWorkers<std::vector<double>>(3, 10, [](int rank, ml::WorkerGroup& g) {
    std::vector<float> f = {0.1f * static_cast<float>(rank + 1), 1e-8f, -3.0f};
    g.allReduce(std::span<float>(f), "test sum");
    std::vector<float> b = {static_cast<float>(rank), 7.0f};
    g.broadcast(std::span<float>(b), 2, "test broadcast");
    const auto names = g.allGather("w" + std::to_string(rank), "test gather");
    EXPECT_EQ(names, (std::vector<std::string>{"w0", "w1", "w2"}));
    return std::vector<double>{f[0], f[1], f[2], b[0], b[1]};
  });
  const float expect0 = (0.1f * 1 + 0.1f * 2) + 0.1f * 3;  // in rank order
  for (const auto& v : got) {
    EXPECT_EQ(v, got[0]);
    EXPECT_EQ(static_cast<float>(v[0]), expect0);
    EXPECT_FLOAT_EQ(static_cast<float>(v[1]), 3e-8f);
    EXPECT_EQ(v[2], -9.0);
    EXPECT_EQ(v[3], 2.0);  // root 2's value
  }
}

TEST(ThreadWorkers, AWorkerThatNeverArrivesIsNamedWithinTheTimeout) {
  auto groups = ml::makeThreadWorkers(3, 0.3);
  groups[2]->setProgress(4, "backward");
  std::string msg0, msg1;
  const auto t0 = std::chrono::steady_clock::now();
  std::thread a([&] {
    std::vector<float> v(3, 1.0f);
    try {
      groups[0]->allReduce(std::span<float>(v), "the all-reduce of step 5");
    } catch (const ml::WorkerLost& e) {
      msg0 = e.what();
    }
  });
  std::thread b([&] {
    std::vector<float> v(3, 1.0f);
    try {
      groups[1]->allReduce(std::span<float>(v), "the all-reduce of step 5");
    } catch (const ml::WorkerLost& e) {
      msg1 = e.what();
    }
  });
  a.join();
  b.join();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(msg0.find("worker 3 of 3"), std::string::npos) << msg0;
  EXPECT_NE(msg0.find("backward of step 4"), std::string::npos) << msg0;
  EXPECT_NE(msg0.find("the all-reduce of step 5"), std::string::npos) << msg0;
  EXPECT_FALSE(msg1.empty());
  EXPECT_LT(waited, 5.0);
}

struct Layout {
  int workers, local;
  int64_t batch;
  int accumulate;
  const char* algo;
};

class AcrossWorkers : public ::testing::TestWithParam<Layout> {};

TEST_P(AcrossWorkers, WorkersTimesReplicasGiveTheWeightsOfOneReplica) {
  const Layout l = GetParam();
  const int steps = 4;
  auto one = strategy(1, nullptr);
  const Trained ref = train(*one, data(), l.batch, steps, l.accumulate, kSteps);
  const auto got = onWorkers<Trained>(l.workers, 30, [&](int, ml::WorkerGroup& g) {
    // Buckets of 400 bytes: several cross-worker sums per step, overlapping backward.
    auto s = strategy(l.local, &g, l.algo, 400);
    EXPECT_EQ(s->globalReplicas(), l.workers * l.local);
    return train(*s, data(), l.batch, steps, l.accumulate, kSteps);
  });
  const size_t G = static_cast<size_t>(l.workers * l.local);
  for (int w = 0; w < l.workers; ++w) {
    const Trained& t = got[static_cast<size_t>(w)];
    EXPECT_LT(relDiff(t.weights, ref.weights), 1e-5) << "worker " << w;
    ASSERT_EQ(t.finalChecksums.size(), G);
    for (size_t g = 0; g < G; ++g) EXPECT_EQ(t.finalChecksums[g], got[0].finalChecksums[0]) << "worker " << w << " replica " << g;
    EXPECT_EQ(t.weights, got[0].weights);  // the same bits on every worker
    ASSERT_EQ(t.steps.size(), static_cast<size_t>(steps));
    for (int k = 0; k < steps; ++k) {
      const ml::StepResult& r = t.steps[static_cast<size_t>(k)];
      EXPECT_EQ(r.samples, l.batch);
      ASSERT_EQ(r.replicas.size(), G);
      int64_t samples = 0;
      for (const auto& rs : r.replicas) samples += rs.samples;
      EXPECT_EQ(samples, l.batch);
      // The loss is every worker's: the same as one replica's to rounding.
      EXPECT_NEAR(r.lossSum, ref.steps[static_cast<size_t>(k)].lossSum,
                  1e-3 * std::abs(ref.steps[static_cast<size_t>(k)].lossSum));
      EXPECT_EQ(r.lossSum, got[0].steps[static_cast<size_t>(k)].lossSum);
    }
  }
  // The cross-worker hop is timed on the replica that carries it (local replica 0 of each worker).
  double network = 0;
  for (const auto& rs : got[0].steps.back().replicas) network += rs.phases.network;
  EXPECT_GT(network, 0.0);
}

INSTANTIATE_TEST_SUITE_P(Layouts, AcrossWorkers,
                         ::testing::Values(Layout{2, 2, 64, 1, "ring"}, Layout{3, 1, 50, 1, "mpi"}, Layout{2, 3, 13, 1, "ring"},
                                           Layout{2, 3, 29, 2, "reduce-to-one"}, Layout{3, 2, 40, 3, "ring"}));

TEST(AcrossWorkers, EvaluationSplitsAcrossEveryWorkerAndGathersTheOutputs) {
  auto one = strategy(1, nullptr);
  std::vector<int64_t> idx(37);
  std::iota(idx.begin(), idx.end(), 5);
  std::vector<float> ref(37 * 4);
  const auto r1 = one->evaluate(data(), idx, ref.data());
  const auto got = onWorkers<std::vector<float>>(2, 30, [&](int, ml::WorkerGroup& g) {
    auto s = strategy(2, &g);
    std::vector<float> out(37 * 4, 99.0f);
    const auto r = s->evaluate(data(), idx, out.data());
    EXPECT_EQ(r.samples, 37);
    EXPECT_NEAR(r.lossSum, r1.lossSum, 1e-4);
    return out;
  });
  for (const auto& out : got)
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(out[i], ref[i], 1e-6) << i;
}

TEST(AcrossWorkers, AStopRequestedOnOneWorkerIsSeenByAllAfterTheSameStep) {
  const auto votes = onWorkers<std::vector<int>>(2, 30, [&](int rank, ml::WorkerGroup& g) {
    auto s = strategy(1, &g);
    std::vector<int64_t> idx(20);
    std::iota(idx.begin(), idx.end(), 0);
    std::vector<int> v;
    for (int k = 1; k <= 3; ++k) {
      if (rank == 1 && k == 2) s->requestStop();
      v.push_back(s->trainStep(data(), idx, 1, 0.01f, static_cast<uint64_t>(k)).stopVotes);
    }
    return v;
  });
  EXPECT_EQ(votes[0], (std::vector<int>{0, 1, 1}));
  EXPECT_EQ(votes[1], votes[0]);
}

TEST(AcrossWorkers, AFailureOnOneWorkerStopsEveryWorkerWithItsMessage) {
  // Replica cpu:1 of worker 2 fails in step 2 (as a device error would); worker 1 must not hang
  // and both stop with worker 2's message, after the same step.
  auto groups = ml::makeThreadWorkers(2, 20);
  std::vector<std::string> msg(2);
  std::vector<int> stepsDone(2, 0);
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w)
    threads.emplace_back([&, w] {
      auto s = strategy(2, groups[static_cast<size_t>(w)].get());
      s->setFaults(ml::parseFaults({"fail:cpu:1@step=2@worker=2"}, s->options().devices, w, 2));
      std::vector<int64_t> idx(40);
      std::iota(idx.begin(), idx.end(), 0);
      try {
        for (int k = 1; k <= 3; ++k) {
          s->trainStep(data(), idx, 1, 0.01f, static_cast<uint64_t>(k));
          stepsDone[static_cast<size_t>(w)] = k;
        }
      } catch (const std::exception& e) {
        msg[static_cast<size_t>(w)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(msg[0], "worker 2 of 2 on host localhost: an injected failure on cpu:1 in step 2 (fail fault)");
  EXPECT_EQ(msg[1], "an injected failure on cpu:1 in step 2 (fail fault)");
  EXPECT_EQ(stepsDone, (std::vector<int>{1, 1}));
}

TEST(Faults, AWorkerSuffixPicksOneWorkerAndIsChecked) {
  const auto devices = ml::parseDevices("cpu:2");
  EXPECT_EQ(ml::parseFaults({"nan:cpu:1@step=3@worker=2"}, devices, 1, 2).nanReplica, 1);
  EXPECT_EQ(ml::parseFaults({"nan:cpu:1@worker=2@step=3"}, devices, 1, 2).nanStep, 3);
  EXPECT_EQ(ml::parseFaults({"nan:cpu:1@step=3@worker=2"}, devices, 0, 2).nanReplica, -1);
  EXPECT_EQ(ml::parseFaults({"fail:cpu:0@step=4"}, devices, 1, 2).failStep, 4);  // every worker
  EXPECT_THROW(ml::parseFaults({"nan:cpu:1@step=3@worker=3"}, devices, 0, 2), ml::UserError);
  EXPECT_THROW(ml::parseFaults({"nan:cpu:1@step=3@step=4"}, devices, 0, 2), ml::UserError);
  EXPECT_THROW(ml::parseFaults({"fail:cpu:1"}, devices, 0, 1), ml::UserError);  // needs @step
}

TEST(AcrossWorkers, ALostWorkerIsNamedAndTheOthersDoNotWaitForever) {
  auto groups = ml::makeThreadWorkers(2, 0.5);
  std::string msg;
  const auto t0 = std::chrono::steady_clock::now();
  std::thread a([&] {
    auto s = strategy(2, groups[0].get());
    std::vector<int64_t> idx(40);
    std::iota(idx.begin(), idx.end(), 0);
    try {
      s->trainStep(data(), idx, 1, 0.01f, 1);
    } catch (const ml::UserError& e) {
      msg = e.what();
    }
  });
  a.join();  // worker 2 never trains
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(msg.find("worker 2 of 2"), std::string::npos) << msg;
  EXPECT_LT(waited, 10.0);
}

TEST(AcrossWorkers, WhatDoesNotCrossProcessesIsRefusedWithTheWayOut) {
  EXPECT_THROW(
      {
        try {
          strategy(2, nullptr, "mpi");
        } catch (const ml::UserError& e) {
          EXPECT_NE(std::string(e.what()).find("mpirun"), std::string::npos) << e.what();
          throw;
        }
      },
      ml::UserError);
  auto groups = ml::makeThreadWorkers(2, 5);
  EXPECT_THROW(strategy(2, groups[0].get(), "mpi"), ml::UserError);  // flat: one replica per worker
  ml::StrategyOptions so;
  so.devices = ml::parseDevices("cpu:2");
  so.shardOptimizer = true;
  so.workers = groups[0].get();
  try {
    ml::MirroredStrategy s(makeModel(false), ml::Loss::make(ml::LossKind::SparseCategoricalCrossentropy, false),
                           ml::MetricKind::Accuracy, mltest::optimizer("adam"), so);
    ADD_FAILURE() << "a sharded optimizer across workers was accepted";
  } catch (const ml::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("worker 1 of 2"), std::string::npos) << e.what();
  }
}

// The Trainer over two workers: one run of 4 replicas, its start lines and events say so, and both
// workers end with the same weights as one process training on cpu:4.
TEST(AcrossWorkers, TheTrainerRunsOneRunOverEveryWorker) {
  auto split = mltest::makeSplit(400, 100);
  auto project = mltest::makeProject("two workers", makeModel(true), "cpu:2", 40);
  project.training.epochs = 2;
  ml::TelemetryHub refHub;
  auto refCh = refHub.subscribe();
  auto p4 = project;
  p4.distribute.devices = ml::parseDevices("cpu:4");
  ml::Trainer ref(p4, split, refHub);
  ASSERT_EQ(ref.run().status, ml::RunStatus::Finished);
  auto refW = ref.strategy().model(0).params();
  struct Out {
    std::vector<float> weights;
    std::vector<ml::Event> events;
    std::vector<std::string> lines;
    ml::RunStatus status = ml::RunStatus::Failed;
    std::string message;
  };
  const auto got = onWorkers<Out>(2, 30, [&](int, ml::WorkerGroup& g) {
    ml::TelemetryHub hub;
    auto ch = hub.subscribe();
    ml::TrainerOptions o;
    o.workers = &g;
    ml::Trainer t(project, split, hub, o);
    Out out;
    out.lines = t.startLines();
    const auto fin = t.run();
    out.status = fin.status;
    out.message = fin.message;
    auto w = t.strategy().model(0).params();
    out.weights.assign(w.begin(), w.end());
    out.events = mltest::drainAll(*ch);
    return out;
  });
  for (int w = 0; w < 2; ++w) {
    const Out& o = got[static_cast<size_t>(w)];
    EXPECT_EQ(o.status, ml::RunStatus::Finished) << o.message;
    EXPECT_LT(relDiff(o.weights, std::vector<float>(refW.begin(), refW.end())), 1e-5);
    EXPECT_EQ(o.weights, got[0].weights);
    ASSERT_FALSE(o.lines.empty());
    EXPECT_EQ(
        o.lines[0].rfind(
            "worker " + std::to_string(w + 1) + " of 2 on host localhost, 2 local replicas; 4 replicas in all on 1 host", 0),
        0u)
        << o.lines[0];
    int steps = 0;
    for (const auto& e : o.events) {
      if (const auto* s = std::get_if<ml::RunStarted>(&e)) {
        EXPECT_EQ(s->replicas, 4);
        EXPECT_EQ(s->workers, 2);
        ASSERT_EQ(s->devices.size(), 4u);
        EXPECT_EQ(s->devices[3], "localhost/worker2/cpu:1 (simulated)");
      } else if (const auto* st = std::get_if<ml::StepEvent>(&e)) {
        ++steps;
        EXPECT_EQ(st->replicas.size(), 4u);
      } else if (const auto* ep = std::get_if<ml::EpochEvent>(&e)) {
        EXPECT_TRUE(ep->inSync);
        EXPECT_EQ(ep->checksums.size(), 4u);
      }
    }
    EXPECT_EQ(steps, 20);  // 400 samples / 40 x 2 epochs
  }
}

}  // namespace
