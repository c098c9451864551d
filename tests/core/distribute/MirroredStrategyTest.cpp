// The mirrored-step invariant: N replicas with global batch B give the same weights as one
// replica with batch B (to float rounding), for any N, with unequal and empty shards, SGD and
// Adam, dropout on; and the replicas are bit-identical after every step.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <numeric>

#include "distribute/MirroredStrategy.h"
#include "support/Strategies.h"
#include "support/TestData.h"
#include "support/Training.h"
#include "tensor/Denormals.h"
#include "train/Trainer.h"

namespace {

using mltest::makeClassification;
using mltest::makeModel;
using mltest::makeStrategy;
using mltest::optimizer;
using mltest::relDiff;
using mltest::train;

// n CPU replicas of makeModel(dropout), initialized with seed 11.
std::unique_ptr<ml::MirroredStrategy> strategy(int n, const std::string& opt, bool dropout, const std::string& algo = "ring",
                                               int64_t bucketBytes = 1 << 20, ml::BucketComm comm = ml::BucketComm::Auto,
                                               bool shard = false) {
  ml::StrategyOptions so;
  so.shardOptimizer = shard;
  so.bucketComm = comm;
  so.allreduce = ml::parseAllReduceAlgo(algo);
  so.bucketBytes = bucketBytes;
  return makeStrategy(makeModel(dropout), "cpu:" + std::to_string(n), optimizer(opt), so);
}

const ml::Dataset& data() {
  static const ml::Dataset d = makeClassification(1000);
  return d;
}

class Invariant : public ::testing::TestWithParam<std::tuple<std::string, int64_t>> {};

TEST_P(Invariant, NReplicasGiveTheWeightsOfOneReplica) {
  const auto [opt, B] = GetParam();
  const int steps = 4;
  auto one = strategy(1, opt, true);
  const auto ref = train(*one, data(), B, steps).weights;
  for (int n : {2, 3, 4, 7}) {
    auto s = strategy(n, opt, true);
    const auto w = train(*s, data(), B, steps).weights;
    EXPECT_LT(relDiff(w, ref), 1e-5) << n << " replicas, " << opt << ", global batch " << B;
  }
}

INSTANTIATE_TEST_SUITE_P(OptimizersAndBatches, Invariant,
                         ::testing::Combine(::testing::Values("sgd", "adam"), ::testing::Values(64, 100, 13)));

// Subnormals are flushed while the replicas train (tensor/Denormals.h), and only then: the
// caller's own floating-point mode is the same after a step as before it.
TEST(MirroredStrategy, TrainingLeavesTheCallersFloatingPointModeAsItWas) {
  auto s = strategy(2, "adam", true);
  ASSERT_FALSE(ml::FlushDenormals::active());
  (void)train(*s, data(), 64, 2);
  EXPECT_FALSE(ml::FlushDenormals::active());
  volatile float tiny = 1e-38f, half = 0.5f;
  EXPECT_GT(tiny * half, 0.0f);
}

TEST(MirroredStrategy, ReduceToOneGivesTheSameWeightsAsRing) {
  auto a = strategy(3, "adam", true, "ring");
  auto b = strategy(3, "adam", true, "reduce-to-one");
  EXPECT_LT(relDiff(train(*a, data(), 100, 3).weights, train(*b, data(), 100, 3).weights), 1e-5);
}

TEST(MirroredStrategy, BucketBoundariesDoNotChangeTheResult) {
  auto ref = strategy(1, "sgd", false);
  const auto want = train(*ref, data(), 64, 3).weights;
  const int64_t params = ref->model(0).paramCount();
  // one bucket exactly, one float short, one float per bucket, and a size cutting a layer in two
  for (int64_t bytes : {params * 4, params * 4 - 4, int64_t{4}, int64_t{4 * 100}}) {
    auto s = strategy(3, "sgd", false, "ring", bytes);
    EXPECT_LT(relDiff(train(*s, data(), 64, 3).weights, want), 1e-5)
        << "bucket bytes " << bytes << ", buckets " << s->bucketCount();
  }
}

// Buckets reduced by communication threads during backward, or by the replicas themselves between
// layers: the same weights as one replica, replicas bit-identical, empty shards never hang, and a
// non-finite gradient is named before any bucket leaves the replica.
TEST(MirroredStrategy, BothWaysOfReducingBucketsGiveTheWeightsOfOneReplica) {
  for (const std::string opt : {"sgd", "adam"}) {
    auto ref = strategy(1, opt, true);
    const auto want = train(*ref, data(), 64, 3).weights;
    for (auto comm : {ml::BucketComm::Threads, ml::BucketComm::Inline}) {
      const bool threads = comm == ml::BucketComm::Threads;
      for (int n : {2, 3}) {
        for (const std::string algo : {"ring", "reduce-to-one"}) {
          auto s = strategy(n, opt, true, algo, 400, comm);
          ASSERT_GT(s->bucketCount(), 1);
          EXPECT_EQ(s->bucketsOnCommThreads(), threads);
          EXPECT_EQ(s->bucketsInline(), !threads);
          EXPECT_LT(relDiff(train(*s, data(), 64, 3).weights, want), 1e-5)
              << opt << " " << algo << " " << n << (threads ? " threads" : " inline");
        }
      }
      auto seven = strategy(7, opt, true, "ring", 400, comm);  // batch 3: four replicas with nothing
      auto one = strategy(1, opt, true);
      EXPECT_LT(relDiff(train(*seven, data(), 3, 3).weights, train(*one, data(), 3, 3).weights), 1e-5);
    }
  }
  ml::Dataset d = data();
  d.x[25 * 12] = std::numeric_limits<float>::infinity();
  for (auto comm : {ml::BucketComm::Threads, ml::BucketComm::Inline}) {
    auto s = strategy(3, "sgd", false, "ring", 400, comm);
    std::vector<int64_t> idx(30);
    std::iota(idx.begin(), idx.end(), 0);  // row 25: replica 2
    const auto r = s->trainStep(d, idx, 1, 0.1f, 1);
    EXPECT_FALSE(r.finite);
    EXPECT_EQ(r.badReplica, 2);
    // Inline collectives are timed as all-reduce, not as backward.
    auto t = strategy(2, "sgd", false, "ring", 400, comm);
    const auto rt = t->trainStep(data(), idx, 1, 0.1f, 1);
    for (const auto& rs : rt.replicas) EXPECT_GT(rs.phases.allreduce + rs.phases.wait, 0);
  }
}

TEST(MirroredStrategy, EmptyShardsContributeZeroAndNeverHang) {
  // Global batch 3 on 7 replicas: four replicas get no samples.
  auto one = strategy(1, "sgd", true);
  auto seven = strategy(7, "sgd", true);
  const auto ref = train(*one, data(), 3, 5).weights;
  EXPECT_LT(relDiff(train(*seven, data(), 3, 5).weights, ref), 1e-5);
}

TEST(MirroredStrategy, AccumulationOfKMicroBatchesEqualsOneBatch) {
  auto whole = strategy(1, "adam", true);
  const auto ref = train(*whole, data(), 64, 3, 1).weights;
  for (int n : {1, 2, 3}) {
    auto acc = strategy(n, "adam", true);
    EXPECT_LT(relDiff(train(*acc, data(), 64, 3, 4).weights, ref), 1e-5) << n << " replicas, 4 micro-batches of 16";
  }
}

TEST(MirroredStrategy, EveryPhaseIsTimedAndSamplesAreCounted) {
  auto s = strategy(2, "sgd", false);
  std::vector<int64_t> idx(101);
  std::iota(idx.begin(), idx.end(), 0);
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = s->trainStep(data(), idx, 1, 0.1f, 1);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(r.replicas.size(), 2u);
  EXPECT_EQ(r.replicas[0].samples, 50);
  EXPECT_EQ(r.replicas[1].samples, 51);
  for (const auto& rs : r.replicas) {
    EXPECT_GT(rs.phases.forward, 0);
    EXPECT_GT(rs.phases.backward, 0);
    EXPECT_GT(rs.phases.optimizer, 0);
    // Two replicas communicate: the all-reduce (or the wait for the other replica) takes time...
    EXPECT_GT(rs.phases.allreduce + rs.phases.wait, 0);
    // ...and no phase is counted twice: together they fit in the step's wall time.
    EXPECT_LE(rs.phases.total(), wall);
  }
}

TEST(MirroredStrategy, EvaluateGivesTheSameOutputsForAnyReplicaCount) {
  auto one = strategy(1, "sgd", true);
  auto four = strategy(4, "sgd", true);
  std::vector<int64_t> idx(37);
  std::iota(idx.begin(), idx.end(), 5);
  std::vector<float> a(37 * 4), b(37 * 4);
  const auto ra = one->evaluate(data(), idx, a.data());
  const auto rb = four->evaluate(data(), idx, b.data());
  EXPECT_EQ(ra.samples, 37);
  EXPECT_EQ(rb.samples, 37);
  EXPECT_NEAR(ra.lossSum, rb.lossSum, 1e-4);
  // Same weights and rows; only the BLAS blocking differs with the shard size.
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6) << i;
}

