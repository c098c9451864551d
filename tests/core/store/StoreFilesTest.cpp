// Opening store files: migration from a version-1 fixture, and every kind of bad file rejected
// with a message naming it while its bytes stay exactly as they were.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "Error.h"
#include "StoreTestUtil.h"
#include "store/RunStore.h"
#include "store/Schema.h"
#include "store/Sqlite.h"

using namespace ml;
namespace fs = std::filesystem;

namespace {

// The version-1 schema exactly as it shipped: stores in users' hands were made with this text.
const char* kV1Sql = R"sql(
CREATE TABLE runs(
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  created REAL NOT NULL,
  finished REAL,
  status TEXT NOT NULL,
  devices TEXT NOT NULL DEFAULT '',
  replicas INTEGER NOT NULL DEFAULT 1,
  global_batch INTEGER NOT NULL DEFAULT 0,
  per_replica_batch INTEGER NOT NULL DEFAULT 0,
  base_lr REAL,
  lr REAL,
  epochs INTEGER,
  steps_per_epoch INTEGER,
  total_steps INTEGER,
  seconds REAL,
  steps INTEGER,
  final_val_loss REAL,
  final_val_metric REAL,
  pid INTEGER,
  pid_start INTEGER,
  host TEXT NOT NULL DEFAULT '',
  error TEXT NOT NULL DEFAULT '',
  description TEXT NOT NULL DEFAULT '',
  device_names TEXT NOT NULL DEFAULT '[]',
  project_json TEXT NOT NULL,
  config_json TEXT NOT NULL,
  host_json TEXT NOT NULL
);
CREATE INDEX runs_created ON runs(created);
CREATE TABLE steps(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step INTEGER NOT NULL,
  epoch INTEGER NOT NULL,
  loss REAL,
  metric REAL,
  lr REAL,
  samples INTEGER,
  step_time REAL,
  wall_time REAL,
  PRIMARY KEY(run_id, step)
) WITHOUT ROWID;
CREATE TABLE replica_steps(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step INTEGER NOT NULL,
  replica INTEGER NOT NULL,
  samples INTEGER,
  start_us INTEGER,
  forward_us INTEGER,
  backward_us INTEGER,
  allreduce_us INTEGER,
  wait_us INTEGER,
  optimizer_us INTEGER,
  PRIMARY KEY(run_id, step, replica)
) WITHOUT ROWID;
CREATE TABLE epochs(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  epoch INTEGER NOT NULL,
  train_loss REAL,
  train_metric REAL,
  val_loss REAL,
  val_metric REAL,
  seconds REAL,
  samples_per_sec REAL,
  allreduce_share REAL,
  wait_share REAL,
  in_sync INTEGER,
  checksums TEXT NOT NULL DEFAULT '',
  wall_time REAL,
  PRIMARY KEY(run_id, epoch)
) WITHOUT ROWID;
CREATE TABLE device_samples(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  device INTEGER NOT NULL,
  wall_time REAL NOT NULL,
  utilization REAL,
  memory_bytes REAL,
  PRIMARY KEY(run_id, device, wall_time)
) WITHOUT ROWID;
)sql";

// Writes a version-1 store with one finished run of 5 steps x 2 replicas and one epoch.
void writeV1Fixture(const std::string& path) {
  sql::Db db = sql::Db::open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  db.exec("PRAGMA journal_mode=WAL");
  db.exec(kV1Sql);
  db.exec(("PRAGMA application_id=" + std::to_string(store::kApplicationId)).c_str());
  db.exec("PRAGMA user_version=1");
  db.exec(R"sql(
INSERT INTO runs(id, name, created, finished, status, devices, replicas, global_batch, lr,
  epochs, steps_per_epoch, final_val_metric, project_json, config_json, host_json)
VALUES(7, 'old run', 1700000000.5, 1700000100.25, 'finished', 'cpu:2', 2, 128, 0.002,
  1, 5, 0.875, '{"name":"old"}', '{"devices":"cpu:2","lr":0.002}', '{"cpu_model":"x"}');
INSERT INTO steps VALUES(7,1,1,2.0,0.1,0.002,128,0.01,0.01),(7,2,1,1.5,0.2,0.002,128,0.01,0.02),
  (7,3,1,1.2,0.3,0.002,128,0.01,0.03),(7,4,1,1.0,0.4,0.002,128,0.01,0.04),
  (7,5,1,0.9,0.5,0.002,128,0.01,0.05);
INSERT INTO replica_steps SELECT 7, step, r.value, 64, 0, 4000, 5000, 700, 100 * r.value, 300
  FROM steps, (SELECT 0 AS value UNION ALL SELECT 1) r;
INSERT INTO epochs VALUES(7,1,1.2,0.3,1.1,0.875,0.05,12800,0.07,0.01,1,'00000000000000aa',0.06);
)sql");
}

