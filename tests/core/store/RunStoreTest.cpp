// Run store round trips: real events through a Channel into the Recorder, read back field by
// field; editing, filtering, deleting and exporting runs.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>

#include <gtest/gtest.h>

#include "Error.h"
#include "StoreTestUtil.h"
#include "store/HostInfo.h"
#include "store/Recorder.h"
#include "store/RunStore.h"
#include "store/Schema.h"

using namespace ml;
using storetest::makeEpoch;
using storetest::makeStarted;
using storetest::makeStep;

namespace {

constexpr double kMicro = 5.1e-7;  // phase timings are stored in whole microseconds

// Records one complete run through the recorder and returns its id.
int64_t recordRun(const std::string& db, const std::string& name, int replicas, int steps, int epochs,
                  RunStatus status = RunStatus::Finished) {
  auto ch = std::make_shared<Channel>();
  Recorder rec(db, ch);
  RunStarted s = makeStarted(name, replicas);
  ch->tryPush(s);
  for (int i = 1; i <= steps; ++i) ch->tryPush(makeStep(i, replicas));
  for (int e = 1; e <= epochs; ++e) ch->tryPush(makeEpoch(e, replicas));
  for (int d = 0; d < replicas; ++d) ch->tryPush(DeviceSample{0.25, d, 0.8, 1e6});
  RunFinished f;
  f.status = status;
  f.steps = steps;
  f.seconds = 3.5;
  ch->tryPush(f);
  rec.stop();
  EXPECT_EQ(rec.error(), "");
  return rec.runId().value();
}

int64_t countRows(sql::Db& db, const std::string& table, int64_t run) {
  auto q = db.prepare("SELECT count(*) FROM " + table + " WHERE " + (table == "runs" ? "id" : "run_id") + "=?");
  q.bind(1, run);
  q.step();
  return q.getInt(0);
}

}  // namespace

