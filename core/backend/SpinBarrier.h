// A reusable barrier for the replica threads that spins briefly before sleeping. All-reduce
// steps are short (microseconds), so a futex sleep and wake per step would cost more than the
// work; when the wait is long (a slow replica, more replicas than cores) it yields, then sleeps.
#pragma once
#include <algorithm>
#include <atomic>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ML_CPU_RELAX() _mm_pause()
#else
#define ML_CPU_RELAX() ((void)0)
#endif

namespace ml {

// How long a waiting thread spins before it yields: spinning only pays when every waiting thread
// has a core of its own. With more threads than cores a spinning waiter steals the core from the
// very thread it waits for, so it gives the core up almost at once.
inline int spinBudget(int threads) {
  static const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return threads <= cores ? 2000 : 8;
}

// Waits while `a` equals `old`: spin, then yield, then block in atomic::wait.
template <typename T>
inline void spinWaitWhileEqual(const std::atomic<T>& a, T old, int spins = 2000) {
  for (int i = 0; i < spins; ++i) {
    if (a.load(std::memory_order_acquire) != old) return;
    ML_CPU_RELAX();
  }
  for (int i = 0; i < 16; ++i) {
    if (a.load(std::memory_order_acquire) != old) return;
    std::this_thread::yield();
  }
  while (a.load(std::memory_order_acquire) == old) a.wait(old, std::memory_order_acquire);
}

class SpinBarrier {
 public:
  explicit SpinBarrier(int participants) : n_(participants), spins_(spinBudget(participants)) {}

  void arriveAndWait() {
    const uint32_t gen = gen_.load(std::memory_order_acquire);
    if (count_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
      count_.store(0, std::memory_order_relaxed);  // published by the release store below
      gen_.store(gen + 1, std::memory_order_release);
      gen_.notify_all();
      return;
    }
    spinWaitWhileEqual(gen_, gen, spins_);
  }

 private:
  const int n_;
  const int spins_;
  std::atomic<int> count_{0};
  std::atomic<uint32_t> gen_{0};
};

}  // namespace ml