void expectRejected(const std::string& path, const std::string& expectedProblem) {
  const std::string before = storetest::readBytes(path);
  const bool walBefore = fs::exists(path + "-wal"), shmBefore = fs::exists(path + "-shm");
  try {
    RunStore::open(path);
    ADD_FAILURE() << path << " was accepted";
  } catch (const UserError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find(path), std::string::npos) << "message does not name the file: " << m;
    EXPECT_NE(m.find(expectedProblem), std::string::npos) << m;
    EXPECT_NE(m.find("--db"), std::string::npos) << "message does not say the fix: " << m;
  }
  EXPECT_EQ(storetest::readBytes(path), before) << path << " was modified";
  EXPECT_EQ(fs::exists(path + "-wal"), walBefore);
  EXPECT_EQ(fs::exists(path + "-shm"), shmBefore);
}

// A real store with enough rows to span many pages; closed (checkpointed) on return.
void writeStore(const std::string& path, int steps) {
  RunStore s = RunStore::open(path);
  int64_t id = s.createRun(storetest::makeStarted("r"), {});
  std::vector<StepEvent> v;
  for (int i = 1; i <= steps; ++i) v.push_back(storetest::makeStep(i, 4));
  s.appendSteps(id, v);
}

}  // namespace

TEST(StoreFiles, ShippedVersion1SchemaIsUnchanged) {
  EXPECT_STREQ(store::kMigrations[0], kV1Sql) << "never edit a shipped migration: add one";
}

TEST(StoreFiles, MigratesVersion1FixtureKeepingItsData) {
  storetest::TempDir dir;
  const std::string path = dir.file("v1.sqlite");
  writeV1Fixture(path);
  RunStore store = RunStore::open(path);
  EXPECT_EQ(store.schemaVersion(), store::kSchemaVersion);
  EXPECT_EQ(store.db().queryInt("PRAGMA application_id"), store::kApplicationId);

  auto runs = store.listRuns();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].id, 7);
  EXPECT_EQ(runs[0].name, "old run");
  EXPECT_EQ(runs[0].status, "finished");
  EXPECT_EQ(runs[0].devices, "cpu:2");
  EXPECT_EQ(runs[0].globalBatch, 128);
  EXPECT_DOUBLE_EQ(*runs[0].finalValMetric, 0.875);
  EXPECT_DOUBLE_EQ(runs[0].created, 1700000000.5);
  auto curves = store.loadCurves(7);
  ASSERT_EQ(curves.size(), 5u);
  EXPECT_DOUBLE_EQ(curves[4].loss, 0.9);
  RunDetail d = store.loadRun(7);
  ASSERT_EQ(d.replicas.size(), 2u);
  EXPECT_NEAR(d.replicas[1].total.wait, 5 * 100e-6, 1e-12);
  EXPECT_EQ(d.epochs.at(0).checksums, std::vector<uint64_t>{0xaa});
  EXPECT_EQ(d.note, "");    // a v2 column, added with its default
  EXPECT_EQ(d.workers, 1);  // v8 columns, added with theirs
  EXPECT_TRUE(d.hosts.empty());
  EXPECT_EQ(d.replicas[1].total.network, 0.0);

  // The v2 tables work on the migrated store, and it opens again without migrating.
  store.tagRun(7, "legacy");
  store.setNote(7, "from v1");
  store.addArtifact(7, "w.mlw", "weights", "ff");
  RunStore again = RunStore::open(path);
  EXPECT_EQ(again.listRuns({.tag = "legacy"}).size(), 1u);
  EXPECT_EQ(again.db().queryText("PRAGMA integrity_check"), "ok");
}

