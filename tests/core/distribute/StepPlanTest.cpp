// What the strategy decides once (StepPlan.cpp): the collective, the first enabled entry of an
// ordered list; checked on the list itself and on the strategies that follow it.
#include <gtest/gtest.h>

#include <string>

#include "TestData.h"
#include "WorkersTestUtil.h"
#include "distribute/MirroredStrategy.h"

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
  o.name = "adam";
  return o;
}

std::string collectiveOf(const std::string& devices, const std::string& algo) {
  ml::StrategyOptions so;
  so.devices = ml::parseDevices(devices);
  so.allreduce = algo;
  ml::MirroredStrategy s(mltest::makeModel(false), ml::Loss::make("sparse_categorical_crossentropy", false),
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
    so.allreduce = "mpi";
    so.workers = &g;
    ml::MirroredStrategy s(mltest::makeModel(false), ml::Loss::make("sparse_categorical_crossentropy", false),
                           ml::MetricKind::Accuracy, adam(), so);
    return s.allReduceName();
  });
  for (const auto& n : names) EXPECT_EQ(n, "mpi");
}

}  // namespace
