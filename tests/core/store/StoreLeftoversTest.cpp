// What a killed process leaves and a read-only medium: temporary checkpoint files (.step-N.mlck.
// tmp-*) of runs that are not running are removed when the store is next opened (a resume, the
// next run), those of a running run are kept; a store that cannot be written opens for reading,
// lists and shows its runs and is left byte for byte as it was.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "Error.h"
#include "StoreTestUtil.h"
#include "store/RunStore.h"

namespace {

namespace fs = std::filesystem;

void touch(const fs::path& p) { storetest::writeBytes(p.string(), "x"); }

TEST(StoreLeftovers, TemporaryCheckpointFilesOfStoppedRunsAreRemovedAtOpen) {
  storetest::TempDir dir;
  const std::string path = dir.file("runs.sqlite");
  int64_t running = 0, stopped = 0;
  {
    ml::RunStore s = ml::RunStore::open(path);
    running = s.createRun(storetest::makeStarted("running"), {});  // this process: alive, running
    stopped = s.createRun(storetest::makeStarted("stopped"), {});
    s.finishRun(stopped, ml::RunStatus::Cancelled, "stopped");
  }
  for (int64_t id : {running, stopped}) {
    const fs::path folder = ml::checkpointFolder(path, id);
    fs::create_directories(folder);
    touch(folder / "step-00000004.mlck");
    touch(folder / ".step-00000008.mlck.tmp-4242-0");
    touch(folder / ".step-00000012.mlck.tmp-4242-1");
  }
  ml::RunStore s = ml::RunStore::open(path);  // the opening a resume or the next run makes
  const fs::path r = ml::checkpointFolder(path, running), st = ml::checkpointFolder(path, stopped);
  EXPECT_TRUE(fs::exists(r / ".step-00000008.mlck.tmp-4242-0")) << "a running run may be writing it now";
  EXPECT_TRUE(fs::exists(r / ".step-00000012.mlck.tmp-4242-1"));
  EXPECT_FALSE(fs::exists(st / ".step-00000008.mlck.tmp-4242-0"));
  EXPECT_FALSE(fs::exists(st / ".step-00000012.mlck.tmp-4242-1"));
  EXPECT_TRUE(fs::exists(st / "step-00000004.mlck")) << "checkpoints themselves are kept";
  EXPECT_TRUE(fs::exists(r / "step-00000004.mlck"));
  // Once the run stops, the next opening removes its leftovers too.
  s.finishRun(running, ml::RunStatus::Failed, "failed");
  EXPECT_EQ(s.removeStaleCheckpointTemps(), 2);
  EXPECT_FALSE(fs::exists(r / ".step-00000008.mlck.tmp-4242-0"));
}

TEST(StoreLeftovers, AReadOnlyStoreOpensForReadingAndIsNotChanged) {
  if (::geteuid() == 0)
    GTEST_SKIP() << "root writes through file permissions; cli.reliability checks a read-only mount (or runs as nobody)";
  storetest::TempDir dir;
  const fs::path folder = dir.path() / "ro";
  fs::create_directories(folder);
  const std::string path = (folder / "runs.sqlite").string();
  {
    ml::RunStore s = ml::RunStore::open(path);
    const int64_t id = s.createRun(storetest::makeStarted("kept"), {});
    s.finishRun(id, ml::RunStatus::Finished, "");
  }
  ::chmod(path.c_str(), 0444);
  ::chmod(folder.c_str(), 0555);
  const std::string before = storetest::readBytes(path);
  try {
    ml::RunStore::open(path);
    ADD_FAILURE() << "a read-only store opened for writing";
  } catch (const ml::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot be written"), std::string::npos) << e.what();
  }
  {
    ml::RunStore s = ml::RunStore::openForReading(path);
    const auto runs = s.listRuns();
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].name, "kept");
    EXPECT_EQ(s.loadRun(runs[0].id).summary.status, "finished");
    EXPECT_EQ(s.path(), path) << "messages name the file, not SQLite's URI";
  }
  EXPECT_EQ(storetest::readBytes(path), before);
  EXPECT_EQ(std::distance(fs::directory_iterator(folder), fs::directory_iterator()), 1) << "no -wal or -shm was created";
  ::chmod(folder.c_str(), 0755);
}

}  // namespace
