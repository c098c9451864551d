// The watchdog of a run: reads each replica's step counter and phase (published by the strategy)
// on its own thread, and names a hang — no replica progress for hangSeconds while a step is in
// flight — in plain words ("replica 2 (cpu:2) has not finished backward of step 412 for 60 s; the
// other 3 replicas are waiting in the all-reduce of bucket 5"). From the trainer's thread it reads
// each step's timings and names a straggler: a replica whose compute (input, forward, backward) was
// the slowest at all but one of the last stragglerWindow steps, longer than the others' by a median
// above both stragglerFactor x the replicas' (lower) median compute time and stragglerShare of the
// median step time. Every test is relative, so a small model's straggler is named as surely as a
// large one's (docs/LONG_RUNS.md).
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "distribute/MirroredStrategy.h"
#include "telemetry/Events.h"

namespace ml {

struct WatchdogOptions {
  double hangSeconds = 60;
  double firstStepFactor = 10;  // the first step (allocation, warm-up, a GPU's first kernels) gets this x longer
  double stragglerFactor = 1.0;
  int stragglerWindow = 16;  // steps whose median lateness is compared
  // The others must wait for it this share of a step at least: a replica late by a sliver of a
  // step costs little and is not named.
  double stragglerShare = 0.1;
};

class Watchdog {
 public:
  // onHang is called once, from the watchdog's thread, with the diagnosis.
  Watchdog(const MirroredStrategy& strategy, WatchdogOptions options, std::function<void(const std::string&)> onHang);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // After each step: a warning the first time a replica becomes a straggler (again after it recovered).
  std::optional<WatchdogWarning> afterStep(const StepEvent& step);
  // What the hang check would say now, were the stall long enough ("" when no step is in flight).
  std::string diagnose(double stalledFor) const;
  bool fired() const { return fired_.load(); }

 private:
  void loop();
  std::string label(int r) const;

  const MirroredStrategy& s_;
  WatchdogOptions o_;
  std::function<void(const std::string&)> onHang_;
  std::vector<std::deque<double>> late_;  // per replica, its lateness over the window
  std::deque<double> compute_;            // median replica compute time per step
  std::deque<double> stepTime_;           // the step's wall time
  std::vector<bool> flagged_;
  std::atomic<bool> fired_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ml
