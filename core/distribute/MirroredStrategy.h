// MirroredStrategy: one model copy per device, each global batch split into shards (sizes differ
// by at most one), per-replica forward/backward producing gradient SUMS, a bucketed all-reduce
// that starts each bucket as soon as backward has produced it (a communication thread per replica,
// so it overlaps the rest of backward), then the same optimizer update on every replica.
// The single-device path is simply N = 1.
#pragma once
#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "data/Dataset.h"
#include "distribute/AllReduce.h"
#include "distribute/DeviceList.h"
#include "distribute/SpinBarrier.h"
#include "nn/Loss.h"
#include "nn/Optimizer.h"
#include "nn/Sequential.h"
#include "tensor/Finite.h"
#include "telemetry/Events.h"

namespace ml {

class GpuReplicas;

// Who reduces the gradient buckets as backward completes them (with more than one bucket).
enum class BucketComm {
  Auto,     // threads when every replica can have a spare core for one, else inline
  Threads,  // a communication thread per replica, overlapping the rest of backward
  Inline,   // the replica's own thread, between layers
};

struct StrategyOptions {
  DeviceList devices = parseDevices("cpu:1");
  std::string allreduce = "ring";
  int64_t bucketBytes = 1 << 20;
  BucketComm bucketComm = BucketComm::Auto;
  int threadsPerDevice = 0;  // BLAS threads for each simulated device; 0 = its share of the cores
};

struct StepResult {
  double lossSum = 0, metricSum = 0;
  int64_t samples = 0;
  std::vector<ReplicaStep> replicas;
  bool finite = true;
  int badReplica = -1;        // first replica with a non-finite loss or gradient
  std::string badWhat;        // "loss" or "gradient"
};

struct EvalResult {
  double lossSum = 0, metricSum = 0;
  int64_t samples = 0;
};

class MirroredStrategy {
 public:
  MirroredStrategy(const ModelSpec& model, const Loss& loss, MetricKind metric, const OptimizerSpec& optimizer,
                   StrategyOptions options);
  ~MirroredStrategy();
  MirroredStrategy(const MirroredStrategy&) = delete;
  MirroredStrategy& operator=(const MirroredStrategy&) = delete;

  int replicas() const { return static_cast<int>(replicas_.size()); }
  // On GPUs the device holds the parameters: model(r) brings them to the host first. After
  // changing a model's parameters, call broadcastParameters() (it also sends them to the GPUs).
  Sequential& model(int r = 0) { syncFromGpu(); return *replicas_[static_cast<size_t>(r)]->model; }
  const Sequential& model(int r = 0) const { syncFromGpu(); return *replicas_[static_cast<size_t>(r)]->model; }
  const Loss& loss() const { return loss_; }
  MetricKind metric() const { return metric_; }
  const StrategyOptions& options() const { return options_; }
  std::string allReduceName() const { return gpu_ ? gpuAllReduceName() : allreduce_ ? allreduce_->name() : "none (one replica)"; }
  // GPU devices (DeviceKind::Gpu): the replicas run through the CUDA plugin (GpuReplicas).
  bool onGpu() const { return gpu_ != nullptr; }
  std::string gpuAllReducePath() const;  // which all-reduce runs on the GPUs, and why
  std::string gpuName(int r) const;      // "NVIDIA H200"
  int blasThreads() const { return blasThreads_; }
  std::string threadPolicy() const;
  int bucketCount() const { return static_cast<int>(buckets_.size()); }
  bool bucketsOnCommThreads() const { return commThreads_; }
  bool bucketsInline() const { return inlineBuckets_; }

  // Same seed on every replica: identical initial weights.
  void initialize(uint64_t seed);
  // Copies replica 0's parameters to every replica (after loading weights into model(0)).
  void broadcastParameters();

  // One optimizer update over `indices` (the samples of this update, in order) as `accumulate`
  // micro-batches, each split across the replicas. lr is the rate to apply; step keys randomness.
  StepResult trainStep(const Dataset& data, std::span<const int64_t> indices, int accumulate, float lr, uint64_t step);
  // Forward only, split across replicas; outputs (n, k) in the order of indices when not null.
  EvalResult evaluate(const Dataset& data, std::span<const int64_t> indices, float* outputs = nullptr);

