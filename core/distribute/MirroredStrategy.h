// MirroredStrategy: one model copy per device, each global batch split into shards (sizes differ
// by at most one), per-replica forward/backward producing gradient SUMS, a bucketed all-reduce
// that starts each bucket as soon as backward has produced it, then the same optimizer update on
// every replica. Written once for every device kind: the replicas' work goes through a backend's
// narrow interfaces (backend/Backend.h: CPU or CUDA) and the buckets through a Collective (ring,
// reduce-to-one, hierarchical, NCCL, device memory), the first one of an ordered list that is
// enabled for the run (StepPlan.cpp). How every step runs is decided once, when the strategy is
// built (its Plan), from the options, the backend's capabilities and the collective's traits.
// The single-device path is simply N = 1.
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
#include "distribute/AllReduce.h"
#include "distribute/Faults.h"
#include "distribute/LossScale.h"
#include "nn/Loss.h"
#include "nn/Optimizer.h"
#include "nn/Precision.h"
#include "nn/Sequential.h"
#include "telemetry/Events.h"

namespace ml {

class HostReplicaSum;         // distribute/HostReplicaSum.h: BatchNormalization's cross-replica sums
class HierarchicalAllReduce;  // distribute/CrossWorker.h: the all-reduce of several workers
class FusedExchange;          // distribute/FusedExchange.h: the sharded update fused with the ring
class WorkerGroup;            // distribute/Workers.h

// Who reduces the gradient buckets of host-memory collectives as backward completes them.
enum class BucketComm {
  Auto,     // threads when every replica can have a spare core for one, else inline
  Threads,  // a communication thread per replica, overlapping the rest of backward
  Inline,   // the replica's own thread, between layers
};

struct StrategyOptions {
  DeviceList devices = parseDevices("cpu:1");
  // Host collectives; GPUs use their own, several workers the hierarchical one (see StepPlan.cpp).
  AllReduceAlgo allreduce = AllReduceAlgo::Ring;
  int64_t bucketBytes = 1 << 20;
  BucketComm bucketComm = BucketComm::Auto;
  int threadsPerDevice = 0;  // BLAS threads of a single simulated device; 0 = every core (several: 1 each)
  // ZeRO stage 1: each replica updates only the chunks of the summed gradient it owns and keeps
  // optimizer state for those alone; the updated parameters are then all-gathered.
  bool shardOptimizer = false;
  // Sharded, over host memory with the ring in float32 and no spare core for communication
  // threads: each owner sums its chunk, updates it and writes the new parameters into the other
  // replicas tile by tile (FusedExchange.h), with the ring's bits. Off: the ring's
  // reduce-scatter, the update and the all-gather one after the other (tests compare the two).
  bool fuseShardedExchange = true;
  // GPUs: cuBLAS may run float32 products on TF32 tensor cores (10-bit mantissa inputs, float32
  // sums: faster, results change), TensorFlow's default on Ampere and later. Off: float32 exactly.
  bool tf32 = false;
  // The format of the gradients between replicas (AllReduce.h): bfloat16 halves the bytes of the
  // all-reduce and changes the results; with one replica nothing is sent, so nothing changes.
  AllReduceDtype allreduceDtype = AllReduceDtype::Float32;
  // Mixed precision (nn/Precision.h): the layers' compute format; weights, optimizer and the
  // all-reduce stay float32 under every policy (allreduceDtype above is its own setting). Loss scaling is decided on the
  // all-reduced gradients, so every replica skips the same steps and keeps the same scale.
  Precision precision = Precision::Float32;
  LossScaling lossScaling;
  // Several workers (processes, e.g. launched by mpirun): this process holds `devices` as its
  // local replicas, worker k's replica r is global replica k*N + r, every batch is split across
  // all of them and the all-reduce is hierarchical (CrossWorker.h). Not owned; null: one process.
  WorkerGroup* workers = nullptr;
};

// Where a replica is in its step, published by the replica's own thread (relaxed atomics: one
// store per phase change) and read by the watchdog.
enum class StepPhase : int { Idle, Forward, Backward, AllReduce, Optimizer };
const char* toString(StepPhase p);  // "forward", "backward", "the all-reduce", ...

struct ReplicaProgress {
  int64_t stepsDone = 0;  // optimizer steps this replica has completed
  int64_t step = 0;       // the step it is working on (stepsDone + 1 while busy)
  StepPhase phase = StepPhase::Idle;
  int bucketsHanded = 0;  // gradient buckets of this step handed to the all-reduce
  double phaseSince = 0;  // strategy clock (seconds) when it entered the phase
};

struct StepResult {
  double lossSum = 0, metricSum = 0;
  int64_t samples = 0;
  std::vector<ReplicaStep> replicas;
  bool finite = true;
  int badReplica = -1;  // first replica with a non-finite loss or gradient
  std::string badWhat;  // "loss" or "gradient"
  // Loss scaling: the scale this step used (0 without loss scaling) and whether its summed
  // gradients held an inf/NaN, so that no replica updated and the scale was halved.
  double lossScale = 0;
  bool skipped = false;
  // Several workers: how many asked to stop (requestStop) before this step's exchange; every
  // worker sees the same count after the same step, so all of them stop together.
  int stopVotes = 0;
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

// The gradient buckets of a model: from the last layer's parameters towards the first, cut at
// bucketBytes; a bucket is complete once the lowest layer it touches has finished backward.
std::vector<GradBucket> gradientBuckets(const std::vector<Sequential::ParamRange>& ranges, int64_t bucketBytes);
// What one collective call covers for n replicas: each bucket when there are several, else the whole buffer.
std::vector<GradBucket> updateUnits(const std::vector<GradBucket>& buckets, int64_t paramCount, int replicas);
// A range of the flat buffer, and the replica whose buffer holds what is read there.
struct SourceRange {
  int64_t offset = 0, count = 0;
  int from = 0;
};
// Every chunk of every unit, in order, with its owner: the replica the ring's reduce-scatter leaves
// its sum with (AllReduce::chunkOwner).
std::vector<SourceRange> unitChunks(const std::vector<GradBucket>& units, int replicas);
// Replica r's share under the sharded update: the chunks it owns.
std::vector<GradBucket> ownedRanges(const std::vector<GradBucket>& units, int replica, int replicas);

// The collectives a run can use, in the order they are tried: the first one enabled for the run
// reduces its gradients, as Horovod's operation manager picks its all-reduce (StepPlan.cpp).
enum class CollectiveKind {
  DeviceAcrossWorkers,  // the backend's own, over every worker's devices (NCCL bootstrapped through MPI)
  Hierarchical,         // host memory across workers: the local sum, the MPI hop, the local copy
  None,                 // one replica: nothing to reduce
  Device,               // the backend's own in this process (NCCL, the logical-GPU all-reduce)
  Host,                 // the project's algorithm over host memory (ring, reduce-to-one)
};
struct CollectiveCase {
  int workers = 1, replicas = 1;  // W processes of N local replicas each
  bool deviceGradients = false;   // the gradients live in device memory (BackendCaps::collectives)
};
struct CollectiveEntry {
  CollectiveKind kind;
  const char* name;
  bool (*enabled)(const CollectiveCase&);
};
std::span<const CollectiveEntry> collectiveOrder();
CollectiveKind chooseCollective(const CollectiveCase& c);
// Parameters whose optimizer state replica r keeps with these options: all of them, or its share
// when the update is sharded. The figure the model summary shows, computed as the strategy allocates.
int64_t optimizerShare(const Sequential& model, const StrategyOptions& options, int replica);

class MirroredStrategy {
 public:
  MirroredStrategy(const ModelSpec& model, const Loss& loss, MetricKind metric, const OptimizerSpec& optimizer,
                   StrategyOptions options);
  ~MirroredStrategy();
  MirroredStrategy(const MirroredStrategy&) = delete;
  MirroredStrategy& operator=(const MirroredStrategy&) = delete;

