// The watchdog: a hang check on its own thread (a few atomic loads every 50 ms at most, so its cost
// does not grow with the step rate) and a straggler check on each step's timings.
#include "train/Watchdog.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "distribute/Workers.h"

namespace ml {

// The lower median: of two replicas, the faster one's time is the typical one.
static double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t k = (v.size() - 1) / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return v[k];
}

static std::string seconds(double s) {
  char b[32];
  std::snprintf(b, sizeof b, s < 10 ? "%.1f s" : "%.0f s", s);
  return b;
}

Watchdog::Watchdog(const MirroredStrategy& strategy, WatchdogOptions options, std::function<void(const std::string&)> onHang)
    : s_(strategy), o_(options), onHang_(std::move(onHang)) {
  // Straggler checks cover every worker's replicas (each step's timings hold them all); the hang
  // check watches this process's replicas (a lost worker is named by the worker group's timeout).
  late_.resize(static_cast<size_t>(s_.globalReplicas()));
  flagged_.assign(static_cast<size_t>(s_.globalReplicas()), false);
  thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

// Local replica r by its number across every worker's replicas, as the run names it.
std::string Watchdog::label(int r) const {
  const int g = s_.worker() * s_.replicas() + r;
  return "replica " + std::to_string(g) + " (" + s_.replicaLabel(g) + ")";
}

// The replicas not in the all-reduce are the ones holding the others up; the waiting ones wait for
// the first bucket the slowest of them has not handed in yet.
std::string Watchdog::diagnose(double stalledFor) const {
  const int n = s_.replicas();
  std::vector<ReplicaProgress> p;
  for (int r = 0; r < n; ++r) p.push_back(s_.progress(r));
  std::vector<int> stuck, waiting;
  for (int r = 0; r < n; ++r) {
    if (p[static_cast<size_t>(r)].phase == StepPhase::Idle) continue;
    (p[static_cast<size_t>(r)].phase == StepPhase::AllReduce ? waiting : stuck).push_back(r);
  }
  if (stuck.empty() && waiting.empty()) return {};
  const double now = s_.now();
  std::string msg;
  int bucket = s_.bucketCount();
  if (stuck.empty()) {
    const auto& q = p[static_cast<size_t>(waiting.front())];
    if (const WorkerGroup* w = s_.workers())
      return "all " + std::to_string(waiting.size()) + " local replicas of " + workerOnHost(*w, w->rank()) +
             " have been in the all-reduce of step " + std::to_string(q.step) + " for " + seconds(stalledFor) +
             " waiting for the other workers, and the wait across workers did not end after --worker-timeout (" +
             seconds(w->timeoutSeconds()) + ")";
    return "all " + std::to_string(waiting.size()) + " replicas have been in the all-reduce of step " + std::to_string(q.step) +
           " for " + seconds(stalledFor) + " without progress";
  }
  for (size_t i = 0; i < stuck.size(); ++i) {
    const auto& q = p[static_cast<size_t>(stuck[i])];
    bucket = std::min(bucket, q.bucketsHanded + 1);
    msg += (i ? "; " : "") + label(stuck[i]) + " has not finished " + toString(q.phase) + " of step " + std::to_string(q.step) +
           " for " + seconds(std::max(stalledFor, now - q.phaseSince));
  }
  if (!waiting.empty()) {
    const bool all = static_cast<int>(waiting.size()) == n - static_cast<int>(stuck.size());
    msg += "; " + std::string(all ? "the other " : "") + std::to_string(waiting.size()) + " replica" +
           (waiting.size() == 1 ? " is" : "s are") + " waiting in the all-reduce of bucket " + std::to_string(bucket);
  }
  return msg;
}

void Watchdog::loop() {
  const double poll = std::clamp(o_.hangSeconds / 20, 0.005, 0.05);
  uint64_t lastKey = ~uint64_t{0};
  double lastChange = s_.now();
  std::unique_lock lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::duration<double>(poll), [&] { return stop_; });
    if (stop_ || fired_.load()) continue;
    // A fingerprint of every replica's progress: any step, phase or bucket change is progress.
    uint64_t key = 0;  // unsigned: the fingerprint wraps by design
    int64_t done = 0;
    bool busy = false;
    for (int r = 0; r < s_.replicas(); ++r) {
      const ReplicaProgress q = s_.progress(r);
      key = key * 1000003u + static_cast<uint64_t>(q.stepsDone) * 131u + static_cast<uint64_t>(q.phase) * 17u +
            static_cast<uint64_t>(q.bucketsHanded);
      busy |= q.phase != StepPhase::Idle;
      done = std::max(done, q.stepsDone);
    }
    const double now = s_.now();
    if (key != lastKey || !busy) {
      lastKey = key;
      lastChange = now;
      continue;
    }
    double limit = o_.hangSeconds * (done == 0 ? o_.firstStepFactor : 1.0);
    // This worker waits in a collective for the others: the worker group names the one that did not
    // come, with its host, after --worker-timeout; this watchdog speaks only if that wait hangs.
    if (const WorkerGroup* w = s_.workers(); w && w->waitingSeconds() > 0) limit = std::max(limit, w->timeoutSeconds() + 5.0);
    if (now - lastChange < limit) continue;
    fired_.store(true);
    const std::string why = diagnose(now - lastChange);
    lock.unlock();
    onHang_(why.empty() ? "no replica made progress for " + seconds(now - lastChange) : why);
    lock.lock();
  }
}