TEST(MirroredStrategy, NonFiniteGradientNamesTheReplica) {
  ml::Dataset d = data();
  // Sample 7 gets an infinite feature. With an identity order and 3 replicas over batch 30,
  // it lands in replica 0's shard (rows 0..9).
  d.x[7 * 12] = std::numeric_limits<float>::infinity();
  auto s = strategy(3, "sgd", false);
  std::vector<int64_t> idx(30);
  std::iota(idx.begin(), idx.end(), 0);
  auto r = s->trainStep(d, idx, 1, 0.1f, 1);
  EXPECT_FALSE(r.finite);
  EXPECT_EQ(r.badReplica, 0);
  std::iota(idx.begin(), idx.end(), 0);
  std::swap(idx[7], idx[25]);  // now it is row 25: replica 2 (rows 20..29)
  auto s2 = strategy(3, "sgd", false);
  r = s2->trainStep(d, idx, 1, 0.1f, 1);
  EXPECT_FALSE(r.finite);
  EXPECT_EQ(r.badReplica, 2);
  // Several buckets: the gradients are checked layer by layer before the comm threads reduce them.
  auto s3 = strategy(3, "sgd", false, "ring", 400);
  ASSERT_GT(s3->bucketCount(), 1);
  r = s3->trainStep(d, idx, 1, 0.1f, 1);
  EXPECT_FALSE(r.finite);
  EXPECT_EQ(r.badReplica, 2);
}