TEST(StoreRoundTrip, EveryFieldThroughChannelAndRecorder) {
  storetest::TempDir dir;
  const std::string db = dir.file("sub/folder/runs.sqlite");  // the folder is created too
  const int replicas = 3;
  RunStarted started = makeStarted("round trip", replicas);
  std::vector<StepEvent> steps;
  for (int i = 1; i <= 30; ++i) {
    steps.push_back(makeStep(i, replicas));
    if (i > 10) steps.back().lossScale = std::ldexp(1.0, 15 - i / 7);  // loss scaling from step 11 (none before)
    steps.back().skipped = i % 7 == 0;
  }
  std::vector<EpochEvent> epochs = {makeEpoch(1, replicas), makeEpoch(2, replicas, false), makeEpoch(3, replicas)};
  std::vector<DeviceSample> samples;
  for (int i = 0; i < 6; ++i) samples.push_back({0.1 * i + 0.05, i % replicas, 0.3 + 0.1 * i, 1e6 * i});
  RunFinished fin{RunStatus::Diverged, "loss became NaN at step 30", 4.25, 30, 0.61, 0.83};

  auto ch = std::make_shared<Channel>();
  nlohmann::json host = hostInfo({"NVIDIA Test GPU"}, {{"cuda", "12.4"}});
  Recorder rec(db, ch, RecorderOptions{.host = host});
  ch->tryPush(started);
  for (auto& s : steps) ch->tryPush(s);
  for (auto& e : epochs) ch->tryPush(e);
  for (auto& d : samples) ch->tryPush(d);
  ch->tryPush(fin);
  auto id = rec.waitForRunId(std::chrono::seconds(5));
  ASSERT_TRUE(id.has_value());
  rec.stop();
  EXPECT_EQ(rec.error(), "");
  EXPECT_EQ(rec.eventsWritten(), 1 + 30 + 3 + 6 + 1u);

  RunStore store = RunStore::open(db);
  EXPECT_EQ(store.schemaVersion(), store::kSchemaVersion);
  RunDetail d = store.loadRun(*id);
  EXPECT_EQ(d.summary.id, *id);
  EXPECT_EQ(d.summary.name, "round trip");
  EXPECT_EQ(d.summary.status, "diverged");
  EXPECT_EQ(d.error, "loss became NaN at step 30");
  EXPECT_EQ(d.summary.devices, "cpu:3");
  EXPECT_EQ(d.summary.replicas, replicas);
  EXPECT_EQ(d.summary.globalBatch, 256);
  EXPECT_DOUBLE_EQ(*d.summary.lr, started.lr);
  EXPECT_DOUBLE_EQ(*d.summary.finalValMetric, 0.83);
  EXPECT_DOUBLE_EQ(*d.summary.finalValLoss, 0.61);
  EXPECT_NEAR(*d.summary.secondsPerEpoch, (1.26 + 1.27 + 1.28) / 3, 1e-12);
  EXPECT_EQ(d.summary.epochsDone, 3);
  double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_NEAR(d.summary.created, now, 60);
  ASSERT_TRUE(d.summary.finished);
  EXPECT_GE(*d.summary.finished, d.summary.created);
  EXPECT_EQ(d.projectJson, started.projectJson);
  EXPECT_EQ(d.configJson, started.configJson);
  EXPECT_EQ(nlohmann::json::parse(d.hostJson), host);
  EXPECT_EQ(d.host, hostName());
  EXPECT_EQ(d.pid, static_cast<int64_t>(getpid()));
  EXPECT_EQ(d.deviceNames, started.devices);
  EXPECT_EQ(d.perReplicaBatch, started.perReplicaBatch);
  EXPECT_DOUBLE_EQ(*d.baseLr, started.baseLr);
  EXPECT_EQ(d.epochsPlanned, started.epochs);
  EXPECT_EQ(d.stepsPerEpoch, started.stepsPerEpoch);
  EXPECT_EQ(d.totalSteps, started.totalSteps);
  EXPECT_EQ(d.description, started.description);
  EXPECT_DOUBLE_EQ(*d.seconds, 4.25);
  EXPECT_EQ(*d.steps, 30);
  EXPECT_EQ(d.droppedEvents, 0u);
  EXPECT_EQ(d.workers, 1);
  EXPECT_TRUE(d.hosts.empty());

  ASSERT_EQ(d.epochs.size(), epochs.size());
  for (size_t i = 0; i < epochs.size(); ++i) {
    const EpochEvent &a = epochs[i], &b = d.epochs[i];
    EXPECT_EQ(b.epoch, a.epoch);
    EXPECT_EQ(b.trainLoss, a.trainLoss);
    EXPECT_EQ(b.trainMetric, a.trainMetric);
    EXPECT_EQ(b.valLoss, a.valLoss);
    EXPECT_EQ(b.valMetric, a.valMetric);
    EXPECT_EQ(b.seconds, a.seconds);
    EXPECT_EQ(b.samplesPerSec, a.samplesPerSec);
    EXPECT_EQ(b.allreduceShare, a.allreduceShare);
    EXPECT_EQ(b.waitShare, a.waitShare);
    EXPECT_EQ(b.checksums, a.checksums);
    EXPECT_EQ(b.inSync, a.inSync);
    EXPECT_EQ(b.wallTime, a.wallTime);
  }

  std::vector<StepEvent> back = store.loadSteps(*id, 1, 1000);
  ASSERT_EQ(back.size(), steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepEvent &a = steps[i], &b = back[i];
    EXPECT_EQ(b.step, a.step);
    EXPECT_EQ(b.lossScale, a.lossScale) << "step " << a.step;
    EXPECT_EQ(b.skipped, a.skipped) << "step " << a.step;
    EXPECT_EQ(b.epoch, a.epoch);
    EXPECT_EQ(b.stepInEpoch, a.stepInEpoch);
    EXPECT_EQ(b.stepsPerEpoch, a.stepsPerEpoch);
    EXPECT_EQ(b.loss, a.loss);  // REAL columns: bit-exact
    EXPECT_EQ(b.metric, a.metric);
    EXPECT_EQ(b.lr, a.lr);
    EXPECT_EQ(b.samples, a.samples);
    EXPECT_EQ(b.stepTime, a.stepTime);
    EXPECT_EQ(b.wallTime, a.wallTime);
    ASSERT_EQ(b.replicas.size(), a.replicas.size());
    for (size_t r = 0; r < a.replicas.size(); ++r) {
      const ReplicaStep &x = a.replicas[r], &y = b.replicas[r];
      EXPECT_EQ(y.replica, x.replica);
      EXPECT_EQ(y.samples, x.samples);
      EXPECT_NEAR(y.start, x.start, kMicro);
      EXPECT_NEAR(y.phases.forward, x.phases.forward, kMicro);
      EXPECT_NEAR(y.phases.backward, x.phases.backward, kMicro);
      EXPECT_NEAR(y.phases.allreduce, x.phases.allreduce, kMicro);
      EXPECT_NEAR(y.phases.wait, x.phases.wait, kMicro);
      EXPECT_NEAR(y.phases.optimizer, x.phases.optimizer, kMicro);
      EXPECT_NEAR(y.phases.allgather, x.phases.allgather, kMicro);
      EXPECT_NEAR(y.phases.input, x.phases.input, kMicro);
      EXPECT_EQ(y.phases.network, 0.0);  // one worker: no cross-worker hop
    }
  }
  EXPECT_EQ(store.loadCurves(*id).size(), steps.size());
  EXPECT_TRUE(store.loadCurves(*id)[0].replicas.empty());

  // Per-replica totals: the sync share per device.
  ASSERT_EQ(d.replicas.size(), size_t(replicas));
  for (int r = 0; r < replicas; ++r) {
    PhaseTimes sum;
    int64_t samplesSum = 0;
    for (auto& s : steps) {
      sum.forward += s.replicas[r].phases.forward;
      sum.wait += s.replicas[r].phases.wait;
      sum.allreduce += s.replicas[r].phases.allreduce;
      sum.allgather += s.replicas[r].phases.allgather;
      sum.input += s.replicas[r].phases.input;
      samplesSum += s.replicas[r].samples;
    }
    EXPECT_EQ(d.replicas[r].replica, r);
    EXPECT_EQ(d.replicas[r].steps, 30);
    EXPECT_EQ(d.replicas[r].samples, samplesSum);
    EXPECT_NEAR(d.replicas[r].total.forward, sum.forward, 30 * kMicro);
    EXPECT_NEAR(d.replicas[r].total.wait, sum.wait, 30 * kMicro);
    EXPECT_NEAR(d.replicas[r].total.allreduce, sum.allreduce, 30 * kMicro);
    EXPECT_GT(sum.allgather, 0);
    EXPECT_NEAR(d.replicas[r].total.allgather, sum.allgather, 30 * kMicro);
    EXPECT_GT(sum.input, 0);  // the rows gathered for each micro-batch, timed on their own
    EXPECT_NEAR(d.replicas[r].total.input, sum.input, 30 * kMicro);
  }
  EXPECT_EQ(d.replicas[0].waitShare(), 0.0);
  EXPECT_GT(d.replicas[2].waitShare(), 0.05);

  auto back2 = store.loadDeviceSamples(*id);
  ASSERT_EQ(back2.size(), samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    EXPECT_EQ(back2[i].wallTime, samples[i].wallTime);
    EXPECT_EQ(back2[i].device, samples[i].device);
    EXPECT_EQ(back2[i].utilization, samples[i].utilization);
    EXPECT_EQ(back2[i].memoryBytes, samples[i].memoryBytes);
  }
  EXPECT_EQ(store.samplesThroughEpoch(*id, 1), 10 * 256);
}