  int replicas() const { return static_cast<int>(replicas_.size()); }  // this process's (local) replicas
  // Several workers: every worker's replicas (replicas() * workers); the index of local replica r.
  int globalReplicas() const { return replicas() * workerCount_; }
  int globalIndex(int r) const { return worker_ * replicas() + r; }
  int workerCount() const { return workerCount_; }
  int worker() const { return worker_; }
  WorkerGroup* workers() const { return workers_; }
  // Global replica g by name: "cpu:1", or with several workers "host/worker2/cpu:1".
  std::string replicaLabel(int g) const;
  // Several workers: this worker votes to stop after the step in progress (see StepResult::stopVotes).
  void requestStop() { stopVote_.store(true, std::memory_order_relaxed); }
  // A device may hold the parameters: model(r) brings them to the host first. After changing a
  // model's parameters, call broadcastParameters() (it also sends them to the devices).
  Sequential& model(int r = 0) {
    params_->pullParameters();
    return *replicas_[static_cast<size_t>(r)]->model;
  }
  const Sequential& model(int r = 0) const {
    params_->pullParameters();
    return *replicas_[static_cast<size_t>(r)]->model;
  }
  const Loss& loss() const { return loss_; }
  MetricKind metric() const { return metric_; }
  const StrategyOptions& options() const { return options_; }
  std::string allReduceName() const { return collective_->name(); }
  std::string allReducePath() const { return collective_->describe(); }  // which all-reduce runs, and why
  bool onGpu() const { return options_.devices.kind == DeviceKind::Gpu; }
  std::string deviceName(int r) const { return caps_.deviceNames[static_cast<size_t>(r)]; }  // "NVIDIA H200"
  int blasThreads() const { return blasThreads_; }
  std::string threadPolicy() const;
  int bucketCount() const { return static_cast<int>(buckets_.size()); }
  bool fusedExchange() const { return plan_.update == Plan::Update::ShardedFused; }
  bool shardedOptimizer() const { return plan_.sharded(); }
  bool bucketsOnCommThreads() const { return collective_->traits().commThreads; }
  bool bucketsInline() const { return collective_->traits().inlineBuckets; }
  Precision precision() const { return options_.precision; }
  // The loss scale of the next step (0 without loss scaling), and finite steps since it last changed.
  double lossScale() const { return lossScale_.scale(); }
  int64_t lossScaleGoodSteps() const { return lossScale_.goodSteps(); }
  // A resumed run goes on with its checkpoint's scale (ignored without loss scaling).
  void restoreLossScale(double scale, int64_t goodSteps) { lossScale_.restore(scale, goodSteps); }

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
  std::vector<std::span<const float>> optimizerSlots(int r) const { return params_->optimizerSlots(r); }
  int64_t optimizerIterations(int r) const { return params_->optimizerIterations(r); }
  // Every replica gets these slots and step counter (a checkpoint's): the replicas stay identical.
  void restoreOptimizer(const std::vector<std::vector<float>>& slots, int64_t iterations);

