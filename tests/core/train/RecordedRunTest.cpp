// One recorded run (RecordedRun): every consumer sees every event, the store holds the run and its
// checkpoints under its id, a store that fails stops the run as failed, sequences share one hub,
// and every event crosses a process boundary as JSON unchanged.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "Error.h"
#include "store/RunStore.h"
#include "support/TestData.h"
#include "telemetry/EventJson.h"
#include "train/Checkpoint.h"
#include "train/RecordedRun.h"

namespace {

namespace fs = std::filesystem;
using mltest::drainAll;

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "mlrecrun-XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

ml::Project project(const std::string& devices = "cpu:2", int epochs = 2) {
  auto p = mltest::makeProject("recorded run test", mltest::makeModel(false), devices, 30);
  p.training.epochs = epochs;
  return p;
}

template <class T>
int count(const std::vector<ml::Event>& events) {
  return static_cast<int>(
      std::count_if(events.begin(), events.end(), [](const ml::Event& e) { return std::holds_alternative<T>(e); }));
}

TEST(RecordedRun, EveryConsumerSeesTheWholeRunAndTheStoreHoldsIt) {
  TempDir dir;
  ml::RecordedRunOptions o;
  o.storePath = dir.file("runs.sqlite");
  o.trainer.runName = "two consumers";
  ml::RecordedRun run(project(), mltest::makeSplit(600, 60), o);
  auto a = run.subscribe(), b = run.subscribe(size_t{1} << 12);
  const ml::RecordedRun::Result r = run.run();
  ASSERT_EQ(r.finished.status, ml::RunStatus::Finished) << r.finished.message;
  EXPECT_EQ(r.finished.steps, 40);  // 600 / 30 = 20 steps an epoch, 2 epochs
  ASSERT_TRUE(r.runId.has_value());
  EXPECT_EQ(r.recordingError, "");
  EXPECT_EQ(r.committedStep, 40);
  EXPECT_TRUE(a->closed());  // the run ended: its consumers are told so
  EXPECT_TRUE(b->closed());
  for (auto* ch : {a.get(), b.get()}) {
    const auto events = drainAll(*ch);
    ASSERT_FALSE(events.empty());
    EXPECT_TRUE(std::holds_alternative<ml::RunStarted>(events.front()));
    EXPECT_TRUE(std::holds_alternative<ml::RunFinished>(events.back()));
    EXPECT_EQ(count<ml::StepEvent>(events), 40);
    EXPECT_EQ(count<ml::EpochEvent>(events), 2);
  }
  auto store = ml::RunStore::open(o.storePath);
  const ml::RunDetail d = store.loadRun(*r.runId);
  EXPECT_EQ(d.summary.name, "two consumers");
  EXPECT_EQ(d.summary.status, "finished");
  EXPECT_EQ(d.steps.value_or(0), 40);
  EXPECT_EQ(d.epochs.size(), 2u);
  EXPECT_EQ(store.loadSteps(*r.runId, 1, 1000).size(), 40u);
}

TEST(RecordedRun, CheckpointsGoBesideTheStoreUnderTheStoredRunsId) {
  TempDir dir;
  ml::RecordedRunOptions o;
  o.storePath = dir.file("runs.sqlite");
  auto p = project("cpu:2", 3);
  p.training.checkpointEvery = 7;
  p.training.checkpointInSteps = true;
  p.training.checkpointKeep = 10;
  ml::RecordedRun run(p, mltest::makeSplit(600), o);
  const auto r = run.run();
  ASSERT_EQ(r.finished.status, ml::RunStatus::Finished) << r.finished.message;
  ASSERT_TRUE(r.runId.has_value());
  const std::string folder = ml::checkpointFolder(o.storePath, *r.runId);
  std::vector<int64_t> steps;
  for (int64_t s = 7; s < 60; s += 7) {  // never after the last step (60)
    const ml::Checkpoint c = ml::loadCheckpoint(ml::checkpointFile(folder, s));
    EXPECT_EQ(c.runId, *r.runId);
    EXPECT_EQ(c.at.step, s);
    steps.push_back(s);
  }
  EXPECT_FALSE(fs::exists(ml::checkpointFile(folder, 63)));
  // The store lists each one, and held every step before it when it was written.
  const ml::RunDetail d = ml::RunStore::open(o.storePath).loadRun(*r.runId);
  int listed = 0;
  for (const auto& a : d.artifacts) listed += a.kind == "checkpoint";
  EXPECT_EQ(listed, static_cast<int>(steps.size()));
}

TEST(RecordedRun, WithoutAStoreNothingIsRecordedAndNoCheckpointIsWritten) {
  auto p = project();
  p.training.checkpointEvery = 5;
  p.training.checkpointInSteps = true;
  ml::RecordedRun run(p, mltest::makeSplit(600), {});
  auto ch = run.subscribe();
  const auto r = run.run();
  EXPECT_EQ(r.finished.status, ml::RunStatus::Finished);
  EXPECT_FALSE(r.runId.has_value());
  EXPECT_FALSE(run.recorded());
  EXPECT_EQ(count<ml::CheckpointSaved>(drainAll(*ch)), 0);
}

TEST(RecordedRun, StartUpErrorsNameTheirSourceAndABadStoreFailsBeforeTraining) {
  auto p = project();
  p.training.batchSize = 100000;
  ml::RecordedRunOptions o;
  o.source = "p.json";
  try {
    ml::RecordedRun run(p, mltest::makeSplit(600), o);
    FAIL() << "a batch larger than the data set was accepted";
  } catch (const ml::UserError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("p.json: global batch 100000 is larger than the training set", 0), 0u) << e.what();
  }
  TempDir dir;
  std::ofstream(dir.file("plain")) << "a file, not a folder";
  o.storePath = dir.file("plain") + "/runs.sqlite";
  EXPECT_THROW(ml::RecordedRun(project(), mltest::makeSplit(600), o), ml::UserError);
}