// A run of 2 workers x 2 replicas as rank 0 records it: the workers, their hosts by rank, and the
// cross-worker hop of each replica step (on local replica 0 of each worker) come back.
TEST(StoreRoundTrip, MultiWorkerRunKeepsWorkersHostsAndNetworkTime) {
  storetest::TempDir dir;
  const std::string db = dir.file("runs.sqlite");
  RunStarted started = makeStarted("two workers", 4);
  started.workers = 2;
  started.hosts = {"a", "b"};
  started.devices = {"a/worker1/cpu:0 (simulated)", "a/worker1/cpu:1 (simulated)", "b/worker2/cpu:0 (simulated)",
                     "b/worker2/cpu:1 (simulated)"};
  std::vector<StepEvent> steps;
  for (int i = 1; i <= 20; ++i) {
    steps.push_back(makeStep(i, 4));
    steps.back().replicas[0].phases.network = (250 + i) * 1e-6;       // 251..270 us
    steps.back().replicas[2].phases.network = (1000 + 3 * i) * 1e-6;  // 1003..1060 us
  }
  auto ch = std::make_shared<Channel>();
  Recorder rec(db, ch);
  ch->tryPush(started);
  for (auto& s : steps) ch->tryPush(s);
  ch->tryPush(makeEpoch(1, 4));
  ch->tryPush(RunFinished{RunStatus::Finished, "", 2.0, 20, 0.5, 0.9});
  rec.stop();
  ASSERT_EQ(rec.error(), "");
  const int64_t id = rec.runId().value();

  RunStore store = RunStore::open(db);
  RunDetail d = store.loadRun(id);
  EXPECT_EQ(d.workers, 2);
  EXPECT_EQ(d.hosts, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(d.summary.replicas, 4);
  EXPECT_EQ(d.deviceNames, started.devices);
  // Stored as whole microseconds, in its own column.
  auto raw = store.db().prepare("SELECT network_us FROM replica_steps WHERE run_id=? AND step=7 ORDER BY replica");
  raw.bind(1, id);
  std::vector<int64_t> us;
  while (raw.step()) us.push_back(raw.getInt(0));
  EXPECT_EQ(us, (std::vector<int64_t>{257, 0, 1021, 0}));

  auto back = store.loadSteps(id, 1, 20);
  ASSERT_EQ(back.size(), 20u);
  for (size_t i = 0; i < back.size(); ++i) {
    ASSERT_EQ(back[i].replicas.size(), 4u);
    EXPECT_DOUBLE_EQ(back[i].replicas[0].phases.network, (250.0 + double(i + 1)) * 1e-6);
    EXPECT_EQ(back[i].replicas[1].phases.network, 0.0);
    EXPECT_DOUBLE_EQ(back[i].replicas[2].phases.network, (1000.0 + 3.0 * double(i + 1)) * 1e-6);
    EXPECT_NEAR(back[i].replicas[0].phases.total(), steps[i].replicas[0].phases.total(), 7 * kMicro);
  }
  // Per-replica totals: 20 x 250 + (1 + ... + 20) = 5210 us, 20 x 1000 + 3 x 210 = 20630 us.
  ASSERT_EQ(d.replicas.size(), 4u);
  EXPECT_DOUBLE_EQ(d.replicas[0].total.network, 5210e-6);
  EXPECT_EQ(d.replicas[1].total.network, 0.0);
  EXPECT_DOUBLE_EQ(d.replicas[2].total.network, 20630e-6);
  EXPECT_NEAR(d.replicas[2].networkShare(), 20630e-6 / d.replicas[2].total.total(), 1e-12);
  EXPECT_GT(d.replicas[2].networkShare(), 0.05);
  EXPECT_EQ(d.replicas[3].networkShare(), 0.0);
}

TEST(StoreRoundTrip, RecorderStoppedBeforeRunFinishedMarksInterrupted) {
  storetest::TempDir dir;
  auto ch = std::make_shared<Channel>();
  Recorder rec(dir.file("runs.sqlite"), ch);
  ch->tryPush(makeStarted("unfinished"));
  ch->tryPush(makeStep(1, 4));
  rec.stop();
  RunStore store = RunStore::open(dir.file("runs.sqlite"));
  RunDetail d = store.loadRun(rec.runId().value());
  EXPECT_EQ(d.summary.status, "interrupted");
  EXPECT_EQ(store.loadCurves(d.summary.id).size(), 1u);
}

TEST(StoreRoundTrip, DeadWriterOnThisHostBecomesInterruptedOnOpen) {
  storetest::TempDir dir;
  const std::string db = dir.file("runs.sqlite");
  int64_t mine, dead, elsewhere;
  {
    RunStore store = RunStore::open(db);
    mine = store.createRun(makeStarted("alive"), {});
    dead = store.createRun(makeStarted("dead"), {});
    elsewhere = store.createRun(makeStarted("other host"), {});
    pid_t child = fork();
    if (child == 0) _exit(0);
    waitpid(child, nullptr, 0);  // a pid that is certainly gone
    auto u = store.db().prepare("UPDATE runs SET pid=? WHERE id IN (?, ?)");
    u.bindAll(static_cast<int64_t>(child), dead, elsewhere).run();
    auto h = store.db().prepare("UPDATE runs SET host='some-other-machine' WHERE id=?");
    h.bind(1, elsewhere).run();
  }
  RunStore store = RunStore::open(db);
  EXPECT_EQ(store.loadRun(mine).summary.status, "running");  // this process is alive
  EXPECT_EQ(store.loadRun(dead).summary.status, "interrupted");
  EXPECT_NE(store.loadRun(dead).error.find("ended without finishing"), std::string::npos);
  EXPECT_EQ(store.loadRun(elsewhere).summary.status, "running");  // cannot tell: leave it
}

TEST(StoreEdit, RenameTagNoteAndFilters) {
  storetest::TempDir dir;
  const std::string db = dir.file("runs.sqlite");
  int64_t a = recordRun(db, "Baseline one GPU", 1, 20, 2);
  int64_t b = recordRun(db, "four replicas", 4, 20, 2, RunStatus::Cancelled);
  RunStore store = RunStore::open(db);
  store.renameRun(a, "baseline 1x");
  store.tagRun(a, "paper");
  store.tagRun(b, "paper");
  store.tagRun(b, "scaling");
  store.tagRun(b, "scaling");  // twice: still one tag
  store.untagRun(a, "paper");
  store.setNote(b, "ring all-reduce, 4 simulated devices");

  auto all = store.listRuns();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].name, "baseline 1x");
  EXPECT_TRUE(all[0].tags.empty());
  EXPECT_EQ(all[1].tags, (std::vector<std::string>{"paper", "scaling"}));
  EXPECT_EQ(store.loadRun(b).note, "ring all-reduce, 4 simulated devices");

  EXPECT_EQ(store.listRuns({.status = "cancelled"}).size(), 1u);
  EXPECT_EQ(store.listRuns({.status = "cancelled"})[0].id, b);
  EXPECT_EQ(store.listRuns({.tag = "paper"}).size(), 1u);
  EXPECT_EQ(store.listRuns({.tag = "nothing"}).size(), 0u);
  EXPECT_EQ(store.listRuns({.name = "BASELINE"}).size(), 1u);
  EXPECT_EQ(store.listRuns({.status = "finished", .name = "four"}).size(), 0u);

  EXPECT_THROW(store.renameRun(99, "x"), UserError);
  EXPECT_THROW(store.tagRun(a, ""), UserError);
  try {
    store.loadRun(99);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("no run 99"), std::string::npos) << e.what();
  }
}