  std::vector<uint64_t> checksums() const;
  std::vector<std::span<const float>> optimizerSlots(int r) const {
    return gpu_ ? gpuOptimizerSlots(r) : replicas_[static_cast<size_t>(r)]->opt->stateBuffers();
  }

 private:
  struct Bucket {
    int64_t offset, count;
    size_t readyAfterLayer;  // the bucket is complete once this layer's backward is done
  };
  struct Replica {
    int rank = 0;
    std::unique_ptr<Sequential> model;
    std::unique_ptr<Optimizer> opt;
    std::vector<float> x, y;          // gathered shard inputs and targets
    std::vector<int64_t> ids;         // global sample ids of the shard rows
    std::thread compute, comm;
    std::atomic<int> ready{0};        // buckets whose gradients are complete
    std::atomic<int> reduced{0};      // buckets all-reduced
    std::atomic<uint64_t> commGen{0}; // a new step for the comm thread
    // results of the last job
    double lossSum = 0, metricSum = 0;
    int64_t samples = 0;
    bool finite = true;
    std::string badWhat;
    PhaseTimes phases;
    double start = 0, backwardEnd = 0, commEnd = 0;
    double inlineComm = 0;            // seconds of collectives run between layers' backward
    int inlineDone = 0;               // buckets reduced between layers this step
  };
  enum class JobKind { None, Train, Eval, Quit };
  struct Job {
    JobKind kind = JobKind::None;
    const Dataset* data = nullptr;
    std::span<const int64_t> indices;
    int accumulate = 1;
    float lr = 0;
    float gradScale = 1;
    uint64_t step = 0;
    float* outputs = nullptr;
  };

  void computeLoop(Replica& r);
  void commLoop(Replica& r);
  void runJob(const Job& job);
  void runOne(Replica& r, const Job& job);
  void trainReplica(Replica& r, const Job& job);
  void evalReplica(Replica& r, const Job& job);
  void gather(Replica& r, const Dataset& data, std::span<const int64_t> idx);
  int completeBuckets(size_t layerDone) const;  // buckets complete once this layer's backward is done
  void markReady(Replica& r, size_t layerDone);
  double now() const;
  // The GPU path (MirroredStrategyGpu.cpp); gpu_ is null for CPU devices.
  void startGpu(const OptimizerSpec& optimizer);
  void runOneOnGpu(Replica& r, const Job& job);
  void finishGpuJob();
  void syncFromGpu() const;
  std::string gpuAllReduceName() const;
  std::vector<std::span<const float>> gpuOptimizerSlots(int r) const;

  Loss loss_;
  MetricKind metric_;
  StrategyOptions options_;
  int blasThreads_ = 1;
  int spins_ = 2000;  // spinBudget() of the strategy's threads
  // Ring: the compute threads stop after reduce-scatter and each optimizer reads every reduced
  // chunk from the replica that owns it (no all-gather copy); the units are what was reduced.
  bool readFromOwners_ = false;
  // Several buckets: with a spare core per replica, a comm thread reduces each bucket while backward
  // goes on; without one (replicas x 2 > cores) a comm thread could only preempt a compute thread,
  // so the compute thread reduces each bucket itself between layers, as soon as it is complete.
  bool commThreads_ = false, inlineBuckets_ = false;
  std::vector<Bucket> units_;
  std::vector<std::unique_ptr<Replica>> replicas_;
  std::vector<Bucket> buckets_;
  std::unique_ptr<AllReduce> allreduce_;

  Job job_;                          // written by the caller before jobGen_ is bumped
  std::atomic<uint64_t> jobGen_{0};
  std::atomic<int> pending_{0};      // replicas other than 0 still working on the job
  uint64_t seed_ = 0;  // keys dropout masks (with the step and the global sample index)
  const int64_t t0_;
  std::unique_ptr<GpuReplicas> gpu_;
};

// Shard r of n over a range of size `size`: [lo, hi), sizes differ by at most one.
inline std::pair<int64_t, int64_t> shardRange(int64_t size, int r, int n) {
  return {size * r / n, size * (r + 1) / n};
}


}  // namespace ml