// A version-7 store (made with the shipped migrations 1..7, before workers existed) is upgraded:
// its run keeps every field and its phase timings, reads back as one worker without network time,
// and a multi-worker run can then be written beside it.
TEST(StoreFiles, MigratesVersion7StoreToWorkersAndNetworkTime) {
  storetest::TempDir dir;
  const std::string path = dir.file("v7.sqlite");
  {
    sql::Db db = sql::Db::open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    db.exec("PRAGMA journal_mode=WAL");
    for (int v = 1; v <= 7; ++v) db.exec(store::kMigrations[v - 1]);
    db.exec(("PRAGMA application_id=" + std::to_string(store::kApplicationId)).c_str());
    db.exec("PRAGMA user_version=7");
    db.exec(R"sql(
INSERT INTO runs(id, name, created, finished, status, devices, replicas, global_batch, lr,
  epochs, steps_per_epoch, steps, project_json, config_json, host_json)
VALUES(3, 'v7 run', 1750000000.0, 1750000010.0, 'finished', 'cpu:2', 2, 64, 0.01,
  1, 2, 2, '{"name":"v7"}', '{"devices":"cpu:2"}', '{}');
INSERT INTO steps(run_id, step, epoch, loss, metric, lr, samples, step_time, wall_time, loss_scale, skipped)
  VALUES(3,1,1,1.5,0.4,0.01,64,0.02,0.02,NULL,0),(3,2,1,1.25,0.5,0.01,64,0.02,0.04,NULL,0);
INSERT INTO replica_steps(run_id, step, replica, samples, start_us, forward_us, backward_us,
  allreduce_us, wait_us, optimizer_us, allgather_us)
  SELECT 3, step, r.value, 32, 0, 4000, 6000, 900 + r.value, 50 * r.value, 300, 0
  FROM steps, (SELECT 0 AS value UNION ALL SELECT 1) r;
)sql");
  }
  RunStore store = RunStore::open(path);
  EXPECT_EQ(store.schemaVersion(), store::kSchemaVersion);
  ASSERT_EQ(store.listRuns().size(), 1u);
  RunDetail d = store.loadRun(3);
  EXPECT_EQ(d.summary.name, "v7 run");
  EXPECT_EQ(d.summary.replicas, 2);
  EXPECT_EQ(d.workers, 1);
  EXPECT_TRUE(d.hosts.empty());
  ASSERT_EQ(d.replicas.size(), 2u);
  EXPECT_DOUBLE_EQ(d.replicas[1].total.allreduce, 2 * 901e-6);
  EXPECT_DOUBLE_EQ(d.replicas[1].total.wait, 2 * 50e-6);
  EXPECT_EQ(d.replicas[0].total.network, 0.0);
  EXPECT_EQ(d.replicas[1].total.network, 0.0);
  auto steps = store.loadSteps(3, 1, 2);
  ASSERT_EQ(steps.size(), 2u);
  ASSERT_EQ(steps[1].replicas.size(), 2u);
  EXPECT_DOUBLE_EQ(steps[1].replicas[0].phases.backward, 6000e-6);
  EXPECT_EQ(steps[1].replicas[0].phases.network, 0.0);
  EXPECT_EQ(steps[1].replicas[0].phases.input, 0.0);  // v9: stored before the input was its own phase
  EXPECT_EQ(d.replicas[1].total.input, 0.0);

  // The migrated store takes a run of two workers beside the old one.
  RunStarted s = storetest::makeStarted("after upgrade", 4);
  s.workers = 2;
  s.hosts = {"a", "b"};
  const int64_t id = store.createRun(s, {});
  StepEvent e = storetest::makeStep(1, 4);
  e.replicas[2].phases.network = 0.000125;
  store.appendSteps(id, std::span<const StepEvent>(&e, 1));
  RunStore again = RunStore::open(path);
  RunDetail n = again.loadRun(id);
  EXPECT_EQ(n.workers, 2);
  EXPECT_EQ(n.hosts, (std::vector<std::string>{"a", "b"}));
  EXPECT_DOUBLE_EQ(again.loadSteps(id, 1, 1).at(0).replicas.at(2).phases.network, 125e-6);
  EXPECT_EQ(again.loadRun(3).workers, 1);
  EXPECT_EQ(again.db().queryText("PRAGMA integrity_check"), "ok");
}

