// MirroredStrategy: one model copy per device, each global batch split into shards (sizes differ
// by at most one), per-replica forward/backward producing gradient SUMS, a bucketed all-reduce
// that starts each bucket as soon as backward has produced it, then the same optimizer update on
// every replica. Written once for every device kind: the replicas' work goes through a Backend
// (backend/Backend.h: CPU or CUDA) and the buckets through a Collective (ring, reduce-to-one, NCCL,
// device memory). The single-device path is simply N = 1.
#pragma once
#include <atomic>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "backend/Backend.h"
#include "backend/Collective.h"
#include "backend/DeviceList.h"
#include "backend/SpinBarrier.h"
#include "data/Dataset.h"
#include "nn/Loss.h"
#include "nn/Optimizer.h"
#include "nn/Sequential.h"
#include "telemetry/Events.h"

namespace ml {

class HostReplicaSum;  // distribute/HostReplicaSum.h: BatchNormalization's cross-replica sums

// Who reduces the gradient buckets of host-memory collectives as backward completes them.
enum class BucketComm {
  Auto,     // threads when every replica can have a spare core for one, else inline
  Threads,  // a communication thread per replica, overlapping the rest of backward
  Inline,   // the replica's own thread, between layers
};

struct StrategyOptions {
  DeviceList devices = parseDevices("cpu:1");
  std::string allreduce = "ring";  // host collectives; GPUs use their own (see allReducePath)
  int64_t bucketBytes = 1 << 20;
  BucketComm bucketComm = BucketComm::Auto;
  int threadsPerDevice = 0;  // BLAS threads of a single simulated device; 0 = every core (several: 1 each)
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

// Micro-batch m of k over a step of `size` samples, then replica r's shard of it: [lo, hi) of the
// step's indices. The split the invariant rests on, written once.
struct Shard {
  int64_t lo = 0, hi = 0;
  int64_t rows() const { return hi - lo; }
};
Shard shardOf(int64_t size, int micro, int microBatches, int replica, int replicas);

class MirroredStrategy {
 public:
  MirroredStrategy(const ModelSpec& model, const Loss& loss, MetricKind metric, const OptimizerSpec& optimizer,
                   StrategyOptions options);
  ~MirroredStrategy();
  MirroredStrategy(const MirroredStrategy&) = delete;
  MirroredStrategy& operator=(const MirroredStrategy&) = delete;

  int replicas() const { return static_cast<int>(replicas_.size()); }
  // A device may hold the parameters: model(r) brings them to the host first. After changing a
  // model's parameters, call broadcastParameters() (it also sends them to the devices).
  Sequential& model(int r = 0) { backend_->pullParameters(); return *replicas_[static_cast<size_t>(r)]->model; }
  const Sequential& model(int r = 0) const { backend_->pullParameters(); return *replicas_[static_cast<size_t>(r)]->model; }
  const Loss& loss() const { return loss_; }
  MetricKind metric() const { return metric_; }
  const StrategyOptions& options() const { return options_; }
  const Backend& backend() const { return *backend_; }
  std::string allReduceName() const { return collective_->name(); }
  std::string allReducePath() const { return collective_->describe(); }  // which all-reduce runs, and why
  bool onGpu() const { return options_.devices.kind == DeviceKind::Gpu; }
  std::string deviceName(int r) const { return backend_->deviceName(r); }  // "NVIDIA H200"
  int blasThreads() const { return blasThreads_; }
  std::string threadPolicy() const;
  int bucketCount() const { return static_cast<int>(buckets_.size()); }
  bool bucketsOnCommThreads() const { return collective_->onCommThreads(); }
  bool bucketsInline() const { return collective_->inlineBuckets(); }

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
  std::vector<std::span<const float>> optimizerSlots(int r) const { return backend_->optimizerSlots(r); }

 private:
  struct Replica {
    int rank = 0;
    std::unique_ptr<Sequential> model;  // the host copy: shapes, and the parameters when pulled
    std::thread compute;
    // results of the last job
    double lossSum = 0, metricSum = 0;
    int64_t samples = 0;
    bool finite = true;
    std::string badWhat;
    PhaseTimes phases;
    double start = 0, backwardEnd = 0, commEnd = 0, inlineComm = 0;
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

  void makeBuckets();
  std::unique_ptr<Collective> makeCollective();
  void computeLoop(Replica& r);
  void runJob(const Job& job);
  void runOne(Replica& r, const Job& job);
  template <typename F>
  void guarded(Replica& r, F&& work);
  void trainReplica(Replica& r, const Job& job);
  void computeGradients(Replica& r, const Job& job);
  void applyUpdate(Replica& r, const Job& job);
  void collectStep(Replica& r, const Job& job);
  void evalReplica(Replica& r, const Job& job);
  int completeBuckets(size_t layerDone) const;  // buckets complete once this layer's backward is done
  double now() const;

  Loss loss_;
  MetricKind metric_;
  StrategyOptions options_;
  int blasThreads_ = 1;
  int spins_ = 2000;  // spinBudget() of the strategy's threads
  std::vector<std::unique_ptr<Replica>> replicas_;
  std::vector<GradBucket> buckets_;
  // What one update() call covers: each bucket when a scattering collective reduced them one by
  // one, else the whole buffer.
  std::vector<GradBucket> units_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Collective> collective_;
  FailureLatch failure_;
  std::unique_ptr<HostReplicaSum> replicaSum_;  // BatchNormalization's cross-replica sums
  bool crossReplica_ = false;                   // a layer needs them (every replica runs every micro-batch)

  Job job_;                          // written by the caller before jobGen_ is bumped
  std::atomic<uint64_t> jobGen_{0};
  std::atomic<int> pending_{0};      // replicas other than 0 still working on the job
  uint64_t seed_ = 0;  // keys dropout masks (with the step and the global sample index)
  const int64_t t0_;
};

// Part r of n of a range of size `size`: [lo, hi), sizes differ by at most one.
inline std::pair<int64_t, int64_t> shardRange(int64_t size, int r, int n) {
  return {size * r / n, size * (r + 1) / n};
}


}  // namespace ml
