// BatchNormalization under mirrored training. Synchronized statistics: N replicas give the weights
// of one (N in 1..4, uneven shards, empty shards under accumulation). Per-replica statistics: they
// do not, and the gap shrinks as each replica's shard grows. Moving statistics stay bit-identical
// across replicas in both modes (the checksums cover them: they sit in the flat parameter buffer).
// A convolutional model without BatchNorm keeps the plain invariant. Across workers, every sum
// spans every worker's replicas.
#include <gtest/gtest.h>

#include "distribute/MirroredStrategy.h"
#include "nn/BatchNorm.h"
#include "support/Strategies.h"
#include "support/TestData.h"
#include "support/Training.h"
#include "support/Workers.h"
#include "train/Trainer.h"

namespace {

using mltest::relDiff;
using mltest::train;

// 4x4x3 "images" of the 4-class test problem.
const ml::Dataset& images() {
  static const ml::Dataset d = mltest::makeImages(1200, {4, 4, 3});
  return d;
}

ml::ModelSpec convModel(int bn /* 0 none, 1 per-replica, 2 synchronized */) {
  ml::ModelSpec m;
  m.inputShape = {4, 4, 3};
  m.layers.push_back(ml::makeLayerSpec("Conv2D", {{"filters", 6}, {"kernel_size", 2}, {"activation", bn ? "linear" : "relu"}}));
  if (bn) m.layers.push_back(ml::makeLayerSpec("BatchNormalization", {{"momentum", 0.8}, {"synchronized", bn == 2}}));
  if (bn) m.layers.push_back(ml::makeLayerSpec("Activation", {{"activation", "tanh"}}));
  m.layers.push_back(ml::makeLayerSpec("MaxPooling2D", {{"pool_size", 2}, {"padding", "same"}}));
  m.layers.push_back(ml::makeLayerSpec("Flatten"));
  m.layers.push_back(ml::makeLayerSpec("Dense", {{"units", 4}, {"activation", "softmax"}}));
  return m;
}

std::unique_ptr<ml::MirroredStrategy> strategy(int n, int bn, ml::WorkerGroup* workers = nullptr) {
  ml::StrategyOptions so;
  so.workers = workers;
  return mltest::makeStrategy(convModel(bn), "cpu:" + std::to_string(n), mltest::optimizer("sgd"), so, 7);
}

// SGD at 0.05 over the order of seed 3; train() checks the replicas' bits after every step.
const mltest::TrainOptions kSteps{.lr = 0.05f, .orderSeed = 3, .expectFullBatch = false};

TEST(BatchNormMirrored, SynchronizedStatisticsGiveTheWeightsOfOneReplica) {
  const int64_t B = 10;  // shards of 5/5, 4/3/3, 3/2/3/2
  const auto one = train(*strategy(1, 2), images(), B, 6, 1, kSteps).weights;
  for (int n = 2; n <= 4; ++n) {
    auto s = strategy(n, 2);
    const auto w = train(*s, images(), B, 6, 1, kSteps).weights;
    EXPECT_LT(relDiff(w, one), 2e-5) << n << " replicas";
    // The moving statistics moved (momentum 0.8, 6 steps) and are the one replica's.
    const auto& bn = dynamic_cast<const ml::BatchNorm&>(s->model(n - 1).layer(1));
    EXPECT_GT(std::fabs(bn.movingMean()[0]), 1e-3);
  }
}

TEST(BatchNormMirrored, SynchronizedStatisticsHoldWithEmptyShardsUnderAccumulation) {
  // 5 samples in 2 micro-batches of 2 and 3 on 4 replicas: replicas sit out different micro-batches.
  const auto one = train(*strategy(1, 2), images(), 5, 4, 2, kSteps).weights;
  const auto four = train(*strategy(4, 2), images(), 5, 4, 2, kSteps).weights;
  EXPECT_LT(relDiff(four, one), 2e-5);
}

TEST(BatchNormMirrored, PerReplicaStatisticsDependOnTheShardAndTheGapShrinksWithItsSize) {
  // The same 2 replicas against 1, with 4 and then 48 samples per replica.
  const double small = relDiff(train(*strategy(2, 1), images(), 8, 4, 1, kSteps).weights,
                               train(*strategy(1, 1), images(), 8, 4, 1, kSteps).weights);
  const double large = relDiff(train(*strategy(2, 1), images(), 96, 4, 1, kSteps).weights,
                               train(*strategy(1, 1), images(), 96, 4, 1, kSteps).weights);
  EXPECT_GT(small, 1e-3) << "per-replica statistics should differ from the global batch's";
  EXPECT_LT(large, small) << "the gap should shrink as the per-replica batch grows";
  // Synchronized statistics close the gap at the small batch.
  EXPECT_LT(relDiff(train(*strategy(2, 2), images(), 8, 4, 1, kSteps).weights,
                    train(*strategy(1, 2), images(), 8, 4, 1, kSteps).weights),
            2e-5);
}

// Across workers (thread workers standing in for mpirun's processes): every BatchNormalization sum
// spans every worker's replicas, so W workers x N replicas with synchronized statistics give the
// weights of one replica, empty shards under accumulation included, and every worker ends with the
// same moving statistics; per-replica statistics across workers differ from one replica's.
TEST(BatchNormMirrored, SynchronizedStatisticsSpanEveryWorker) {
  struct Layout {
    int workers, local;
    int64_t batch;
    int accumulate;
  };
  for (const Layout l : {Layout{2, 1, 10, 1}, Layout{2, 2, 10, 1}, Layout{3, 1, 5, 2}}) {
    SCOPED_TRACE(std::to_string(l.workers) + " workers x cpu:" + std::to_string(l.local));
    const auto one = train(*strategy(1, 2), images(), l.batch, 4, l.accumulate, kSteps).weights;
    const auto got = mltest::onWorkers<std::vector<float>>(l.workers, 30, [&](int, ml::WorkerGroup& g) {
      return train(*strategy(l.local, 2, &g), images(), l.batch, 4, l.accumulate, kSteps).weights;
    });
    for (int w = 0; w < l.workers; ++w) {
      EXPECT_LT(relDiff(got[static_cast<size_t>(w)], one), 2e-5) << "worker " << w;
      EXPECT_EQ(got[static_cast<size_t>(w)], got[0]) << "worker " << w;
    }
  }
  const auto perReplicaOne = train(*strategy(1, 1), images(), 8, 4, 1, kSteps).weights;
  const auto perReplica = mltest::onWorkers<std::vector<float>>(
      2, 30, [&](int, ml::WorkerGroup& g) { return train(*strategy(1, 1, &g), images(), 8, 4, 1, kSteps).weights; });
  EXPECT_GT(relDiff(perReplica[0], perReplicaOne), 1e-3) << "per-replica statistics should differ from the global batch's";
  EXPECT_EQ(perReplica[1], perReplica[0]) << "the moving statistics and weights are the same on every worker";
}

TEST(BatchNormMirrored, ConvolutionalModelKeepsTheInvariant) {
  const auto one = train(*strategy(1, 0), images(), 11, 5, 1, kSteps).weights;
  for (int n = 2; n <= 4; ++n)
    EXPECT_LT(relDiff(train(*strategy(n, 0), images(), 11, 5, 1, kSteps).weights, one), 2e-5) << n << " replicas";
}

}  // namespace