  // Faults to play (fault injection); set before the first step.
  void setFaults(FaultPlan plan);
  const FaultPlan& faults() const { return faults_; }
  // Lets an injected hang go (the watchdog calls it after it stopped the run), so the stuck step
  // completes and the caller's thread returns.
  void releaseFaults();
  // Thread-safe snapshot of replica r's progress; now() is the clock of phaseSince.
  ReplicaProgress progress(int r) const;
  double now() const;

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
    double lastBackward = 0;  // seconds of the last backward, without injected delays
    // progress, for the watchdog
    std::atomic<int64_t> stepsDone{0}, step{0};
    std::atomic<int> phase{0}, bucketsHanded{0};
    std::atomic<int64_t> phaseSinceNs{0};
    double start = 0, backwardEnd = 0, commEnd = 0, inlineComm = 0, gather = 0, network = 0;
    double fusedSum = 0, fusedPush = 0;  // fused exchange: seconds summing and writing the others' parameters
    bool skipped = false;                // loss scaling: the summed gradients were not finite
    // The plan's ranges for this replica, each with the replica its values are read from:
    std::vector<SourceRange> summed;   // the summed gradient, where the collective leaves it
    std::vector<SourceRange> updates;  // what update() covers (sharded: the chunks it owns)
    std::vector<SourceRange> gathers;  // sharded, not fused: the others' chunks, copied after the update
    std::vector<GradBucket> owned;     // sharded: the chunks it owns
  };
  enum class JobKind { None, Train, Eval, Quit };
  struct Job {
    JobKind kind = JobKind::None;
    const Dataset* data = nullptr;
    std::span<const int64_t> indices;
    int accumulate = 1;
    float lr = 0;
    float gradScale = 1;  // turns the summed gradients into the update's mean gradient
    float lossScale = 1;  // multiplies the loss gradient (the scale, and 1/B under float16)
    uint64_t step = 0;
    float* outputs = nullptr;
  };

