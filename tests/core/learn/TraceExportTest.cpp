// Chrome trace export of per-replica phase timings: parses back, one named lane per replica,
// five spans per replica per step, spans that never overlap within a lane and durations equal to
// the phase times.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "Error.h"
#include "LearnTestUtil.h"
#include "learn/TraceExport.h"

using namespace ml;
using nlohmann::json;

namespace {

// Two replicas, three steps. Replica 1 is slower in backward, so replica 0 waits for it.
std::vector<StepEvent> syntheticSteps() {
  std::vector<StepEvent> steps;
  double t = 10.0;  // wall time of the first step's start: the trace starts at 0 anyway
  for (int s = 1; s <= 3; ++s) {
    StepEvent ev;
    ev.step = s;
    ev.epoch = 1;
    for (int r = 0; r < 2; ++r) {
      ReplicaStep rs;
      rs.replica = r;
      rs.samples = 32;
      rs.start = t + 0.0001 * r;
      rs.phases.forward = 0.010 + 0.001 * s;
      rs.phases.backward = r == 0 ? 0.020 : 0.025;
      rs.phases.wait = r == 0 ? 0.005 : 0.0;
      rs.phases.allreduce = 0.003 + 0.0005 * r;
      rs.phases.optimizer = 0.002;
      ev.replicas.push_back(rs);
    }
    ev.stepTime = 0.045;
    t += 0.05;
    steps.push_back(ev);
  }
  return steps;
}

}  // namespace

TEST(TraceExport, SyntheticRunParsesBackAsChromeTrace) {
  const auto steps = syntheticSteps();
  mltest::TempDir dir("trace");
  const std::string file = (dir.path() / "trace.json").string();
  writeChromeTrace(steps, file, TraceOptions{"run 7: synthetic", {"cpu:0 (simulated)", "cpu:1 (simulated)"}});
  std::ifstream in(file);
  const json trace = json::parse(in);  // throws (fails the test) if not JSON
  ASSERT_TRUE(trace.contains("traceEvents"));
  EXPECT_EQ(trace.at("displayTimeUnit"), "ms");

  std::map<int, std::string> laneNames;
  std::map<int, std::vector<json>> spans;
  for (const auto& e : trace.at("traceEvents")) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("tid") && e.contains("name")) << e.dump();
    if (e.at("ph") == "M" && e.at("name") == "thread_name") laneNames[e.at("tid").get<int>()] = e.at("args").at("name");
    if (e.at("ph") == "X") spans[e.at("tid").get<int>()].push_back(e);
  }
  ASSERT_EQ(laneNames.size(), 2u);
  EXPECT_EQ(laneNames[0], "replica 0 (cpu:0 (simulated))");
  EXPECT_EQ(laneNames[1], "replica 1 (cpu:1 (simulated))");
  ASSERT_EQ(spans.size(), 2u);

  const char* order[5] = {"forward", "backward", "wait", "all-reduce", "optimizer"};
  for (int r = 0; r < 2; ++r) {
    auto& lane = spans[r];
    ASSERT_EQ(lane.size(), 15u) << "5 spans x 3 steps on replica " << r;
    std::sort(lane.begin(), lane.end(),
              [](const json& a, const json& b) { return a.at("ts").get<double>() < b.at("ts").get<double>(); });
    for (size_t i = 0; i < lane.size(); ++i) {
      const json& e = lane[i];
      const int step = e.at("args").at("step").get<int>();
      const PhaseTimes& ph = steps[static_cast<size_t>(step - 1)].replicas[static_cast<size_t>(r)].phases;
      const double expected[5] = {ph.forward, ph.backward, ph.wait, ph.allreduce, ph.optimizer};
      EXPECT_EQ(e.at("name").get<std::string>(), order[i % 5]) << "span " << i << " of replica " << r;
      EXPECT_EQ(e.at("cat").get<std::string>(), (i % 5 == 2 || i % 5 == 3) ? "sync" : "compute");
      EXPECT_DOUBLE_EQ(e.at("dur").get<double>(), expected[i % 5] * 1e6) << e.dump();
      EXPECT_EQ(e.at("args").at("replica").get<int>(), r);
      if (i > 0) {
        const double prevEnd = lane[i - 1].at("ts").get<double>() + lane[i - 1].at("dur").get<double>();
        EXPECT_LE(prevEnd, e.at("ts").get<double>() + 1e-6) << "overlap before span " << i << " of replica " << r;
      }
    }
    // The first span starts at the replica's start, relative to the earliest start (10.0 s).
    EXPECT_NEAR(lane[0].at("ts").get<double>(), 100.0 * r, 1e-6);
    // A step's five spans sum to the replica's step total.
    double sum = 0;
    for (int k = 0; k < 5; ++k) sum += lane[static_cast<size_t>(k)].at("dur").get<double>();
    EXPECT_NEAR(sum, steps[0].replicas[static_cast<size_t>(r)].phases.total() * 1e6, 1e-6);
  }
}