// The disk fills up while the run trains (a file-size limit here): the recorder's failure stops
// the run, which ends failed with the store's reason instead of going on unrecorded.
TEST(RecordedRun, AStoreThatCannotBeWrittenStopsTheRun) {
  TempDir dir;
  ml::RecordedRunOptions o;
  o.storePath = dir.file("runs.sqlite");
  auto p = project("cpu:2", 100000);  // far longer than any wait below: it ends only by the failure
  ml::RecordedRun run(p, mltest::makeSplit(600), o);
  auto ch = run.subscribe();
  run.setPaused(true);  // holds before the first step while the limit is set
  ml::RecordedRun::Result r;
  std::atomic<bool> ended{false};
  std::thread t([&] {
    r = run.run();
    ended = true;
  });
  // The run is in the store before its first step: wait for it, then leave the store no room.
  for (int k = 0; k < 3000 && ml::RunStore::open(o.storePath).listRuns().empty(); ++k)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto oldSignal = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  std::error_code ec;
  small.rlim_cur = std::max(fs::file_size(o.storePath, ec), fs::file_size(o.storePath + "-wal", ec)) + 8192;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  run.setPaused(false);
  for (int k = 0; k < 12000 && !ended.load(); ++k) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const bool stoppedByTheStore = ended.load();
  run.requestCancel();  // if the failure did not stop it, the test must still end
  t.join();
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, oldSignal);
  ASSERT_TRUE(stoppedByTheStore) << "the run went on for 2 minutes with a store that cannot be written";
  EXPECT_EQ(r.finished.status, ml::RunStatus::Failed);
  EXPECT_NE(r.finished.message.find("could not record the run"), std::string::npos) << r.finished.message;
  EXPECT_NE(r.recordingError, "");
  EXPECT_LT(r.finished.steps, 100000 * 20);
  const auto events = drainAll(*ch);
  ASSERT_FALSE(events.empty());
  const auto* end = std::get_if<ml::RunFinished>(&events.back());
  ASSERT_NE(end, nullptr);
  EXPECT_EQ(end->status, ml::RunStatus::Failed);  // what every consumer saw
}