TEST(MirroredStrategy, ANaNSwallowedByReluIsStillCaughtInTheGradient) {
  // relu(NaN) is 0, so the loss stays finite; dW = x^T dz of the first layer does not.
  ml::Dataset d = data();
  d.x[40 * 12] = std::numeric_limits<float>::quiet_NaN();
  for (int64_t bytes : {int64_t{1} << 20, int64_t{400}}) {
    auto s = strategy(2, "sgd", false, "ring", bytes);
    std::vector<int64_t> idx(60);
    std::iota(idx.begin(), idx.end(), 0);  // sample 40 is in replica 1's half
    const auto r = s->trainStep(d, idx, 1, 0.1f, 1);
    EXPECT_FALSE(r.finite) << "bucket bytes " << bytes;
    EXPECT_EQ(r.badReplica, 1);
    EXPECT_EQ(r.badWhat, "gradient");
  }
  // One replica checks its gradient in its update, tile by tile, on one thread or split across a
  // team; only where the NaN's sample is in the batch.
  for (int threads : {1, 2, 3}) {
    for (bool withNaN : {true, false}) {
      ml::StrategyOptions so;
      so.threadsPerDevice = threads;
      auto s = makeStrategy(makeModel(false), "cpu:1", optimizer("adam"), so);
      std::vector<int64_t> idx(60);
      std::iota(idx.begin(), idx.end(), withNaN ? 0 : 100);
      const auto r = s->trainStep(d, idx, 1, 0.1f, 1);
      EXPECT_EQ(r.finite, !withNaN) << threads << " threads";
      if (withNaN) {
        EXPECT_EQ(r.badReplica, 0);
        EXPECT_EQ(r.badWhat, "gradient");
      }
    }
  }
}

}  // namespace