// A version-8 store (before NVML telemetry) is upgraded: its device samples keep their figures and
// read back as computed ones, of no GPU, with nothing unknown made up; an NVML sample of a GPU
// shared by two replicas can then be written beside them and reads back whole.
TEST(StoreFiles, MigratesVersion8DeviceSamplesToSourcedSamples) {
  storetest::TempDir dir;
  const std::string path = dir.file("v8.sqlite");
  {
    sql::Db db = sql::Db::open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    db.exec("PRAGMA journal_mode=WAL");
    for (int v = 1; v <= 8; ++v) db.exec(store::kMigrations[v - 1]);
    db.exec(("PRAGMA application_id=" + std::to_string(store::kApplicationId)).c_str());
    db.exec("PRAGMA user_version=8");
    db.exec(R"sql(
INSERT INTO runs(id, name, created, finished, status, devices, replicas, global_batch, lr,
  epochs, steps_per_epoch, steps, project_json, config_json, host_json)
VALUES(5, 'v8 run', 1760000000.0, 1760000010.0, 'finished', 'gpu:0x2', 2, 64, 0.01,
  1, 2, 2, '{"name":"v8"}', '{"devices":"gpu:0x2"}', '{}');
INSERT INTO device_samples(run_id, device, wall_time, utilization, memory_bytes)
  VALUES(5,0,0.5,0.75,1000000),(5,1,0.5,0.5,2000000);
)sql");
  }
  RunStore store = RunStore::open(path);
  EXPECT_EQ(store.schemaVersion(), store::kSchemaVersion);
  auto old = store.loadDeviceSamples(5);
  ASSERT_EQ(old.size(), 2u);
  EXPECT_EQ(old[1].device, 1);
  EXPECT_DOUBLE_EQ(old[1].utilization, 0.5);
  EXPECT_DOUBLE_EQ(old[1].memoryBytes, 2e6);
  for (const auto& d : old) {
    EXPECT_EQ(d.source, SampleSource::Computed);
    EXPECT_EQ(d.gpu, -1);
    EXPECT_EQ(d.gpuReplicas, 1);
    EXPECT_EQ(d.memoryTotalBytes, 0.0);
    EXPECT_FALSE(d.temperatureC.has_value());
    EXPECT_FALSE(d.memoryBusy.has_value());
  }
  DeviceSample n{1.0, 0, 0.6, 3e9};
  n.source = SampleSource::Nvml;
  n.gpu = 0;
  n.gpuReplicas = 2;
  n.memoryTotalBytes = 16.0 * (1 << 30);
  n.temperatureC = 45;
  n.memoryBusy = 0.2;
  store.appendDeviceSamples(5, std::span<const DeviceSample>(&n, 1));
  RunStore again = RunStore::open(path);
  auto all = again.loadDeviceSamples(5);
  ASSERT_EQ(all.size(), 3u);
  const DeviceSample& b = all[2];
  EXPECT_EQ(b.source, SampleSource::Nvml);
  EXPECT_EQ(b.gpu, 0);
  EXPECT_EQ(b.gpuReplicas, 2);
  EXPECT_DOUBLE_EQ(b.utilization, 0.6);
  EXPECT_DOUBLE_EQ(b.memoryBytes, 3e9);
  EXPECT_DOUBLE_EQ(b.memoryTotalBytes, 16.0 * (1 << 30));
  EXPECT_EQ(b.temperatureC, std::optional<double>(45));
  EXPECT_EQ(b.memoryBusy, std::optional<double>(0.2));
  EXPECT_EQ(again.db().queryText("PRAGMA integrity_check"), "ok");
}

TEST(StoreFiles, TextFileIsRejectedAndUnchanged) {
  storetest::TempDir dir;
  const std::string path = dir.file("notes.txt");
  std::string text;
  for (int i = 0; i < 200; ++i) text += "line " + std::to_string(i) + ": not a database\n";
  storetest::writeBytes(path, text);
  expectRejected(path, "not a SQLite database");
  storetest::writeBytes(path, "tiny");
  expectRejected(path, "not a SQLite database");
}

