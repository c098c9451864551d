// The store when things go wrong (issue 11): a write that fails stops the recording and marks the
// run with what the store holds; pages that live only in the -wal file are not damage; a store
// another connection is creating is waited for, not called locked or damaged; a negative or
// foreign user_version is refused without touching the file.
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "Error.h"
#include "StoreTestUtil.h"
#include "store/Recorder.h"
#include "store/RunStore.h"
#include "store/Sqlite.h"

using namespace ml;
namespace fs = std::filesystem;
using storetest::makeStarted;
using storetest::makeStep;

namespace {

std::string openError(const std::string& path) {
  try {
    RunStore::open(path);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

int64_t count(sql::Db& db, const std::string& sql) { return db.queryInt(sql); }

}  // namespace

TEST(StoreFaults, NegativeOrForeignUserVersionIsRefusedAndUnchanged) {
  storetest::TempDir dir;
  const std::string neg = dir.file("neg.sqlite");
  {
    RunStore s = RunStore::open(neg);
    s.createRun(makeStarted("r"), {});
  }
  {
    sql::Db db = sql::Db::open(neg, SQLITE_OPEN_READWRITE);
    db.exec("PRAGMA user_version=-5");
  }
  const std::string before = storetest::readBytes(neg);
  const std::string m = openError(neg);
  EXPECT_NE(m.find("schema version -5, which no Mirrorlab writes"), std::string::npos) << m;
  EXPECT_NE(m.find("--db"), std::string::npos) << m;
  EXPECT_EQ(storetest::readBytes(neg), before);

  // No tables and no application_id, but a user_version: another program's file, not ours to adopt.
  const std::string foreign = dir.file("foreign.sqlite");
  {
    sql::Db db = sql::Db::open(foreign, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    db.exec("PRAGMA user_version=7");
  }
  const std::string fb = storetest::readBytes(foreign);
  const std::string m2 = openError(foreign);
  EXPECT_NE(m2.find("another application (user_version 7)"), std::string::npos) << m2;
  EXPECT_EQ(storetest::readBytes(foreign), fb);
}

// A checkpoint that hit a full disk: the main file's header counts pages the file does not have
// yet, but every page is in the -wal file, where SQLite reads it. The store is intact.
TEST(StoreFaults, PagesThatLiveInTheWalAreNotDamage) {
  storetest::TempDir dir;
  const std::string a = dir.file("a.sqlite"), b = dir.file("b.sqlite");
  int64_t id;
  {
    RunStore s = RunStore::open(a);
    id = s.createRun(makeStarted("in the wal"), {});
  }
  RunStore live = RunStore::open(a);  // stays open: no checkpoint on close
  live.db().exec("PRAGMA wal_autocheckpoint=0");
  std::vector<StepEvent> steps;
  for (int i = 1; i <= 3000; ++i) steps.push_back(makeStep(i, 4));
  live.appendSteps(id, steps);
  fs::copy_file(a, b);
  fs::copy_file(a + "-wal", b + "-wal");
  // The header says 4x the pages the file has, and the count is "valid" (change counter matches).
  std::string bytes = storetest::readBytes(b);
  const uint32_t pages = static_cast<uint32_t>(bytes.size() / 4096 * 4);
  for (int i = 0; i < 4; ++i) {
    bytes[28 + i] = static_cast<char>(pages >> (24 - 8 * i));
    bytes[92 + i] = bytes[24 + i];
  }
  storetest::writeBytes(b, bytes);

  RunStore s = RunStore::open(b);
  EXPECT_EQ(s.db().queryText("PRAGMA integrity_check"), "ok");
  EXPECT_EQ(s.loadCurves(id).size(), 3000u);

  // The same main file without its log really is truncated: refused, and left as it was.
  const std::string c = dir.file("c.sqlite");
  storetest::writeBytes(c, bytes);
  const std::string m = openError(c);
  EXPECT_NE(m.find("damaged (truncated"), std::string::npos) << m;
  EXPECT_EQ(storetest::readBytes(c), bytes);
}

// Another connection holds an exclusive lock on a new store (it is creating it): opening waits for
// the lock instead of reporting "database is locked" or calling the file damaged.
TEST(StoreFaults, OpeningWaitsForAStoreBeingCreated) {
  storetest::TempDir dir;
  const std::string path = dir.file("new.sqlite");
  sql::Db creator = sql::Db::open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  creator.exec("CREATE TABLE t(x); DROP TABLE t;");  // an empty rollback-mode file, as SQLite starts one
  creator.exec("BEGIN EXCLUSIVE");
  std::atomic<bool> released{false};
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    released = true;
    creator.exec("COMMIT");
  });
  const auto t0 = std::chrono::steady_clock::now();
  std::string error;
  try {
    RunStore s = RunStore::open(path);
    s.createRun(makeStarted("after the lock"), {});
  } catch (const std::exception& e) {
    error = e.what();
  }
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  t.join();
  EXPECT_EQ(error, "");
  EXPECT_TRUE(released.load());
  EXPECT_GT(waited, 0.4) << "the open did not wait for the lock";
}

// Two connections create the same new store at once, 20 times: both always succeed.
TEST(StoreFaults, TwoWritersCreateOneNewStore) {
  storetest::TempDir dir;
  for (int i = 0; i < 20; ++i) {
    const std::string path = dir.file("s" + std::to_string(i) + ".sqlite");
    std::string errors[2];
    std::thread w[2];
    for (int k = 0; k < 2; ++k)
      w[k] = std::thread([&, k] {
        try {
          RunStore s = RunStore::open(path);
          s.createRun(makeStarted("writer " + std::to_string(k)), {});
        } catch (const std::exception& e) {
          errors[k] = e.what();
        }
      });
    for (auto& x : w) x.join();
    EXPECT_EQ(errors[0], "") << "try " << i;
    EXPECT_EQ(errors[1], "") << "try " << i;
    RunStore s = RunStore::open(path);
    EXPECT_EQ(s.listRuns().size(), 2u) << "try " << i;
  }
}

// The disk fills up during a run (a file-size limit here): the recorder reports the failure once,
// writes nothing after it (no hole in the steps), and marks the run failed with the last step the
// store holds once the run ends.
TEST(StoreFaults, AFailedWriteStopsTheRecordingAndMarksTheRun) {
  storetest::TempDir dir;
  const std::string db = dir.file("runs.sqlite");
  auto ch = std::make_shared<Channel>(1 << 20);
  std::atomic<int> failures{0};
  std::string reason;
  RecorderOptions o;
  o.wait = std::chrono::milliseconds(5);
  o.commitEvery = std::chrono::milliseconds(5);
  o.onFailure = [&](const std::string& why) {
    reason = why;
    ++failures;
  };
  Recorder rec(db, ch, o);
  ch->tryPush(makeStarted("full disk"));
  for (int i = 1; i <= 20; ++i) ch->tryPush(makeStep(i, 4));
  for (int k = 0; k < 500 && rec.committedStep() < 20; ++k) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(rec.committedStep(), 20);

  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto oldSignal = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  std::error_code ec;
  small.rlim_cur = std::max(fs::file_size(db, ec), fs::file_size(db + "-wal", ec)) + 8192;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  for (int i = 21; i <= 5000; ++i) ch->tryPush(makeStep(i, 4));
  for (int k = 0; k < 500 && rec.error().empty(); ++k) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, oldSignal);
  ASSERT_NE(rec.error(), "") << "the writes did not fail";
  EXPECT_EQ(failures.load(), 1);
  EXPECT_NE(reason.find("could not record the run"), std::string::npos) << reason;
  const int64_t held = rec.committedStep();

  // Room again: later events are not written (they would follow a hole), the end is marked.
  for (int i = 5001; i <= 5010; ++i) ch->tryPush(makeStep(i, 4));
  RunFinished f;
  f.status = RunStatus::Failed;
  f.steps = 5010;
  ch->tryPush(f);
  rec.stop();
  EXPECT_TRUE(rec.failureRecorded());

  RunStore s = RunStore::open(db);
  EXPECT_EQ(s.db().queryText("PRAGMA integrity_check"), "ok");
  const RunDetail d = s.loadRun(rec.runId().value());
  EXPECT_EQ(d.summary.status, "failed");
  EXPECT_EQ(d.steps, held);
  EXPECT_NE(d.error.find("recording failed after step " + std::to_string(held)), std::string::npos) << d.error;
  EXPECT_EQ(count(s.db(), "SELECT count(*) FROM steps"), held);
  EXPECT_EQ(count(s.db(), "SELECT max(step) FROM steps"), held);
}