// ZeRO stage 1: each replica updates only the chunks it owns and keeps optimizer state for those
// alone, then the parameters are all-gathered. The invariant still holds (N sharded replicas = one
// replica), with every optimizer, uneven chunks (380 parameters over 3 replicas, buckets of 100
// floats cutting layers), both algorithms and both ways of reducing buckets; replicas stay
// bit-identical after every step (train() checks it).
TEST(ShardedOptimizer, NShardedReplicasGiveTheWeightsOfOneReplica) {
  for (const std::string opt : {"sgd", "adam", "rmsprop"}) {
    for (int64_t B : {64, 13}) {
      auto one = strategy(1, opt, true);
      const auto want = train(*one, data(), B, 4).weights;
      for (int n : {2, 3}) {
        for (int64_t bytes : {int64_t{1} << 20, int64_t{400}}) {
          for (const std::string algo : {"ring", "reduce-to-one"}) {
            for (auto comm : {ml::BucketComm::Threads, ml::BucketComm::Inline}) {
              if (bytes == (int64_t{1} << 20) && comm == ml::BucketComm::Inline) continue;  // one bucket: no difference
              auto s = strategy(n, opt, true, algo, bytes, comm, true);
              ASSERT_TRUE(s->shardedOptimizer());
              EXPECT_LT(relDiff(train(*s, data(), B, 4).weights, want), 1e-5)
                  << opt << ", batch " << B << ", " << n << " replicas, " << algo << ", bucket " << bytes;
            }
          }
        }
      }
    }
  }
}

// Each replica holds 1/N of the optimizer state: its slots are exactly its share, the shares
// cover every parameter once, and optimizerShare() (what the model summary shows) is that size.
TEST(ShardedOptimizer, EachReplicaKeepsItsShareOfTheOptimizerState) {
  for (int64_t bytes : {int64_t{1} << 20, int64_t{400}}) {
    auto s = strategy(3, "adam", false, "ring", bytes, ml::BucketComm::Auto, true);
    const int64_t P = s->model(0).paramCount();
    ml::StrategyOptions so = s->options();
    int64_t covered = 0;
    for (int r = 0; r < 3; ++r) {
      const auto slots = s->optimizerSlots(r);
      ASSERT_EQ(slots.size(), 2u);  // Adam: m and v
      const int64_t share = ml::optimizerShare(s->model(0), so, r);
      EXPECT_EQ(static_cast<int64_t>(slots[0].size()), share) << "replica " << r;
      EXPECT_EQ(static_cast<int64_t>(slots[1].size()), share);
      EXPECT_LE(share, P / 3 + s->bucketCount()) << "about a third of " << P;
      EXPECT_GE(share, P / 3 - s->bucketCount());
      covered += share;
    }
    EXPECT_EQ(covered, P);
    so.shardOptimizer = false;
    EXPECT_EQ(ml::optimizerShare(s->model(0), so, 1), P);
    auto full = strategy(3, "adam", false, "ring", bytes);
    EXPECT_EQ(static_cast<int64_t>(full->optimizerSlots(1)[0].size()), P);
  }
}

