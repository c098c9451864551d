// The team's workers spin briefly on a generation counter (a task is microseconds), then sleep
// in atomic::wait so that an idle replica leaves its cores to everyone else. The spin outlasts the
// serial stretches between a step's team runs (the loss, the bookkeeping between layers and between
// steps): 16,000 pauses, about 165 us on a 2026 Xeon (a pause there is ~10 ns). At 4,000 (41 us) the
// worker often slept and each wake cost a futex call and a reschedule; bench_step's
// devices:1/threads:2 forward ran 0.03-0.08 ms (2-5%) faster at 16,000, interleaved pairs.
#include "nn/ThreadTeam.h"

#include "tensor/Denormals.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ML_TEAM_RELAX() _mm_pause()
#else
#define ML_TEAM_RELAX() ((void)0)
#endif

namespace ml {

namespace {
thread_local ThreadTeam* tCurrent = nullptr;

template <typename T>
void waitWhileEqual(const std::atomic<T>& a, T old) {
  for (int i = 0; i < 16000; ++i) {
    if (a.load(std::memory_order_acquire) != old) return;
    ML_TEAM_RELAX();
  }
  while (a.load(std::memory_order_acquire) == old) a.wait(old, std::memory_order_acquire);
}
}  // namespace

ThreadTeam::ThreadTeam(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { work(i); });
}

ThreadTeam::~ThreadTeam() {
  quit_.store(true, std::memory_order_release);
  gen_.fetch_add(1, std::memory_order_release);
  gen_.notify_all();
  for (auto& w : workers_) w.join();
}

ThreadTeam* ThreadTeam::current() { return tCurrent; }

ThreadTeam::Scope::Scope(ThreadTeam* team) : previous(tCurrent) { tCurrent = team; }
ThreadTeam::Scope::~Scope() { tCurrent = previous; }

void ThreadTeam::work(int index) {
  const FlushDenormals flush;  // as the replica thread that leads the team
  uint32_t seen = 0;
  for (;;) {
    waitWhileEqual(gen_, seen);
    seen = gen_.load(std::memory_order_acquire);
    if (quit_.load(std::memory_order_acquire)) return;
    if (index < tasks_) (*task_)(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

void ThreadTeam::run(int tasks, const std::function<void(int)>& task) {
  if (tasks <= 1 || workers_.empty()) {
    for (int i = 0; i < tasks; ++i) task(i);
    return;
  }
  task_ = &task;
  tasks_ = tasks;
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  gen_.fetch_add(1, std::memory_order_release);  // publishes task_ and tasks_
  gen_.notify_all();
  ThreadTeam* outer = tCurrent;
  tCurrent = nullptr;  // a task runs serially inside
  task(0);
  tCurrent = outer;
  for (int left = pending_.load(std::memory_order_acquire); left > 0; left = pending_.load(std::memory_order_acquire))
    waitWhileEqual(pending_, left);
}

void ThreadTeam::split(int64_t count, const std::function<void(int64_t, int64_t)>& part) {
  const int n = size();
  run(n, [&](int i) {
    const int64_t lo = count * i / n, hi = count * (i + 1) / n;
    if (hi > lo) part(lo, hi);
  });
}

}  // namespace ml