TEST(StoreFiles, ForeignSqliteDatabasesAreRejectedAndUnchanged) {
  storetest::TempDir dir;
  const std::string tables = dir.file("shop.db");
  {
    sql::Db db = sql::Db::open(tables, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    db.exec(
        "CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT);"
        "INSERT INTO customers(name) VALUES('Ada'),('Grace');");
  }
  expectRejected(tables, "not a Mirrorlab run store");

  const std::string other = dir.file("other-app.db");
  {
    sql::Db db = sql::Db::open(other, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    db.exec("PRAGMA application_id=305419896; CREATE TABLE runs(x);");  // 0x12345678
  }
  expectRejected(other, "another application (application_id 0x12345678)");
}

TEST(StoreFiles, NewerSchemaVersionIsRejectedAndUnchanged) {
  storetest::TempDir dir;
  const std::string path = dir.file("future.sqlite");
  writeStore(path, 10);
  {
    sql::Db db = sql::Db::open(path, SQLITE_OPEN_READWRITE);
    db.exec("PRAGMA user_version=99");
  }
  expectRejected(path, "newer Mirrorlab (schema version 99");
}

TEST(StoreFiles, TruncatedStoreIsRejectedAndUnchanged) {
  storetest::TempDir dir;
  const std::string path = dir.file("cut.sqlite");
  writeStore(path, 2000);
  std::string bytes = storetest::readBytes(path);
  ASSERT_GT(bytes.size(), 64u * 1024);
  storetest::writeBytes(path, bytes.substr(0, bytes.size() / 2 + 100));
  expectRejected(path, "damaged (truncated");
}

TEST(StoreFiles, DamagedPagesAreRejectedAndUnchanged) {
  storetest::TempDir dir;
  const std::string path = dir.file("scribbled.sqlite");
  writeStore(path, 2000);
  std::string bytes = storetest::readBytes(path);
  const size_t page = 4096;
  ASSERT_GT(bytes.size(), 20 * page);
  // Scribble over the b-tree page headers of a few pages in the middle of the file.
  for (size_t p = 5; p < 20; p += 3)
    for (size_t i = 0; i < 64; ++i) bytes[p * page + i] = static_cast<char>(0xA5 ^ i);
  storetest::writeBytes(path, bytes);
  expectRejected(path, "damaged");

  // A damaged schema page (page 1 after the header) is caught too.
  const std::string path2 = dir.file("schema.sqlite");
  writeStore(path2, 10);
  std::string b2 = storetest::readBytes(path2);
  for (size_t i = 100; i < 400; ++i) b2[i] = static_cast<char>(i * 7);
  storetest::writeBytes(path2, b2);
  expectRejected(path2, "run store " + path2);
}

TEST(StoreFiles, EmptyFileBecomesAStore) {
  storetest::TempDir dir;
  const std::string path = dir.file("empty.sqlite");
  storetest::writeBytes(path, "");
  RunStore s = RunStore::open(path);
  EXPECT_EQ(s.schemaVersion(), store::kSchemaVersion);
  EXPECT_EQ(s.db().queryText("PRAGMA journal_mode"), "wal");
}

TEST(StoreFiles, ReadOnlyLocationFailsAtOpen) {
  try {
    RunStore::open("/proc/mirrorlab-test/runs.sqlite");
    FAIL() << "opened a store under /proc";
  } catch (const UserError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("/proc/mirrorlab-test/runs.sqlite"), std::string::npos) << m;
    EXPECT_NE(m.find("cannot be written"), std::string::npos) << m;
    EXPECT_NE(m.find("--db"), std::string::npos) << m;
  }
  storetest::TempDir dir;
  EXPECT_THROW(RunStore::open(dir.path().string()), UserError);  // a folder, not a file
  if (geteuid() != 0) {                                          // root writes through permissions
    const std::string path = dir.file("ro.sqlite");
    writeStore(path, 5);
    chmod(path.c_str(), 0444);
    std::string before = storetest::readBytes(path);
    EXPECT_THROW(RunStore::open(path), UserError);
    EXPECT_EQ(storetest::readBytes(path), before);
    fs::create_directory(dir.file("ro"));
    chmod(dir.file("ro").c_str(), 0555);
    EXPECT_THROW(RunStore::open(dir.file("ro/runs.sqlite")), UserError);
    chmod(dir.file("ro").c_str(), 0755);
  }
}