  // How every step runs, decided once when the strategy is built (StepPlan.cpp): the step reads
  // it and re-derives nothing from the options, the backend's capabilities or the collective.
  struct Plan {
    enum class Update {
      Whole,         // every replica updates the whole buffer from its own summed copy
      FromOwners,    // every replica updates the whole buffer, each chunk read from its owner (the ring scattered it)
      Sharded,       // each replica updates the chunks it owns, then copies the others' (ZeRO stage 1)
      ShardedFused,  // sharded, each owner summing, updating and pushing its chunks itself (FusedExchange)
    };
    Update update = Update::Whole;
    GradientCheck check = GradientCheck::Backward;  // where each replica's own gradient is checked for inf/NaN
    bool lossScaling = false;  // mixed_float16: a step whose summed gradient is not finite is skipped everywhere
    bool joinAll = false;      // every replica runs every micro-batch: a layer sums across replicas (BatchNormalization)
    bool sharded() const { return update == Update::Sharded || update == Update::ShardedFused; }
  };
  // StepPlan.cpp: the collective (the first enabled of collectiveOrder()) and the update.
  std::unique_ptr<Collective> makeCollective();
  std::unique_ptr<Collective> crossWorkerDeviceCollective();
  std::unique_ptr<Collective> hostCollective(std::unique_ptr<AllReduce> algorithm);
  void planUpdate();
  void refuseAcrossWorkers() const;
  int coresOfThisWorker() const;
  // One replica's results of a step, as every worker sees them after the exchange.
  struct ReplicaOutcome {
    double lossSum = 0, metricSum = 0, samples = 0, start = 0;
    PhaseTimes phases;
    double inlineComm = 0, backwardEnd = 0, commEnd = 0;
    int bad = 0;  // 0 finite, 1 the loss, 2 a gradient
    bool skipped = false;
  };
  // Several workers (AcrossWorkers.cpp): collective, each worker at the same point of the same step.
  std::vector<ReplicaOutcome> exchange(const std::string& localFailure, uint64_t step);
  void syncClocks();
  std::vector<uint64_t> gatherChecksums(const std::vector<uint64_t>& local) const;
  void shareEvaluation(EvalResult& res, const std::string& localFailure, std::span<float> outputs);
  [[noreturn]] void throwFailure(const std::string& localFailure, const std::string& what) const;
  void computeLoop(Replica& r);
  void runJob(const Job& job);
  void runOne(Replica& r, const Job& job);
  template <typename F>
  void guarded(Replica& r, F&& work);
  void trainReplica(Replica& r, const Job& job);
  void computeGradients(Replica& r, const Job& job);
  void applyUpdate(Replica& r, const Job& job);  // StepUpdate.cpp, as are the update's other parts
  void gatherParameters(Replica& r);
  void collectStep(Replica& r, const Job& job);
  bool reducedGradientsFinite(Replica& r);
  void applyLossScaling(StepResult& res);
  void evalReplica(Replica& r, const Job& job);
  int completeBuckets(size_t layerDone) const;  // buckets complete once this layer's backward is done
  void enter(Replica& r, StepPhase phase);
  void playFaults(Replica& r, const Job& job, int64_t computeStartNs);

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
  std::unique_ptr<Backend> backend_;  // owns what the three below point to
  ReplicaCompute* compute_ = nullptr;
  ReplicaParameters* params_ = nullptr;
  BackendCaps caps_;  // what it can do, read once: its optional parts, its names
  std::unique_ptr<Collective> collective_;
  Plan plan_;
  FailureLatch failure_;
  DynamicLossScale lossScale_;                  // mixed_float16's (inactive otherwise)
  std::unique_ptr<SpinBarrier> updated_;        // sharded: every owner has updated its chunks
  std::unique_ptr<HostReplicaSum> replicaSum_;  // BatchNormalization's cross-replica sums

  Job job_;  // written by the caller before jobGen_ is bumped
  std::atomic<uint64_t> jobGen_{0};
  std::atomic<int> pending_{0};  // replicas other than 0 still working on the job
  FaultPlan faults_;
  std::atomic<bool> faultsReleased_{false};
  uint64_t seed_ = 0;  // keys dropout masks (with the step and the global sample index)
  // The strategy's clock (ns of steady_clock); with several workers reset on all of them at once
  // before the first step, so their timelines line up. Read by the watchdog's thread.
  std::atomic<int64_t> t0_;
  bool clockSynced_ = false;
  WorkerGroup* workers_ = nullptr;
  int worker_ = 0, workerCount_ = 1;
  HierarchicalAllReduce* hierarchical_ = nullptr;  // owned by collective_
  FusedExchange* fused_ = nullptr;                 // owned by collective_ (Plan::Update::ShardedFused)
  std::atomic<bool> stopVote_{false};
  int stopVotes_ = 0;  // the last exchange's
};

// Part r of n of a range of size `size`: [lo, hi), sizes differ by at most one.
inline std::pair<int64_t, int64_t> shardRange(int64_t size, int r, int n) { return {size * r / n, size * (r + 1) / n}; }

}  // namespace ml
