// The CUDA plugin's NCCL communicator lock (backend/cuda/OwnedMutex.h), which runs everywhere: a
// second lock or try_lock by the thread that holds it throws, naming the lock, where a std::mutex
// would be undefined behaviour. That is the mistake an all-reduce made when it grew its bfloat16
// scratch under the communicator's lock: the growth waits on a stream, and that wait tries the same
// lock (Gpu.NcclBfloat16OnOneRankGrowsItsScratchOutsideTheLock drives that path on a GPU).
#include <gtest/gtest.h>

#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "backend/cuda/OwnedMutex.h"

namespace {

using mlcuda::OwnedMutex;

// What a wait of a linked context does with the communicator's lock (Wait.cpp: watched()).
bool waitTriesTheLock(OwnedMutex& m) {
  const std::unique_lock<OwnedMutex> lock(m, std::try_to_lock);
  return lock.owns_lock();
}

TEST(OwnedMutex, ATryLockByTheHolderThrowsAndNamesTheLock) {
  OwnedMutex m("the test's lock");
  const std::lock_guard<OwnedMutex> held(m);
  EXPECT_TRUE(m.heldByThisThread());
  try {
    waitTriesTheLock(m);
    FAIL() << "a try_lock by the holder returned";
  } catch (const std::logic_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("try_lock of the test's lock by the thread that holds it"), std::string::npos) << what;
  }
  EXPECT_THROW(m.lock(), std::logic_error);
  EXPECT_TRUE(m.heldByThisThread()) << "the refused calls must leave the lock held";
}

TEST(OwnedMutex, AnotherThreadFindsItBusyThenFree) {
  OwnedMutex m("the test's lock");
  bool busy = true, afterUnlock = false;
  m.lock();
  std::thread([&] { busy = !waitTriesTheLock(m); }).join();
  m.unlock();
  EXPECT_FALSE(m.heldByThisThread());
  std::thread([&] {
    afterUnlock = waitTriesTheLock(m);
    EXPECT_FALSE(m.heldByThisThread()) << "released by the unique_lock";
  }).join();
  EXPECT_TRUE(busy) << "a try_lock by another thread while held must fail, not throw";
  EXPECT_TRUE(afterUnlock);
  // Free again: this thread takes it normally.
  EXPECT_TRUE(waitTriesTheLock(m));
}

}  // namespace