// Pauses and straggler warnings are stored in the order they happened, read back field by field;
// a resume drops those after its checkpoint, as it drops the steps.
TEST(StoreRoundTrip, PausesAndStragglerWarningsAreStoredInOrder) {
  storetest::TempDir dir;
  const std::string db = dir.file("runs.sqlite");
  auto ch = std::make_shared<Channel>();
  Recorder rec(db, ch);
  ch->tryPush(makeStarted("events", 3));
  for (int i = 1; i <= 4; ++i) ch->tryPush(makeStep(i, 3));
  ch->tryPush(RunPaused{0.75, 2.25});  // after step 4
  for (int i = 5; i <= 9; ++i) ch->tryPush(makeStep(i, 3));
  WatchdogWarning w;
  w.replica = 2;
  w.device = "cpu:2";
  w.phase = "backward";
  w.step = 9;
  w.lateSeconds = 0.031;
  w.typicalSeconds = 0.004;
  w.message = "replica 2 (cpu:2) is a straggler: it reaches the all-reduce 31.0 ms after the others";
  w.wallTime = 1.9;
  ch->tryPush(w);
  for (int i = 10; i <= 11; ++i) ch->tryPush(makeStep(i, 3));
  ch->tryPush(RunPaused{2.5, 0.5});  // after step 11
  ch->tryPush(makeStep(12, 3));
  RunFinished f;
  f.steps = 12;
  ch->tryPush(f);
  rec.stop();
  ASSERT_EQ(rec.error(), "");
  RunStore store = RunStore::open(db);
  const int64_t id = rec.runId().value();
  RunDetail d = store.loadRun(id);
  ASSERT_EQ(d.events.size(), 3u);
  EXPECT_EQ(d.events[0].kind, "pause");
  EXPECT_EQ(d.events[0].step, 4);
  EXPECT_DOUBLE_EQ(d.events[0].wallTime, 0.75);
  EXPECT_DOUBLE_EQ(d.events[0].seconds, 2.25);
  EXPECT_FALSE(d.events[0].replica.has_value());
  EXPECT_EQ(d.events[1].kind, "straggler");
  EXPECT_EQ(d.events[1].step, 9);
  EXPECT_EQ(d.events[1].replica, 2);
  EXPECT_DOUBLE_EQ(d.events[1].seconds, 0.031);
  EXPECT_EQ(d.events[1].message, w.message);
  EXPECT_EQ(d.events[2].step, 11);
  EXPECT_DOUBLE_EQ(d.pausedSeconds(), 2.75);

  store.resumeRun(id, 8, 0, 1.0);
  d = store.loadRun(id);
  ASSERT_EQ(d.events.size(), 1u);
  EXPECT_EQ(d.events[0].step, 4);
  EXPECT_DOUBLE_EQ(d.pausedSeconds(), 2.25);
}

