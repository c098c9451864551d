// A backend: what one device kind does for the mirrored step, as the few narrow interfaces that
// MirroredStrategy drives (so the step, the shard split, the buckets and the phase timing are
// written once, in distribute/), and one struct of what the kind can do, which the strategy reads
// once when it plans the run:
//   ReplicaCompute     one replica's step and evaluation on its device            every kind
//   ReplicaParameters  its parameters, optimizer state and update                  every kind
//   HostGradients      gradients in host memory, reduced by the host collectives   cpu
//   ShardedUpdate      the sharded optimizer update (ZeRO stage 1)                 cpu
//   DeviceCollectives  the kind's own collectives over device memory               cuda
// A part that a kind lacks is a null pointer in its BackendCaps, never a virtual function that
// answers "not supported". Implementations: cpu/CpuBackend (host layers over OpenBLAS) and
// gpu/CudaBackend (the dlopen'd CUDA plugin; the fake plugin of tests/gpu speaks the same ABI).
//
// Threading: the calls that take a replica r are made on replica r's own thread. A backend may
// throw from them (a UserError naming the device); the strategy keeps the first failure and lets
// every replica finish the step's collectives before it reports it.
#pragma once
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/Collective.h"
#include "backend/DeviceList.h"
#include "data/Dataset.h"
#include "nn/Layer.h"
#include "nn/Loss.h"
#include "nn/Optimizer.h"
#include "nn/Precision.h"
#include "nn/Sequential.h"
#include "telemetry/Events.h"