// Long: the windows' bookkeeping and the three tests read the same per-replica windows; most of
// the rest is the warning's one message.
std::optional<WatchdogWarning> Watchdog::afterStep(const StepEvent& ev) {
  const int n = static_cast<int>(ev.replicas.size());
  if (n < 2 || n > static_cast<int>(late_.size())) return std::nullopt;
  // A replica's lateness is how much longer its own compute (input, forward, backward) took than
  // the slowest other's: a slow device. When a replica's thread starts the step is the host's
  // scheduling (on a loaded machine a worker thread wakes milliseconds late), not its device's speed.
  std::vector<double> compute;
  for (const auto& r : ev.replicas) compute.push_back(r.phases.input + r.phases.forward + r.phases.backward);
  compute_.push_back(median(compute));
  if (static_cast<int>(compute_.size()) > o_.stragglerWindow) compute_.pop_front();
  stepTime_.push_back(ev.stepTime);
  if (static_cast<int>(stepTime_.size()) > o_.stragglerWindow) stepTime_.pop_front();
  for (int r = 0; r < n; ++r) {
    double others = -1e300;
    for (int k = 0; k < n; ++k)
      if (k != r) others = std::max(others, compute[static_cast<size_t>(k)]);
    auto& d = late_[static_cast<size_t>(r)];
    d.push_back(std::max(0.0, compute[static_cast<size_t>(r)] - others));
    if (static_cast<int>(d.size()) > o_.stragglerWindow) d.pop_front();
  }
  if (static_cast<int>(compute_.size()) < o_.stragglerWindow) return std::nullopt;
  const double typical = median({compute_.begin(), compute_.end()});
  const double step = median({stepTime_.begin(), stepTime_.end()});
  std::optional<WatchdogWarning> out;
  for (int r = 0; r < n; ++r) {
    const auto& d = late_[static_cast<size_t>(r)];
    const double late = median({d.begin(), d.end()});
    // Three relative tests: the slowest at all but one step of the window (jitter takes turns: a
    // given replica is slowest at 15 of 16 steps by chance once in 4,000 windows), later than
    // factor x a replica's compute, and by a share of the step that matters.
    const auto lastAt = std::count_if(d.begin(), d.end(), [](double x) { return x > 0; });
    const bool straggling =
        lastAt + 1 >= static_cast<long>(d.size()) && late > o_.stragglerFactor * typical && late > o_.stragglerShare * step;
    if (straggling && !flagged_[static_cast<size_t>(r)] && !out) {
      flagged_[static_cast<size_t>(r)] = true;
      const auto& ph = ev.replicas[static_cast<size_t>(r)].phases;
      WatchdogWarning w;
      w.replica = r;
      w.device = s_.replicaLabel(r);
      w.phase = ph.backward >= ph.forward ? "backward" : "forward";
      w.step = ev.step;
      w.lateSeconds = late;
      w.typicalSeconds = typical;
      w.wallTime = ev.wallTime;
      char b[512];
      std::snprintf(
          b, sizeof b,
          "replica %d (%s) is a straggler: its compute takes %.1f ms longer than the others' (median of the last %d steps), "
          "%.1fx a replica's typical compute time of %.1f ms; the extra time is spent in %s, and every other replica waits for "
          "it (%.0f%% of a step)",
          r, w.device.c_str(), late * 1e3, o_.stragglerWindow, typical > 0 ? late / typical : 0.0, typical * 1e3, w.phase.c_str(),
          step > 0 ? 100.0 * std::min(1.0, late / step) : 0.0);
      w.message = b;
      const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
      if (s_.options().devices.kind == DeviceKind::Cpu && s_.replicas() > cores)
        w.message += " (" + std::to_string(s_.replicas()) + " simulated devices share " + std::to_string(cores) +
                     " cores here: the scheduler alone can hold a replica back)";
      out = w;
    }
    if (!straggling && late < 0.5 * o_.stragglerFactor * typical) flagged_[static_cast<size_t>(r)] = false;
  }
  return out;
}

}  // namespace ml
