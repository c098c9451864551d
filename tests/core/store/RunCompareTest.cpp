// Comparing runs: configuration diff over any keys, time and samples to a target, speed-up and
// scaling efficiency against hand-computed numbers.
#include <gtest/gtest.h>

#include "StoreTestUtil.h"
#include "store/RunCompare.h"
#include "store/RunStore.h"

using namespace ml;

TEST(StoreCompare, FlattenJsonUsesDotsForNestedObjects) {
  auto f = flattenJson(nlohmann::json::parse(
      R"({"optimizer":{"name":"sgd","momentum":0.9,"nesterov":true},"device_names":["a","b"],
          "devices":"cpu:4","extra":{"deep":{"x":1}},"empty":{}})"));
  EXPECT_EQ(f["optimizer.name"], "sgd");
  EXPECT_EQ(f["optimizer.momentum"], "0.9");
  EXPECT_EQ(f["optimizer.nesterov"], "true");
  EXPECT_EQ(f["device_names"], R"(["a","b"])");
  EXPECT_EQ(f["devices"], "cpu:4");
  EXPECT_EQ(f["extra.deep.x"], "1");
  EXPECT_EQ(f["empty"], "{}");
  EXPECT_EQ(f.size(), 7u);
}

TEST(StoreCompare, ConfigDiffShowsOnlyKeysThatDiffer) {
  std::string a = R"({"devices":"cpu:1","lr":0.001,"seed":42,"optimizer":{"name":"adam","beta1":0.9}})";
  std::string b = R"({"devices":"cpu:4","lr":0.004,"seed":42,"optimizer":{"name":"adam","beta1":0.8},"new_key":1})";
  auto rows = configDiff({a, b});
  ASSERT_EQ(rows.size(), 4u);  // devices, lr, new_key, optimizer.beta1 (sorted); not seed/name
  EXPECT_EQ(rows[0].key, "devices");
  EXPECT_EQ(rows[0].values[0], "cpu:1");
  EXPECT_EQ(rows[0].values[1], "cpu:4");
  EXPECT_EQ(rows[1].key, "lr");
  EXPECT_EQ(rows[2].key, "new_key");
  EXPECT_FALSE(rows[2].values[0].has_value());
  EXPECT_EQ(rows[2].values[1], "1");
  EXPECT_EQ(rows[3].key, "optimizer.beta1");
  EXPECT_TRUE(configDiff({a, a}).empty());
}

TEST(StoreCompare, TargetReachedByEpochTimeAndSamples) {
  storetest::TempDir dir;
  RunStore store = RunStore::open(dir.file("runs.sqlite"));
  // Run a: 1 replica, 10 s per epoch. Run b: 4 replicas, 3.3 s per epoch.
  auto make = [&](int replicas, double sps, double secs, std::vector<double> val) {
    int64_t id = store.createRun(storetest::makeStarted("r", replicas), {});
    for (size_t e = 0; e < val.size(); ++e) {
      EpochEvent ev = storetest::makeEpoch(int(e) + 1, replicas);
      ev.samplesPerSec = sps;
      ev.seconds = secs;
      ev.valMetric = val[e];
      ev.wallTime = (secs + 0.5) * double(e + 1);
      store.appendEpochs(id, std::span<const EpochEvent>(&ev, 1));
    }
    std::vector<StepEvent> steps;
    for (int i = 1; i <= 10 * int(val.size()); ++i) steps.push_back(storetest::makeStep(i, replicas));
    store.appendSteps(id, steps);
    return store.loadRun(id);
  };
  RunDetail a = make(1, 1000, 10, {0.70, 0.80, 0.86});
  RunDetail b = make(4, 3000, 10.0 / 3, {0.75, 0.85, 0.90});
  auto ra = reachTarget(store, a, 0.85);
  ASSERT_TRUE(ra);
  EXPECT_EQ(ra->epoch, 3);
  EXPECT_DOUBLE_EQ(ra->seconds, 31.5);
  EXPECT_EQ(ra->samples, 30 * 256);
  auto rb = reachTarget(store, b, 0.85);
  ASSERT_TRUE(rb);
  EXPECT_EQ(rb->epoch, 2);
  EXPECT_EQ(rb->samples, 20 * 256);
  EXPECT_FALSE(reachTarget(store, a, 0.95));
}

TEST(StoreCompare, RegressionMetricsImproveDownward) {
  EXPECT_TRUE(metricHigherIsBetter(R"({"loss":"sparse_categorical_crossentropy"})"));
  EXPECT_FALSE(metricHigherIsBetter(R"({"loss":"mse"})"));
  EXPECT_FALSE(metricHigherIsBetter(R"({"loss":"mean_absolute_error"})"));
  EXPECT_TRUE(metricHigherIsBetter("not json"));
}
