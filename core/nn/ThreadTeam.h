// ThreadTeam: the threads of ONE replica that uses several cores. BLAS and oneDNN stay single-
// threaded and the layers split their own work across the team (rows of a product, columns of a
// gradient, the two products of Dense backward side by side), so that no second thread pool spins
// beside this one (OpenBLAS' pool and a team on the same cores oversubscribe). Each part runs the
// serial path's single-threaded kernel; a split product sums in another order than the whole one
// (to float rounding), and every split gives the same bits run after run.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace ml {

class ThreadTeam {
 public:
  // threads: the caller plus threads - 1 workers.
  explicit ThreadTeam(int threads);
  ~ThreadTeam();
  ThreadTeam(const ThreadTeam&) = delete;
  ThreadTeam& operator=(const ThreadTeam&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  // Calls task(0) .. task(tasks - 1), tasks <= size(), in parallel; returns when all are done.
  // Tasks are claimed: the caller and the workers each take the next unclaimed one, so a worker
  // that is asleep or descheduled (another program on the core) holds nothing up; the caller then
  // runs its tasks itself. A task's work depends on its index alone, never on the thread that
  // runs it, so the bits are the same either way. Not reentrant (a task must not call run()).
  void run(int tasks, const std::function<void(int)>& task);
  // Splits [0, count) into size() parts of sizes differing by at most one and calls part(lo, hi)
  // for each non-empty one in parallel.
  void split(int64_t count, const std::function<void(int64_t, int64_t)>& part);

  // The team of the replica running on this thread (nullptr: serial). Set by Scope.
  static ThreadTeam* current();
  struct Scope {
    explicit Scope(ThreadTeam* team);
    ~Scope();
    ThreadTeam* previous;
  };

 private:
  void work();
  // Claims and runs tasks of generation gen until none is left unclaimed.
  void claim(uint32_t gen);

  std::vector<std::thread> workers_;
  const std::function<void(int)>* task_ = nullptr;
  // The generation (high 32 bits), the number of tasks (bits 16-31) and the next unclaimed task
  // (low 16 bits) in one word, so that a claim is one compare-and-swap that fails for a worker
  // that woke after its generation ended.
  std::atomic<uint64_t> state_{0};
  std::atomic<int> done_{0};
  std::atomic<bool> quit_{false};
};

// Runs f over [0, count) on the current team, or serially when there is none.
inline void parallelSplit(int64_t count, const std::function<void(int64_t, int64_t)>& f) {
  if (ThreadTeam* t = ThreadTeam::current(); t && t->size() > 1 && count > 1)
    t->split(count, f);
  else
    f(0, count);
}

}  // namespace ml