namespace ml {

// What a backend needs of the workers (distribute/Workers.h's WorkerGroup, which is above the
// backends) to bootstrap its own collective across them.
struct WorkerLink {
  int rank = 0, size = 1;
  std::string engine;  // "Open MPI v4.1.4"
  // Every worker's string, by rank, on every worker (a collective call).
  std::function<std::vector<std::string>(const std::string& mine)> allGather;
};

// Something a backend may lack; a backend that cannot run one refuses it when it is made, by name.
// Layer names are the project's layer types.
struct BackendOp {
  enum class Kind { Layer, Loss, Metric, Optimizer };
  Kind kind;
  std::string name;   // "Dense", "sparse_categorical_crossentropy", "accuracy", "adam"
  std::string label;  // where it comes from, for the message: "layer 'conv_1' (Conv2D)"; may be ""
};

// The operations a model, its loss, metric and optimizer need from a backend.
std::vector<BackendOp> requiredOps(const Sequential& model, const Loss& loss, MetricKind metric, const OptimizerSpec& optimizer);
// Throws UserError with the first op that refuses() answers with a reason ("" = it can run it).
void requireOps(const std::vector<BackendOp>& ops, const std::function<std::string(const BackendOp&)>& refuses);

// Points of replica r's step that the backend timestamps: the host clock on the CPU, events on
// the device's compute stream on a GPU (so a GPU's phases are the device's, not the host's).
// InputEnd: the micro-batch's input is on the device (after stage(), or at once when it has no rows).
enum class Mark { StepStart, MicroStart, InputEnd, ForwardEnd, BackwardEnd, CommEnd, UpdateEnd };

struct ReplicaTimes {
  PhaseTimes phases;                    // input, forward, backward, optimizer (the rest is the strategy's)
  double backwardEnd = 0, commEnd = 0;  // seconds after Mark::StepStart
};

struct ReplicaSums {
  double lossSum = 0, metricSum = 0;
  bool gradientsFinite = true;  // every value checked this step (in backward, checkGradients or update) was finite
};

// Where each replica's own gradient values are checked for inf/NaN, so that the replica where one
// appeared is named: once, by whoever reads them anyway.
enum class GradientCheck {
  Backward,    // each layer's gradients in backward, before its buckets go to the collective
  Collective,  // the collective, as it reads them for the sum (CollectiveTraits::checksLocalValues)
  Update,      // update(), tile by tile just before using them (one replica without loss scaling)
};

// ---- every kind ---------------------------------------------------------------------------------

// One replica's step and evaluation on its device.
class ReplicaCompute {
 public:
  virtual ~ReplicaCompute() = default;
  // Makes room for `micro` micro-batches of up to maxRows rows; training also zeroes the gradients,
  // the loss sums and the finiteness count.
  virtual void prepare(int r, int micro, int64_t maxRows, int64_t targetDim, bool training) = 0;
  virtual void mark(int r, Mark m, int micro = 0) = 0;
  // Copies rows idx of data (inputs, targets, global sample ids) into replica r's batch buffers.
  virtual void stage(int r, const Dataset& data, std::span<const int64_t> idx) = 0;
  // Dynamic loss scaling: forwardLoss multiplies the loss gradient by this (1: none).
  virtual void setLossScale(int r, float scale) = 0;
  // Forward of the staged rows, the loss (summed into micro-batch `micro`'s slot) and its gradient,
  // and the metric. ctx.sampleIds is ignored: the staged rows' ids key the randomness.
  virtual void forwardLoss(int r, int micro, int64_t rows, const StepContext& ctx) = 0;
  // Backward from the loss gradient; parameter gradients accumulate. With onLayerDone (the last
  // micro-batch), each layer's gradients are checked for inf/NaN where GradientCheck::Backward
  // applies, then onLayerDone(layer) is called for every layer with parameters: after it the
  // collective may own that layer's bucket.
  virtual void backward(int r, int64_t rows, const StepContext& ctx, const std::function<void(size_t)>& onLayerDone) = 0;
  // Checks the whole accumulated gradient (a replica whose last micro-batch was empty).
  virtual void checkGradients(int r) = 0;
  // After the update: the step's sums (waits for the device).
  virtual ReplicaSums finishStep(int r, int micro) = 0;
  virtual ReplicaTimes times(int r, int micro) = 0;
  // Forward of the staged rows, loss and metric sums; outputs (rows, k) to the host when not null.
  virtual void evaluate(int r, int64_t rows, const StepContext& ctx, float* outputs, double& lossSum, double& metricSum) = 0;
};

// The parameters, the optimizer's state and the update. The host models are the reference copy
// (initialize, load, checksum, save); a device may hold newer parameters until pullParameters.
class ReplicaParameters {
 public:
  virtual ~ReplicaParameters() = default;
  virtual void pushParameters() = 0;  // host models -> devices
  virtual void pullParameters() = 0;  // devices -> host models, when a step changed them
  // Replica r's optimizer slots in Optimizer::stateBuffers' order, on the host.
  virtual std::vector<std::span<const float>> optimizerSlots(int r) = 0;
  // Replica r's optimizer step counter (Adam's bias correction uses it).
  virtual int64_t optimizerIterations(int r) = 0;
  // Puts back replica r's slots (optimizerSlots' order) and step counter from a checkpoint.
  virtual void restoreOptimizer(int r, const std::vector<std::vector<float>>& slots, int64_t iterations) = 0;
  // The optimizer: beginUpdate once, then update() over disjoint ranges covering what replica r
  // updates. The range's summed gradients are read from replica `from` (a scattering collective
  // leaves each chunk with its owner); a kind without host gradients gets one whole range with from == r.
  virtual void beginUpdate(int r, float lr) = 0;
  virtual void update(int r, int64_t offset, int64_t count, int from, float gradScale) = 0;
  // Whether the summed gradients [offset, offset + count), read from replica `from` as update()
  // reads them, are all finite (dynamic loss scaling decides on them).
  virtual bool reducedFinite(int r, int64_t offset, int64_t count, int from) = 0;
};

// ---- some kinds: what BackendCaps points to where the kind has it ----------------------------------

// Gradients in host memory (simulated CPU devices): the host collectives reduce them in place and a
// nan fault poisons them.
class HostGradients {
 public:
  virtual ~HostGradients() = default;
  // Replica r's flat gradient buffer, complete (zeroed where no backward wrote it this step).
  virtual std::span<float> hostGradients(int r) = 0;
  // Where the replicas' own gradient values are checked (the default: Backward). A kind without
  // host gradients always checks them in backward.
  virtual void setGradientCheck(GradientCheck where) = 0;
};

// The sharded optimizer update (ZeRO stage 1), where every replica's memory is reachable from every
// replica's thread (simulated CPU devices).
class ShardedUpdate {
 public:
  virtual ~ShardedUpdate() = default;
  // Before the first step: replica r keeps optimizer state only for owned[r] (disjoint ranges of
  // the flat buffer; update() is then called on exactly those, with from == r).
  virtual void shard(const std::vector<std::vector<GradBucket>>& owned) = 0;
  // The all-gather: copies replica `from`'s parameters [offset, offset + count) into replica r's.
  virtual void gatherParameters(int r, int64_t offset, int64_t count, int from) = 0;
  // The sharded update fused with its exchange: for replica r's owned range [offset, offset +
  // count), tile by tile, sums the replicas' gradients in the order `from` lists them (left to
  // right: the ring's order, so the bits are the ring's), applies the optimizer to the sum while it
  // is in the cache and writes the new parameters into every other replica. The reduce-scatter's
  // pass that stores the sum, the update's pass that reads it back and the all-gather's pass that
  // reads the parameters again are gone. bad[from[i]] is set when a value of replica from[i] was
  // inf or NaN; the seconds spent summing and writing the other replicas' parameters are added to
  // `sum` and `push` (the rest is the update).
  virtual void sumUpdatePush(int r, int64_t offset, int64_t count, std::span<const int> from, float gradScale, uint8_t* bad,
                             double& sum, double& push) = 0;
};

// The kind's own collectives over device memory (NCCL, the logical-GPU all-reduce). dtype: the
// format on the wire, bfloat16 rounded as the host collectives round it (AllReduce.h).
class DeviceCollectives {
 public:
  virtual ~DeviceCollectives() = default;
  // Within this process (two replicas or more).
  virtual std::unique_ptr<Collective> makeCollective(std::vector<GradBucket> buckets, FailureLatch& failure,
                                                     AllReduceDtype dtype) = 0;
  // Over every worker's replicas, bootstrapped through the workers' link (a collective call: every
  // worker makes it).
  virtual std::unique_ptr<Collective> makeCrossWorkerCollective(std::vector<GradBucket> buckets, FailureLatch& failure,
                                                                const WorkerLink& workers, AllReduceDtype dtype) = 0;
};

// What a kind can do, filled in by its constructor and read once by the strategy. Exactly one of
// hostGradients and collectives is set: the gradients live where some collective reaches them.
struct BackendCaps {
  std::string kind;                          // "cpu", "cuda": names the devices in messages
  std::string threadPolicy;                  // how the replicas use the host's threads (the start line)
  std::vector<std::string> deviceNames;      // by replica: "NVIDIA H200"; "" for simulated devices
  HostGradients* hostGradients = nullptr;    // null: the gradients live in device memory
  ShardedUpdate* sharded = nullptr;          // null: --shard-optimizer is refused
  DeviceCollectives* collectives = nullptr;  // null: the host collectives (ring, reduce-to-one, MPI)
};

class Backend : public ReplicaCompute, public ReplicaParameters {
 public:
  const BackendCaps& caps() const { return caps_; }

 protected:
  BackendCaps caps_;
};

// What makeBackend needs: hosts are each replica's model (same architecture, configureLoss done,
// owned by the caller); buckets the strategy's gradient buckets; blasThreads a CPU replica's BLAS
// threads; tf32 lets GPUs run float32 products on TF32 (StrategyOptions::tf32); precision the
// layers' compute format (a CPU backend's layers are the host models, which applyPrecision sets).
struct BackendConfig {
  DeviceList devices;
  std::vector<Sequential*> hosts;
  Loss loss;
  MetricKind metric = MetricKind::None;
  OptimizerSpec optimizer;
  std::vector<GradBucket> buckets;
  int blasThreads = 1;
  bool tf32 = false;
  Precision precision = Precision::Float32;
};

// The backend for the device list's kind: CpuBackend for cpu:N, CudaBackend for gpu:... (which
// throws a UserError when the GPUs or the plugin are not there, or lack an operation the model needs).
std::unique_ptr<Backend> makeBackend(BackendConfig config);

}  // namespace ml
