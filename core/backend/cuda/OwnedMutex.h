// A mutex that knows which thread holds it, for a lock that a thread must never take twice. A
// second lock or try_lock of a std::mutex by the thread that holds it is undefined behaviour (glibc
// answers "busy" or deadlocks, so such a bug works by accident); this one throws instead, naming the
// lock, and the plugin's entry points turn that into a failed call. No CUDA: the host tests use it.
#pragma once
#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

namespace mlcuda {

class OwnedMutex {
 public:
  explicit OwnedMutex(const char* name) : name_(name) {}
  OwnedMutex(const OwnedMutex&) = delete;
  OwnedMutex& operator=(const OwnedMutex&) = delete;

  void lock() {
    refuseOwner("lock");
    m_.lock();
    owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  }
  bool try_lock() {
    refuseOwner("try_lock");
    if (!m_.try_lock()) return false;
    owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    return true;
  }
  void unlock() {
    owner_.store(std::thread::id(), std::memory_order_relaxed);
    m_.unlock();
  }
  // Relaxed is enough: a thread reads its own id back only while it holds the lock (its own stores
  // are ordered for it); any other thread reads some other id.
  bool heldByThisThread() const { return owner_.load(std::memory_order_relaxed) == std::this_thread::get_id(); }

 private:
  void refuseOwner(const char* call) const {
    if (heldByThisThread())
      throw std::logic_error(std::string(call) + " of " + name_ +
                             " by the thread that holds it (a call made under the lock reached code that takes it again)");
  }

  std::mutex m_;
  std::atomic<std::thread::id> owner_{};
  const char* name_;
};

}  // namespace mlcuda