// On simulated devices the owner sums its chunk, updates it and writes the new parameters into
// the other replicas tile by tile (ShardedUpdate::sumUpdatePush) instead of the ring's reduce-scatter,
// the update and the all-gather one after the other. It adds in the ring's order, so the weights
// are the same bits, with every optimizer, uneven chunks and buckets cutting layers; where it
// cannot be fused (communication threads, bfloat16 on the wire) the three phases stay.
TEST(ShardedOptimizer, TheFusedExchangeGivesTheRingsBits) {
  auto make = [](int n, const std::string& opt, int64_t bytes, ml::BucketComm comm, bool fuse,
                 ml::AllReduceDtype dtype = ml::AllReduceDtype::Float32, bool dropout = true) {
    ml::StrategyOptions so;
    so.shardOptimizer = true;
    so.fuseShardedExchange = fuse;
    so.bucketComm = comm;
    so.bucketBytes = bytes;
    so.allreduceDtype = dtype;
    return makeStrategy(makeModel(dropout), "cpu:" + std::to_string(n), optimizer(opt), so);
  };
  for (const std::string opt : {"sgd", "adam", "rmsprop"}) {
    for (int n : {2, 3, 4}) {
      for (int64_t bytes : {int64_t{1} << 20, int64_t{400}}) {
        auto fused = make(n, opt, bytes, ml::BucketComm::Inline, true);
        auto apart = make(n, opt, bytes, ml::BucketComm::Inline, false);
        ASSERT_TRUE(fused->fusedExchange());
        ASSERT_FALSE(apart->fusedExchange());
        const auto a = train(*fused, data(), 13, 4).weights, b = train(*apart, data(), 13, 4).weights;
        ASSERT_EQ(a.size(), b.size());
        EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
            << opt << ", " << n << " replicas, bucket " << bytes;
      }
    }
  }
  // Micro-batches accumulate before the fused sum; replicas with no rows (7 over a batch of 3)
  // join it with zero gradients and nobody waits forever.
  for (const std::string opt : {"sgd", "adam"}) {
    auto fused = make(3, opt, 400, ml::BucketComm::Inline, true), apart = make(3, opt, 400, ml::BucketComm::Inline, false);
    const auto a = train(*fused, data(), 30, 3, 3).weights, b = train(*apart, data(), 30, 3, 3).weights;
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << opt << ", 3 micro-batches";
    auto seven = make(7, opt, 400, ml::BucketComm::Inline, true);
    ASSERT_TRUE(seven->fusedExchange());
    auto one = strategy(1, opt, true);
    EXPECT_LT(relDiff(train(*seven, data(), 3, 3).weights, train(*one, data(), 3, 3).weights), 1e-5)
        << opt << ", 7 replicas, batch 3";
  }
  EXPECT_FALSE(make(2, "adam", 400, ml::BucketComm::Threads, true)->fusedExchange());
  EXPECT_FALSE(make(2, "adam", 400, ml::BucketComm::Inline, true, ml::AllReduceDtype::Bfloat16)->fusedExchange());
  // Each value is read once, by the owner of its chunk, and checked: the replica is still named.
  // relu(NaN) is 0, so the loss stays finite and only the first layer's gradient carries it.
  ml::Dataset d = data();
  d.x[45 * 12] = std::numeric_limits<float>::quiet_NaN();
  std::vector<int64_t> idx(60);
  std::iota(idx.begin(), idx.end(), 0);  // row 45: replica 2's shard (rows 40..59)
  const auto f32 = ml::AllReduceDtype::Float32;
  for (int64_t bytes : {int64_t{1} << 20, int64_t{400}}) {
    auto s = make(3, "sgd", bytes, ml::BucketComm::Inline, true, f32, false);
    const auto r = s->trainStep(d, idx, 1, 0.1f, 1);
    EXPECT_FALSE(r.finite);
    EXPECT_EQ(r.badReplica, 2) << "bucket " << bytes;
    EXPECT_EQ(r.badWhat, "gradient");
    const auto fine = make(3, "sgd", bytes, ml::BucketComm::Inline, true, f32, false)->trainStep(data(), idx, 1, 0.1f, 1);
    EXPECT_TRUE(fine.finite);
    // The three parts are timed, each in its own phase, and together they fit in the step.
    for (const auto& rs : fine.replicas) {
      EXPECT_GT(rs.phases.allreduce, 0);
      EXPECT_GT(rs.phases.optimizer, 0);
      EXPECT_GT(rs.phases.allgather, 0);
    }
  }
}

// The all-gather is its own phase: timed when sharded, zero otherwise, and inside the step's wall time.
TEST(ShardedOptimizer, TheAllGatherIsItsOwnPhase) {
  std::vector<int64_t> idx(101);
  std::iota(idx.begin(), idx.end(), 0);
  for (bool shard : {false, true}) {
    auto s = strategy(2, "adam", false, "ring", 1 << 20, ml::BucketComm::Auto, shard);
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = s->trainStep(data(), idx, 1, 0.01f, 1);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const auto& rs : r.replicas) {
      if (shard)
        EXPECT_GT(rs.phases.allgather, 0);
      else
        EXPECT_EQ(rs.phases.allgather, 0);
      EXPECT_GT(rs.phases.optimizer, 0);
      EXPECT_LE(rs.phases.total(), wall);
    }
  }
  auto one = strategy(1, "adam", false, "ring", 1 << 20, ml::BucketComm::Auto, true);
  EXPECT_FALSE(one->shardedOptimizer());  // one replica owns everything: nothing to gather
}

