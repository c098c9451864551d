// NVML telemetry of a GPU run: utilization, memory and temperature of each physical GPU, read
// through the CUDA plugin on a thread of its own at a steady period, so that no training thread
// ever waits on the driver. One sample per physical GPU: logical GPUs (gpu:0x4) share one.
#pragma once
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend/CudaPlugin.h"
#include "telemetry/Events.h"

namespace ml {

class GpuSampler {
 public:
  // replicaGpus: the physical GPU of each local replica, in replica order; firstReplica: the global
  // index of local replica 0. Reads NVML once for each GPU: available() says whether it answers.
  GpuSampler(const CudaPlugin& plugin, const std::vector<int>& replicaGpus, int firstReplica);
  ~GpuSampler();
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;

  bool available() const { return why_.empty(); }
  // Why NVML cannot be read (the plugin's message, which names the call and the GPU); "" when it can.
  const std::string& unavailableReason() const { return why_; }
  // The start line: what is sampled, how often, and which replicas each GPU's sample stands for.
  std::string sentence(double period) const;

  // One sample of every GPU, stamped `wall`. A failure after a good start stops the sampling for the
  // rest of the run (failed() is then true and lostReason() says why) and returns none.
  std::vector<DeviceSample> read(double wall);
  bool failed() const { return failed_.load(); }
  std::string lostReason() const;

  // Calls tick() at once, then every `period` seconds on the sampler's thread, and once more in
  // stop(), so that even a run shorter than the period has a first and a last sample.
  void start(double period, std::function<void()> tick);
  // Idempotent; joins the thread, then (lastSample) calls tick() for the state the run ends in.
  void stop(bool lastSample = true);

 private:
  struct Gpu {
    int physical = 0;
    int firstReplica = 0;  // global index of the first replica on it
    int replicas = 0;
  };
  const CudaPlugin& plugin_;
  std::vector<Gpu> gpus_;
  std::string why_;
  std::atomic<bool> failed_{false};
  std::function<void()> tick_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string lostReason_;
  bool stop_ = false;
};

}  // namespace ml
