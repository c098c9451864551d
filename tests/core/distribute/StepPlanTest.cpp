// What the strategy decides once (StepPlan.cpp): the collective, the first enabled entry of an
// ordered list, and the chunks the update reads; checked on the list itself and on the strategies
// that follow it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "distribute/MirroredStrategy.h"
#include "support/TestData.h"
#include "support/Workers.h"

namespace {

using ml::CollectiveKind;

const char* kindName(CollectiveKind k) {
  for (const auto& e : ml::collectiveOrder())
    if (e.kind == k) return e.name;
  return "?";
}

TEST(CollectiveOrder, TheFirstEnabledCollectiveWins) {
  struct Case {
    int workers, replicas;
    bool device;
    CollectiveKind want;
  };
  const Case cases[] = {
      {1, 1, false, CollectiveKind::None},  // one replica needs none, though the ring could run
      {1, 1, true, CollectiveKind::None},   // nor does one GPU
      {1, 4, false, CollectiveKind::Host},
      {1, 2, true, CollectiveKind::Device},
      {2, 1, false, CollectiveKind::Hierarchical},  // one replica per worker still crosses the workers
      {3, 2, false, CollectiveKind::Hierarchical},
      {2, 1, true, CollectiveKind::DeviceAcrossWorkers},
      {2, 4, true, CollectiveKind::DeviceAcrossWorkers},
  };
  for (const Case& c : cases) {
    const ml::CollectiveCase in{c.workers, c.replicas, c.device};
    const CollectiveKind got = ml::chooseCollective(in);
    EXPECT_EQ(got, c.want) << c.workers << " workers x " << c.replicas << (c.device ? " devices: " : " host replicas: ")
                           << kindName(got) << " instead of " << kindName(c.want);
    // The choice is the first entry enabled, and a later entry may be enabled too (the order decides).
    int enabled = 0;
    bool seenChoice = false;
    for (const auto& e : ml::collectiveOrder()) {
      if (!e.enabled(in)) continue;
      ++enabled;
      if (!seenChoice) {
        EXPECT_EQ(e.kind, got);
      }
      seenChoice = true;
    }
    EXPECT_GE(enabled, 1);
  }
}

ml::OptimizerSpec adam() {
  ml::OptimizerSpec o;
  o.kind = ml::OptimizerKind::Adam;
  return o;
}

std::string collectiveOf(const std::string& devices, const std::string& algo) {
  ml::StrategyOptions so;
  so.devices = ml::parseDevices(devices);
  so.allreduce = ml::parseAllReduceAlgo(algo);
  ml::MirroredStrategy s(mltest::makeModel(false), ml::Loss::make(ml::LossKind::SparseCategoricalCrossentropy, false),
                         ml::MetricKind::Accuracy, adam(), so);
  return s.allReduceName();
}

TEST(CollectiveOrder, TheStrategyRunsTheChosenCollective) {
  EXPECT_EQ(collectiveOf("cpu:1", "ring"), "none (one replica)");
  EXPECT_EQ(collectiveOf("cpu:1", "reduce-to-one"), "none (one replica)");
  EXPECT_EQ(collectiveOf("cpu:3", "ring"), "ring");
  EXPECT_EQ(collectiveOf("cpu:3", "reduce-to-one"), "reduce-to-one");
  // Two workers of one replica each: the hierarchical all-reduce's flat form, even for one local replica.
  const auto names = mltest::onWorkers<std::string>(2, 30, [](int, ml::WorkerGroup& g) {
    ml::StrategyOptions so;
    so.devices = ml::parseDevices("cpu:1");
    so.allreduce = ml::AllReduceAlgo::Mpi;
    so.workers = &g;
    ml::MirroredStrategy s(mltest::makeModel(false), ml::Loss::make(ml::LossKind::SparseCategoricalCrossentropy, false),
                           ml::MetricKind::Accuracy, adam(), so);
    return s.allReduceName();
  });
  for (const auto& n : names) EXPECT_EQ(n, "mpi");
}

// Every parameter is in exactly one chunk, each chunk of a unit has a different owner, and the
// owned ranges of the replicas are those chunks, split among them.
TEST(UpdateRanges, TheChunksCoverEveryParameterOnceAndTheOwnersShareThem) {
  const std::vector<ml::GradBucket> units = {{0, 10, 0}, {10, 3, 0}, {13, 1000, 0}};
  for (int n : {1, 2, 3, 4, 7}) {
    std::vector<int> seen(1013, 0);
    int64_t owned = 0;
    const auto chunks = ml::unitChunks(units, n);
    for (const auto& c : chunks) {
      ASSERT_GT(c.count, 0);
      ASSERT_GE(c.from, 0);
      ASSERT_LT(c.from, n);
      for (int64_t i = c.offset; i < c.offset + c.count; ++i) ++seen[static_cast<size_t>(i)];
    }
    for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "parameter " << i << " with " << n << " replicas";
    for (int r = 0; r < n; ++r) {
      const auto mine = ml::ownedRanges(units, r, n);
      for (const auto& b : mine) {
        owned += b.count;
        bool found = false;
        for (const auto& c : chunks) found = found || (c.offset == b.offset && c.count == b.count && c.from == r);
        EXPECT_TRUE(found) << "replica " << r << " owns [" << b.offset << ", +" << b.count << ") which is not its chunk";
      }
    }
    EXPECT_EQ(owned, 1013) << n << " replicas";
  }
}

}  // namespace