// The micro-batches' input (rows gathered, copied to the device) is its own span, first in the step,
// with the forward pass starting where it ends; stored runs without it have no input span.
TEST(TraceExport, InputTimeIsItsOwnSpanBeforeTheForwardPass) {
  auto steps = syntheticSteps();
  for (auto& s : steps) s.replicas[1].phases.input = 0.0025;
  const json trace = chromeTrace(steps);
  std::map<int, std::vector<json>> spans;
  for (const auto& e : trace.at("traceEvents"))
    if (e.at("ph") == "X") spans[e.at("tid").get<int>()].push_back(e);
  for (auto& [r, lane] : spans)
    std::sort(lane.begin(), lane.end(),
              [](const json& a, const json& b) { return a.at("ts").get<double>() < b.at("ts").get<double>(); });
  ASSERT_EQ(spans[0].size(), 15u);  // no input time: 5 spans x 3 steps
  ASSERT_EQ(spans[1].size(), 18u);  // 6 spans x 3 steps
  const json& in = spans[1][0];
  EXPECT_EQ(in.at("name"), "input");
  EXPECT_EQ(in.at("cat"), "input");
  EXPECT_DOUBLE_EQ(in.at("dur").get<double>(), 2500.0);
  EXPECT_EQ(spans[1][1].at("name"), "forward");
  EXPECT_NEAR(spans[1][1].at("ts").get<double>(), in.at("ts").get<double>() + 2500.0, 1e-6);
  for (const auto& e : spans[0]) EXPECT_NE(e.at("name"), "input");
}

// Several workers: the replica carrying the cross-worker hop gets a "network" span (sync) right
// after its all-reduce, as long as the hop took; a replica without network time gets none.
TEST(TraceExport, NetworkTimeOfSeveralWorkersIsItsOwnSpanAfterTheAllReduce) {
  auto steps = syntheticSteps();
  for (auto& s : steps) s.replicas[0].phases.network = 0.004;
  const json trace = chromeTrace(steps);
  std::map<int, std::vector<json>> spans;
  for (const auto& e : trace.at("traceEvents"))
    if (e.at("ph") == "X") spans[e.at("tid").get<int>()].push_back(e);
  for (auto& [r, lane] : spans)
    std::sort(lane.begin(), lane.end(),
              [](const json& a, const json& b) { return a.at("ts").get<double>() < b.at("ts").get<double>(); });
  ASSERT_EQ(spans[0].size(), 18u);  // 6 spans x 3 steps
  ASSERT_EQ(spans[1].size(), 15u);  // no network time: 5 spans x 3 steps
  const char* order[6] = {"forward", "backward", "wait", "all-reduce", "network", "optimizer"};
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(spans[0][i].at("name").get<std::string>(), order[i]) << "span " << i;
  const json& net = spans[0][4];
  EXPECT_EQ(net.at("cat"), "sync");
  EXPECT_DOUBLE_EQ(net.at("dur").get<double>(), 4000.0);
  // Back to back: the network span starts where the all-reduce ends, the optimizer where it ends.
  EXPECT_NEAR(net.at("ts").get<double>(), spans[0][3].at("ts").get<double>() + spans[0][3].at("dur").get<double>(), 1e-6);
  EXPECT_NEAR(spans[0][5].at("ts").get<double>(), net.at("ts").get<double>() + 4000.0, 1e-6);
  for (const auto& e : spans[1]) EXPECT_NE(e.at("name"), "network");
}

TEST(TraceExport, StepsWithoutReplicaTimingsGiveEmptyLanes) {
  std::vector<StepEvent> steps(2);  // as RunStore::loadCurves returns them
  const json t = chromeTrace(steps);
  for (const auto& e : t.at("traceEvents")) EXPECT_NE(e.at("ph"), "X");
  EXPECT_THROW(writeChromeTrace(steps, "/nonexistent-folder/trace.json"), UserError);
}