// One replica on two or three threads (its own team: layers split their work, Dense backward's
// GEMMs side by side or split, the optimizer by ranges) gives the weights of one thread to float
// rounding (a GEMM split across threads sums in another order), the same bits on every run.
TEST(OneReplicaOnATeam, GivesTheWeightsOfOneThread) {
  auto run = [](const std::string& opt, int threads) {
    ml::StrategyOptions so;
    so.threadsPerDevice = threads;
    auto s = makeStrategy(makeModel(true), "cpu:1", optimizer(opt), so);
    EXPECT_EQ(s->threadPolicy().find("splits its work") != std::string::npos, threads > 1) << s->threadPolicy();
    return train(*s, data(), 100, 3).weights;
  };
  for (const std::string opt : {"sgd", "adam", "rmsprop"}) {
    const auto want = run(opt, 1);
    for (int threads : {2, 3}) {
      const auto w = run(opt, threads);
      EXPECT_LT(relDiff(w, want), 1e-5) << opt << ", " << threads << " threads";
      const auto again = run(opt, threads);
      EXPECT_EQ(std::memcmp(w.data(), again.data(), w.size() * sizeof(float)), 0) << opt << ", " << threads << " threads, twice";
    }
  }
}

// distribute.allreduce_dtype bfloat16: with one replica nothing is sent, so nothing changes; with
// several the replicas stay bit-identical, and the weights move away from the float32 all-reduce's
// by more than float32's own reordering does, but stay close to them.
TEST(AllReduceInBfloat16, ChangesTheResultsOnlyWhereGradientsCross) {
  auto run = [](int n, ml::AllReduceDtype dtype, const std::string& algo, int64_t bucketBytes, bool shard,
                std::string* path = nullptr) {
    ml::StrategyOptions so;
    so.allreduce = ml::parseAllReduceAlgo(algo);
    so.bucketBytes = bucketBytes;
    so.shardOptimizer = shard;
    so.allreduceDtype = dtype;
    auto s = makeStrategy(makeModel(false), "cpu:" + std::to_string(n), optimizer("sgd"), so);
    if (path) *path = s->allReducePath();
    return train(*s, data(), 100, 4).weights;  // checks that the replicas are bit-identical after every step
  };
  using D = ml::AllReduceDtype;
  const auto one = run(1, D::Float32, "ring", 1 << 20, false);
  const auto oneBf16 = run(1, D::Bfloat16, "ring", 1 << 20, false);
  EXPECT_EQ(std::memcmp(one.data(), oneBf16.data(), one.size() * sizeof(float)), 0) << "one replica sends nothing";
  struct Case {
    int n;
    const char* algo;
    int64_t bucket;
    bool shard;
  };
  for (const Case c : {Case{3, "ring", 1 << 20, false}, Case{2, "reduce-to-one", 1 << 20, false}, Case{4, "ring", 256, false},
                       Case{3, "ring", 1 << 20, true}}) {
    std::string path;
    const auto f32 = run(c.n, D::Float32, c.algo, c.bucket, c.shard);
    const auto bf = run(c.n, D::Bfloat16, c.algo, c.bucket, c.shard, &path);
    const std::string what =
        std::to_string(c.n) + " replicas, " + c.algo + ", bucket " + std::to_string(c.bucket) + (c.shard ? ", sharded" : "");
    EXPECT_NE(path.find("bfloat16 on the wire"), std::string::npos) << path;
    const double reorder = relDiff(f32, one), rounded = relDiff(bf, f32);
    EXPECT_GT(rounded, 10 * reorder) << what << ": bfloat16 " << rounded << ", float32's reordering " << reorder;
    EXPECT_LT(rounded, 0.02) << what;
  }
}
