// The store under the conditions of real use: the studio reading while the recorder writes, and
// a training process killed with SIGKILL in the middle of a run.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <thread>

#include <gtest/gtest.h>

#include "StoreTestUtil.h"
#include "store/Recorder.h"
#include "store/RunStore.h"

using namespace ml;
using Clock = std::chrono::steady_clock;

TEST(StoreConcurrency, ReaderQueriesWhileRecorderWrites) {
  storetest::TempDir dir;
  const std::string db = dir.file("runs.sqlite");
  const int kSteps = 6000;
  auto ch = std::make_shared<Channel>();
  Recorder rec(db, ch, RecorderOptions{.wait = std::chrono::milliseconds(20), .commitEvery = std::chrono::milliseconds(50)});
  ch->tryPush(storetest::makeStarted("watched", 4));
  auto id = rec.waitForRunId(std::chrono::seconds(5));
  ASSERT_TRUE(id);

  std::atomic<bool> done{false};
  std::atomic<int> reads{0};
  std::string readerError;
  size_t lastSeen = 0;
  bool monotonic = true;
  std::thread reader([&] {
    try {
      RunStore view = RunStore::open(db);  // its own connection, as the studio will have
      while (!done.load()) {
        auto curves = view.loadCurves(*id);
        monotonic &= curves.size() >= lastSeen;
        for (size_t i = 0; i < curves.size(); ++i) monotonic &= curves[i].step == int64_t(i + 1);
        lastSeen = curves.size();
        view.listRuns();
        view.loadRun(*id);
        ++reads;
      }
    } catch (const std::exception& e) {
      readerError = e.what();
    }
  });
  for (int i = 1; i <= kSteps; ++i) {
    ASSERT_TRUE(ch->tryPush(storetest::makeStep(i, 4)));
    if (i % 300 == 0) {
      ch->tryPush(DeviceSample{i * 0.001, 0, 0.9, 1e6});
      std::this_thread::sleep_for(std::chrono::milliseconds(15));
    }
  }
  ch->tryPush(RunFinished{});
  rec.stop();
  done = true;
  reader.join();
  EXPECT_EQ(readerError, "");
  EXPECT_EQ(rec.error(), "");
  EXPECT_TRUE(monotonic);
  EXPECT_GT(reads.load(), 3);
  RunStore store = RunStore::open(db);
  EXPECT_EQ(store.loadCurves(*id).size(), size_t(kSteps));
}

namespace {

struct Pushed {
  int64_t step;
  int64_t nanos;  // steady clock: the same clock in parent and child
};

// The child: records a run forever, one step per millisecond, telling the parent each step it
// has pushed. It never returns.
[[noreturn]] void recordForever(const std::string& db, int fd) {
  try {
    auto ch = std::make_shared<Channel>();
    Recorder rec(db, ch);  // production cadence: commit at least every 0.5 s
    ch->tryPush(storetest::makeStarted("killed", 4));
    for (int64_t step = 1;; ++step) {
      ch->tryPush(storetest::makeStep(step, 4, 1000));
      Pushed p{step, Clock::now().time_since_epoch().count()};
      if (write(fd, &p, sizeof p) != sizeof p) _exit(3);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  } catch (...) {
    _exit(2);
  }
}

}  // namespace

TEST(StoreCrash, SigkillKeepsTheFileIntactAndLosesAtMostASecond) {
  storetest::TempDir dir;
  const std::string db = dir.file("runs.sqlite");
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    recordForever(db, fds[1]);
  }
  close(fds[1]);
  std::vector<Pushed> pushed;
  auto readSome = [&] {
    Pushed p;
    while (read(fds[0], &p, sizeof p) == sizeof p) {
      pushed.push_back(p);
      if (Clock::now().time_since_epoch().count() - pushed.front().nanos > 1'500'000'000) return;
    }
  };
  readSome();  // about 1.5 s of recording after the first step
  ASSERT_FALSE(pushed.empty()) << "the child recorded nothing";
  ASSERT_EQ(kill(child, SIGKILL), 0);
  const int64_t killedAt = Clock::now().time_since_epoch().count();
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
  Pushed p;
  while (read(fds[0], &p, sizeof p) == sizeof p) pushed.push_back(p);
  close(fds[0]);

  // Every step pushed more than a second before the kill must be committed.
  int64_t mustHave = 0;
  for (const Pushed& x : pushed)
    if (x.nanos <= killedAt - 1'000'000'000) mustHave = x.step;
  ASSERT_GT(mustHave, 100) << "the child pushed too few steps";

  {
    sql::Db raw = sql::Db::open(db, SQLITE_OPEN_READONLY);
    EXPECT_EQ(raw.queryText("PRAGMA integrity_check"), "ok");
  }
  RunStore store = RunStore::open(db);
  auto runs = store.listRuns();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, "interrupted");
  auto curves = store.loadCurves(runs[0].id);
  ASSERT_FALSE(curves.empty());
  EXPECT_GE(curves.back().step, mustHave);
  EXPECT_LE(curves.back().step, pushed.back().step);
  EXPECT_EQ(curves.back().step, int64_t(curves.size()));  // no holes
  EXPECT_EQ(store.loadSteps(runs[0].id, curves.back().step, curves.back().step)[0].replicas.size(),
            4u);  // a step and its replica rows are committed together
  EXPECT_EQ(store.db().queryText("PRAGMA integrity_check"), "ok");
  std::cout << "pushed " << pushed.back().step << " steps, committed " << curves.back().step << ", required " << mustHave << "\n";
}

// A checkpoint waits in waitForStep until the store holds its step. The recorder commits at once
// for it instead of at its next due time: here a commit would otherwise come only after a minute.
TEST(StoreConcurrency, WaitForStepCommitsNowInsteadOfAtTheNextDueTime) {
  storetest::TempDir dir;
  const std::string db = dir.file("runs.sqlite");
  auto ch = std::make_shared<Channel>();
  Recorder rec(db, ch, RecorderOptions{.wait = std::chrono::seconds(60), .commitEvery = std::chrono::seconds(60)});
  ch->tryPush(storetest::makeStarted("checkpointed", 2));
  ASSERT_TRUE(rec.waitForRunId(std::chrono::seconds(5)));  // RunStarted is committed at once
  for (int64_t step = 1; step <= 40; ++step) ch->tryPush(storetest::makeStep(step, 2, 1000));
  EXPECT_TRUE(rec.waitForStep(40, std::chrono::seconds(20)));
  EXPECT_GE(rec.committedStep(), 40);
  // What it says is what another connection reads.
  EXPECT_EQ(RunStore::open(db).loadCurves(*rec.runId()).size(), 40u);
  EXPECT_TRUE(rec.waitForStep(10, std::chrono::milliseconds(1))) << "a step already committed returns at once";
  ch->close();
  rec.stop();
}
