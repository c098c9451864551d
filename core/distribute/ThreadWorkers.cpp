#include "distribute/ThreadWorkers.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>

namespace ml {

namespace {

// Shared by the W workers: one collective at a time, arrivals counted per generation.
struct Hub {
  int n;
  double timeout;
  std::string host;
  std::mutex mu;
  std::condition_variable cv;
  uint64_t generation = 0;
  int arrived = 0;
  int leaving = 0;                 // workers still reading the last call's result
  std::vector<const void*> slots;  // each worker's buffer this call
  std::vector<char> arrivedMask;
  std::vector<double> sumD;
  std::vector<float> sumF;
  std::vector<std::string> strings;
  std::vector<std::string> progress;
  std::string interrupted;
  Hub(int w, double t, std::string h)
      : n(w),
        timeout(t),
        host(std::move(h)),
        slots(static_cast<size_t>(w)),
        arrivedMask(static_cast<size_t>(w)),
        strings(static_cast<size_t>(w)),
        progress(static_cast<size_t>(w)) {}
};

class ThreadWorker : public WorkerGroup {
 public:
  ThreadWorker(std::shared_ptr<Hub> hub, int rank) : hub_(std::move(hub)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return hub_->n; }
  std::string host() const override { return hub_->host; }
  std::vector<std::string> hosts() const override { return std::vector<std::string>(static_cast<size_t>(hub_->n), hub_->host); }
  std::string engine() const override { return "threads (in-process test workers)"; }
  double timeoutSeconds() const override { return hub_->timeout; }

  void allReduce(std::span<float> data, const std::string& what) override {
    collective(data.data(), what, [&](Hub& h) {
      h.sumF.assign(data.size(), 0.0f);
      for (int r = 0; r < h.n; ++r) {
        const float* src = static_cast<const float*>(h.slots[static_cast<size_t>(r)]);
        for (size_t i = 0; i < data.size(); ++i) h.sumF[i] = r == 0 ? src[i] : h.sumF[i] + src[i];
      }
    });
    std::memcpy(data.data(), hub_->sumF.data(), data.size() * sizeof(float));
    leave();
  }
  void allReduce(std::span<double> data, const std::string& what) override {
    collective(data.data(), what, [&](Hub& h) {
      h.sumD.assign(data.size(), 0.0);
      for (int r = 0; r < h.n; ++r) {
        const double* src = static_cast<const double*>(h.slots[static_cast<size_t>(r)]);
        for (size_t i = 0; i < data.size(); ++i) h.sumD[i] = r == 0 ? src[i] : h.sumD[i] + src[i];
      }
    });
    std::memcpy(data.data(), hub_->sumD.data(), data.size() * sizeof(double));
    leave();
  }
  void broadcast(std::span<float> data, int root, const std::string& what) override {
    collective(data.data(), what, [&](Hub& h) {
      const float* src = static_cast<const float*>(h.slots[static_cast<size_t>(root)]);
      h.sumF.assign(src, src + data.size());
    });
    std::memcpy(data.data(), hub_->sumF.data(), data.size() * sizeof(float));
    leave();
  }
  std::vector<std::string> allGather(const std::string& mine, const std::string& what) override {
    std::vector<std::string> out;
    collective(&mine, what, [&](Hub& h) {
      for (int r = 0; r < h.n; ++r)
        h.strings[static_cast<size_t>(r)] = *static_cast<const std::string*>(h.slots[static_cast<size_t>(r)]);
    });
    out = hub_->strings;
    leave();
    return out;
  }
  void setProgress(int64_t step, const char* phase) override {
    std::lock_guard lock(hub_->mu);
    hub_->progress[static_cast<size_t>(rank_)] = std::string(phase) + " of step " + std::to_string(step);
  }
  void interrupt(const std::string& reason) override {
    std::lock_guard lock(hub_->mu);
    if (hub_->interrupted.empty()) hub_->interrupted = reason;
    hub_->cv.notify_all();
  }

 private:
  // Arrive; the last arrival combines (under the lock) and releases everybody. The result stays
  // readable until everybody has left (leave()), so the next call cannot overwrite it.
  template <typename Combine>
  void collective(const void* mine, const std::string& what, Combine&& combine) {
    Hub& h = *hub_;
    std::unique_lock lock(h.mu);
    // Wait until the previous call's readers have all left.
    waitOrThrow(lock, what, [&] { return h.leaving == 0; });
    h.slots[static_cast<size_t>(rank_)] = mine;
    h.arrivedMask[static_cast<size_t>(rank_)] = 1;
    const uint64_t gen = h.generation;
    if (++h.arrived == h.n) {
      combine(h);
      h.arrived = 0;
      std::fill(h.arrivedMask.begin(), h.arrivedMask.end(), 0);
      h.leaving = h.n;
      ++h.generation;
      h.cv.notify_all();
    } else {
      waitOrThrow(lock, what, [&] { return h.generation != gen; });
    }
    lock.release();  // leave() unlocks
  }
  void leave() {
    Hub& h = *hub_;
    std::unique_lock lock(h.mu, std::adopt_lock);
    if (--h.leaving == 0) h.cv.notify_all();
  }
  template <typename Pred>
  void waitOrThrow(std::unique_lock<std::mutex>& lock, const std::string& what, Pred done) {
    Hub& h = *hub_;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(h.timeout);
    while (!done()) {
      if (!h.interrupted.empty()) fail(lock, h.interrupted);
      if (h.cv.wait_until(lock, deadline) == std::cv_status::timeout && !done()) {
        std::string missing;
        for (int r = 0; r < h.n; ++r)
          if (!h.arrivedMask[static_cast<size_t>(r)] && r != rank_) {
            missing = workerName(r, h.n);
            if (!h.progress[static_cast<size_t>(r)].empty())
              missing += " (last seen in " + h.progress[static_cast<size_t>(r)] + ")";
            break;
          }
        fail(lock, (missing.empty() ? std::string("a worker") : missing) + " did not reach " + what + " within " +
                       std::to_string(static_cast<int>(h.timeout)) + " s: it hangs or is gone");
      }
    }
  }
  [[noreturn]] void fail(std::unique_lock<std::mutex>& lock, const std::string& why) {
    // Nobody else can complete this call any more: wake them so they fail too.
    if (hub_->interrupted.empty()) hub_->interrupted = why;
    hub_->cv.notify_all();
    lock.unlock();
    throw WorkerLost(why);
  }

  std::shared_ptr<Hub> hub_;
  int rank_;
};

}  // namespace

std::vector<std::unique_ptr<WorkerGroup>> makeThreadWorkers(int workers, double timeoutSeconds, const std::string& host) {
  auto hub = std::make_shared<Hub>(workers, timeoutSeconds, host);
  std::vector<std::unique_ptr<WorkerGroup>> out;
  for (int r = 0; r < workers; ++r) out.push_back(std::make_unique<ThreadWorker>(hub, r));
  return out;
}

}  // namespace ml