TEST(StoreEdit, DeleteRemovesEveryRowOfTheRunInEveryTable) {
  storetest::TempDir dir;
  const std::string db = dir.file("runs.sqlite");
  int64_t a = recordRun(db, "doomed", 4, 50, 3);
  int64_t b = recordRun(db, "kept", 2, 40, 2);
  RunStore store = RunStore::open(db);
  for (int64_t id : {a, b}) {
    store.tagRun(id, "t");
    store.addArtifact(id, "/tmp/weights.mlw", "weights", "0123abcd", 4096);
    store.addEvent(id, RunEvent{"pause", 3, 1.5, 2.0, std::nullopt, {}});
  }
  const std::vector<std::string> tables = {"runs",           "steps", "replica_steps", "epochs",
                                           "device_samples", "tags",  "artifacts",     "run_events"};
  // Every table a run can have rows in is listed here (a new table must be added).
  int64_t userTables = store.db().queryInt("SELECT count(*) FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'");
  // sweeps and sweep_points refer to runs without owning rows of them (a point's run_id becomes
  // NULL when its run is deleted: tested in SweepTest).
  EXPECT_EQ(userTables, static_cast<int64_t>(tables.size()) + 2);
  for (auto& t : tables) EXPECT_GT(countRows(store.db(), t, a), 0) << t;

  store.deleteRun(a);
  for (auto& t : tables) EXPECT_EQ(countRows(store.db(), t, a), 0) << t;
  EXPECT_EQ(countRows(store.db(), "steps", b), 40);
  EXPECT_EQ(countRows(store.db(), "replica_steps", b), 80);
  EXPECT_EQ(store.loadRun(b).artifacts.size(), 1u);
  EXPECT_EQ(store.loadRun(b).artifacts[0].checksum, "0123abcd");
  EXPECT_EQ(*store.loadRun(b).artifacts[0].bytes, 4096);
  EXPECT_THROW(store.deleteRun(a), UserError);
  EXPECT_EQ(store.db().queryText("PRAGMA foreign_key_check"), "");
}