TEST(RecordedRun, ASequenceOnOneHubIsFollowedByOneWatcher) {
  ml::TelemetryHub hub;
  auto watcher = hub.subscribe(size_t{1} << 16);
  for (const char* devices : {"cpu:1", "cpu:3"}) {
    ml::RecordedRunOptions o;
    o.hub = &hub;
    o.trainer.maxSteps = 5;
    ml::RecordedRun run(project(devices), mltest::makeSplit(600), o);
    EXPECT_EQ(run.run().finished.status, ml::RunStatus::Finished);
  }
  EXPECT_FALSE(watcher->closed());  // the hub is the watcher's: each run closes only its own channels
  const auto events = drainAll(*watcher);
  EXPECT_EQ(count<ml::RunStarted>(events), 2);
  EXPECT_EQ(count<ml::StepEvent>(events), 10);
  EXPECT_EQ(count<ml::RunFinished>(events), 2);
}

// Every event type, every field set to something other than its default, through JSON and back.
TEST(EventJson, EveryEventCrossesUnchanged) {
  TempDir dir;
  ml::RecordedRunOptions o;
  o.storePath = dir.file("runs.sqlite");
  auto p = project("cpu:2", 2);
  p.training.checkpointEvery = 1;
  ml::RecordedRun run(p, mltest::makeSplit(600, 60), o);
  auto ch = run.subscribe();
  ASSERT_EQ(run.run().finished.status, ml::RunStatus::Finished);
  std::vector<ml::Event> events = drainAll(*ch);
  ml::RunStarted s = std::get<ml::RunStarted>(events.front());
  s.hosts = {"a", "b"};
  s.tags = {"fault injected"};
  s.resumeRun = 4, s.resumeStep = 9, s.resumeEpochsDone = 1, s.resumeWall = 2.5, s.telemetry = "nvml";
  events.push_back(s);
  events.push_back(ml::RunPaused{12.25, 3.5});
  ml::DeviceSample d{1.5, 2, 0.75, 1e9, ml::SampleSource::Nvml, 1, 4, 8e10, 61.0, 0.25};
  events.push_back(d);
  events.push_back(ml::WatchdogWarning{1, "cpu:1", "backward", 17, 0.5, 0.125, "replica 1 (cpu:1) is a straggler", 9.75});
  ml::RunFinished f{ml::RunStatus::Diverged, "non-finite loss", 3.25, 17, 0.5, 0.875};
  events.push_back(f);
  events.push_back(ml::CheckpointSaved{5, 1, "/x/step-5.mlck", 0xfeedfacecafebeefull, 1234, {"/x/step-1.mlck"}, 2.5});
  ml::StepEvent skipped = std::get<ml::StepEvent>(events[1]);
  skipped.lossScale = 65536, skipped.skipped = true;
  events.push_back(skipped);
  for (const ml::Event& e : std::vector<ml::Event>(events))
    if (const auto* ep = std::get_if<ml::EpochEvent>(&e)) {
      ml::EpochEvent out = *ep;
      out.inSync = false;
      events.push_back(out);
      break;
    }
  std::set<size_t> kinds;
  for (const ml::Event& e : events) {
    kinds.insert(e.index());
    const std::string line = ml::eventToJson(e).dump();
    const ml::Event back = ml::eventFromJson(nlohmann::json::parse(line));
    EXPECT_EQ(back, e) << line.substr(0, 200);
  }
  EXPECT_EQ(kinds.size(), std::variant_size_v<ml::Event>);  // every type was tried
  const auto* step = std::get_if<ml::StepEvent>(&events[1]);
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(step->replicas.size(), 2u);  // with its replicas' phases
  EXPECT_EQ(ml::recordedRunIn(ml::recordedRunLine(42)), std::optional<int64_t>(42));
  EXPECT_EQ(ml::recordedRunIn(ml::eventToJson(f)), std::nullopt);
  EXPECT_THROW(ml::eventFromJson(nlohmann::json{{"type", "nonsense"}}), std::exception);
}

}  // namespace
