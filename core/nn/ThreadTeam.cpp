// The team's workers spin briefly on the team's state word (a task is microseconds), then sleep
// in atomic::wait so that an idle replica leaves its cores to everyone else. The spin outlasts the
// serial stretches between a step's team runs (the loss, the bookkeeping between layers and between
// steps): 16,000 pauses, about 165 us on a 2026 Xeon (a pause there is ~10 ns). At 4,000 (41 us) the
// worker often slept and each wake cost a futex call and a reschedule; bench_step's
// devices:1/threads:2 forward ran 0.03-0.08 ms (2-5%) faster at 16,000, interleaved pairs.
// While it spins a waiter yields its core every 256 pauses: alone on the machine that costs a
// system call every few microseconds, and with another program on the core (a build, a browser)
// that program runs instead of the spin, so the team slows in proportion to the cores it gets
// rather than fighting for them (bench_step's BM_SharedCores measures it).
#include "nn/ThreadTeam.h"

#include <sched.h>

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

// Waits while keep(a's value): spin (yielding every 256 pauses), then sleep in atomic::wait.
template <typename T, typename Keep>
void waitWhile(const std::atomic<T>& a, Keep keep) {
  for (int i = 1; i <= 16000; ++i) {
    if (!keep(a.load(std::memory_order_acquire))) return;
    ML_TEAM_RELAX();
    if (i % 256 == 0) sched_yield();
  }
  for (T v = a.load(std::memory_order_acquire); keep(v); v = a.load(std::memory_order_acquire))
    a.wait(v, std::memory_order_acquire);
}

constexpr uint32_t genOf(uint64_t s) { return static_cast<uint32_t>(s >> 32); }
constexpr int tasksOf(uint64_t s) { return static_cast<int>((s >> 16) & 0xffff); }
constexpr int nextOf(uint64_t s) { return static_cast<int>(s & 0xffff); }
}  // namespace

ThreadTeam::ThreadTeam(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
}

ThreadTeam::~ThreadTeam() {
  quit_.store(true, std::memory_order_release);
  state_.store(static_cast<uint64_t>(genOf(state_.load()) + 1) << 32, std::memory_order_release);
  state_.notify_all();
  for (auto& w : workers_) w.join();
}

ThreadTeam* ThreadTeam::current() { return tCurrent; }

ThreadTeam::Scope::Scope(ThreadTeam* team) : previous(tCurrent) { tCurrent = team; }
ThreadTeam::Scope::~Scope() { tCurrent = previous; }

void ThreadTeam::work() {
  const FlushDenormals flush;  // as the replica thread that leads the team
  uint32_t seen = 0;
  for (;;) {
    waitWhile(state_, [seen](uint64_t s) { return genOf(s) == seen; });
    seen = genOf(state_.load(std::memory_order_acquire));
    if (quit_.load(std::memory_order_acquire)) return;
    claim(seen);
  }
}

// A claim succeeds only while its generation runs, and a generation ends only when every task is
// done, so task_ stays valid from a successful claim to the end of its task.
void ThreadTeam::claim(uint32_t gen) {
  uint64_t s = state_.load(std::memory_order_acquire);
  while (genOf(s) == gen && nextOf(s) < tasksOf(s)) {
    if (!state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    const int tasks = tasksOf(s);
    (*task_)(nextOf(s));
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == tasks) done_.notify_one();
    s = state_.load(std::memory_order_acquire);
  }
}

void ThreadTeam::run(int tasks, const std::function<void(int)>& task) {
  if (tasks <= 1 || workers_.empty()) {
    for (int i = 0; i < tasks; ++i) task(i);
    return;
  }
  task_ = &task;
  done_.store(0, std::memory_order_relaxed);
  const uint32_t gen = genOf(state_.load(std::memory_order_relaxed)) + 1;
  // Publishes task_ and done_ with the new generation and its task count, nothing claimed yet.
  state_.store(static_cast<uint64_t>(gen) << 32 | static_cast<uint64_t>(tasks) << 16, std::memory_order_release);
  state_.notify_all();
  ThreadTeam* outer = tCurrent;
  tCurrent = nullptr;  // a task runs serially inside
  claim(gen);
  tCurrent = outer;
  waitWhile(done_, [tasks](int d) { return d < tasks; });
}

void ThreadTeam::split(int64_t count, const std::function<void(int64_t, int64_t)>& part) {
  const int n = size();
  run(n, [&](int i) {
    const int64_t lo = count * i / n, hi = count * (i + 1) / n;
    if (hi > lo) part(lo, hi);
  });
}

}  // namespace ml