TEST(StoreExport, CsvFilesWithHeadersAndEveryRow) {
  storetest::TempDir dir;
  const std::string db = dir.file("runs.sqlite");
  int64_t id = recordRun(db, "export me", 2, 25, 2);
  RunStore store = RunStore::open(db);
  const std::string out = dir.file("csv/out");
  store.exportCsv(id, out);
  auto lines = [](const std::string& path) {
    std::vector<std::string> v;
    std::ifstream in(path);
    for (std::string l; std::getline(in, l);) v.push_back(l);
    return v;
  };
  auto steps = lines(out + "/steps.csv");
  ASSERT_EQ(steps.size(), 26u);
  EXPECT_EQ(steps[0], "step,epoch,loss,metric,lr,samples,step_time,wall_time,loss_scale,skipped");
  StepEvent first = makeStep(1, 2);
  EXPECT_EQ(std::stod(steps[1].substr(steps[1].find(',', 2) + 1)), first.loss);
  auto reps = lines(out + "/replica_steps.csv");
  ASSERT_EQ(reps.size(), 51u);
  EXPECT_EQ(reps[0], "step,replica,samples,start,forward,backward,allreduce,wait,optimizer,allgather,network,input");
  auto ep = lines(out + "/epochs.csv");
  ASSERT_EQ(ep.size(), 3u);
  EXPECT_EQ(ep[0].substr(0, 17), "epoch,train_loss,");
  auto dev = lines(out + "/device_samples.csv");
  ASSERT_EQ(dev.size(), 3u);
  EXPECT_EQ(dev[0],
            "wall_time,device,utilization,memory_bytes,source,gpu,gpu_replicas,memory_total_bytes,temperature_c,memory_busy");
  // A computed sample: of no GPU, and nothing unknown made up.
  EXPECT_TRUE(dev[1].ends_with(",\"computed\",,,,,")) << dev[1];
  EXPECT_THROW(store.exportCsv(id, "/proc/mirrorlab-no/such"), UserError);
}

TEST(StorePaths, DefaultStorePathFollowsEnvironment) {
  const char* oldDb = std::getenv("MIRRORLAB_DB");
  const char* oldXdg = std::getenv("XDG_DATA_HOME");
  std::string keepDb = oldDb ? oldDb : "", keepXdg = oldXdg ? oldXdg : "";
  setenv("MIRRORLAB_DB", "/x/y.sqlite", 1);
  EXPECT_EQ(defaultStorePath(), "/x/y.sqlite");
  unsetenv("MIRRORLAB_DB");
  setenv("XDG_DATA_HOME", "/data", 1);
  EXPECT_EQ(defaultStorePath(), "/data/mirrorlab/runs.sqlite");
  unsetenv("XDG_DATA_HOME");
  setenv("HOME", std::getenv("HOME") ? std::getenv("HOME") : "/home/u", 1);
  EXPECT_EQ(defaultStorePath(), std::string(std::getenv("HOME")) + "/.local/share/mirrorlab/runs.sqlite");
  if (oldDb) setenv("MIRRORLAB_DB", keepDb.c_str(), 1);
  if (oldXdg) setenv("XDG_DATA_HOME", keepXdg.c_str(), 1);
}

TEST(StorePaths, HostInfoDescribesThisMachine) {
  nlohmann::json h = hostInfo({"GPU A", "GPU B"}, {{"cuda", "12.4"}});
  EXPECT_FALSE(h["cpu_model"].get<std::string>().empty());
  EXPECT_GE(h["logical_cores"].get<int>(), 1);
  EXPECT_GT(h["memory_bytes"].get<int64_t>(), 1 << 20);
  EXPECT_EQ(h["mirrorlab_version"], MIRRORLAB_VERSION);
  EXPECT_NE(h["openblas"].get<std::string>().find("OpenBLAS"), std::string::npos) << h.dump();
  EXPECT_EQ(h["gpus"], nlohmann::json({"GPU A", "GPU B"}));
  EXPECT_EQ(h["cuda"], "12.4");
  EXPECT_EQ(h["hostname"], hostName());
}
