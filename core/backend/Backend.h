// The Backend: the small, documented set of operations one replica of the mirrored step needs from
// a device kind, in the spirit of ggml's backend. MirroredStrategy drives every backend through
// exactly these calls, so the step, the shard split, the buckets and the phase timing are written
// once (distribute/). Implementations: cpu/CpuBackend (host layers over OpenBLAS) and
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

// Something a backend may lack; supports() names it. Layer names are the project's layer types.
struct BackendOp {
  enum class Kind { Layer, Loss, Metric, Optimizer, Collective };
  Kind kind;
  std::string name;   // "Dense", "sparse_categorical_crossentropy", "accuracy", "adam", "nccl"
  std::string label;  // where it comes from, for the message: "layer 'conv_1' (Conv2D)"; may be ""
};

// The operations a model, its loss, metric and optimizer need from a backend.
std::vector<BackendOp> requiredOps(const Sequential& model, const Loss& loss, MetricKind metric, const OptimizerSpec& optimizer);

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
  bool gradientsFinite = true;  // every layer checked in backward (or checkGradients) was finite
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;  // "cpu", "cuda"
  // "" when the backend can run op, else the reason, in words for the user.
  virtual std::string supports(const BackendOp& op) const = 0;
  // Throws UserError with the first refusal among ops.
  void require(const std::vector<BackendOp>& ops) const;

  virtual int replicas() const = 0;
  virtual std::string deviceName(int r) const = 0;  // "NVIDIA H200"; "" for simulated devices
  virtual std::string threadPolicy() const = 0;

  // ---- parameters: the host models are the reference copy (initialize, load, checksum, save) ----
  virtual void pushParameters() = 0;  // host models -> devices
  virtual void pullParameters() = 0;  // devices -> host models, when a step changed them
  // Replica r's optimizer slots in Optimizer::stateBuffers' order, on the host.
  virtual std::vector<std::span<const float>> optimizerSlots(int r) = 0;
  // Replica r's optimizer step counter (Adam's bias correction uses it).
  virtual int64_t optimizerIterations(int r) = 0;
  // Puts back replica r's slots (optimizerSlots' order) and step counter from a checkpoint.
  virtual void restoreOptimizer(int r, const std::vector<std::vector<float>>& slots, int64_t iterations) = 0;
  // Replica r's flat gradient buffer when it lives in host memory (host collectives reduce it in
  // place); empty when it lives on a device.
  virtual std::span<float> hostGradients(int r) = 0;

  // ---- one step of replica r ----
  // Makes room for `micro` micro-batches of up to maxRows rows; training also zeroes the gradients,
  // the loss sums and the finiteness count.
  virtual void prepare(int r, int micro, int64_t maxRows, int64_t targetDim, bool training) = 0;
  virtual void mark(int r, Mark m, int micro = 0) = 0;
  // Copies rows idx of data (inputs, targets, global sample ids) into replica r's batch buffers.
  virtual void stage(int r, const Dataset& data, std::span<const int64_t> idx) = 0;
  // Forward of the staged rows, the loss (summed into micro-batch `micro`'s slot) and its gradient,
  // and the metric. ctx.sampleIds is ignored: the staged rows' ids key the randomness.
  virtual void forwardLoss(int r, int micro, int64_t rows, const StepContext& ctx) = 0;
  // Backward from the loss gradient; parameter gradients accumulate. With onLayerDone (the last
  // micro-batch), each layer's gradients are checked for inf/NaN (unless setLayerChecks(false)), then onLayerDone(layer) is
  // called for every layer with parameters: after it the collective may own that layer's bucket.
  virtual void backward(int r, int64_t rows, const StepContext& ctx, const std::function<void(size_t)>& onLayerDone) = 0;
  // Checks the whole accumulated gradient (a replica whose last micro-batch was empty).
  virtual void checkGradients(int r) = 0;
  // Off: backward skips its per-layer check, because the collective checks every replica's own
  // values as it reads them for the sum (Collective::checksLocalValues), or the update or the fused
  // exchange does (setUpdateChecks, sumUpdatePush); checkGradients still checks.
  virtual void setLayerChecks(bool /*on*/) {}
  // On: update() checks the gradients it reads for inf/NaN, tile by tile just before using them
  // (finishStep's gradientsFinite), instead of a pass of their own; for a replica whose update reads
  // every value of its own gradient (one replica, no loss scaling). Returns whether the backend can.
  virtual bool setUpdateChecks(bool /*on*/) { return false; }
  // Dynamic loss scaling: forwardLoss multiplies the loss gradient by this (1: none), and
  // reducedFinite says whether the all-reduced gradients [offset, offset + count), read from
  // replica `from` as update() reads them, are all finite. Backends without mixed precision refuse
  // it in supportsPrecision and keep these defaults.
  virtual void setLossScale(int /*r*/, float /*scale*/) {}
  virtual bool reducedFinite(int /*r*/, int64_t /*offset*/, int64_t /*count*/, int /*from*/) { return true; }
  // The run's compute precision policy, after supportsPrecision accepted it (backends whose layers
  // are the host models' take it from them: applyPrecision).
  virtual void setPrecision(Precision /*p*/) {}
  // "" when the backend computes in this precision, else why not, in words for the user.
  virtual std::string supportsPrecision(Precision p) const {
    return p == Precision::Float32
               ? ""
               : std::string("training.precision ") + toString(p) +
                     " runs on CPU devices (cpu:N) only in this version: use float32 on " + name() + " devices";
  }
  // The optimizer: beginUpdate once, then update() over disjoint ranges covering the buffer. The
  // range's gradients are read from replica `from` (a scattering collective leaves each chunk
  // with its owner); backends without host collectives get one whole range with from == r.
  virtual void beginUpdate(int r, float lr) = 0;
  virtual void update(int r, int64_t offset, int64_t count, int from, float gradScale) = 0;
  // After the update: the step's sums (waits for the device).
  virtual ReplicaSums finishStep(int r, int micro) = 0;

  // ---- the sharded optimizer update (ZeRO stage 1) ----
  // Before the first step: replica r keeps optimizer state only for owned[r] (disjoint ranges of
  // the flat buffer; update() is then called on exactly those, with from == r). Returns "" when
  // the backend can, else why not, in words for the user (the caller names the field).
  virtual std::string shardOptimizer(const std::vector<std::vector<GradBucket>>& /*owned*/) {
    return "the sharded optimizer update runs on CPU devices only; turn it off (no --shard-optimizer) to train on " + name() +
           " devices";
  }
  // The all-gather: copies replica `from`'s parameters [offset, offset + count) into replica r's.
  virtual void gatherParameters(int /*r*/, int64_t /*offset*/, int64_t /*count*/, int /*from*/) {}
  // The sharded update fused with its exchange, where every replica's gradients and parameters
  // are memory this thread can reach (simulated CPU devices): for replica r's owned range
  // [offset, offset + count), tile by tile, sums the replicas' gradients in the order `from` lists
  // them (left to right: the ring's order, so the bits are the ring's), applies the optimizer to
  // the sum while it is in the cache and writes the new parameters into every other replica. The
  // reduce-scatter's pass that stores the sum, the update's pass that reads it back and the
  // all-gather's pass that reads the parameters again are gone. bad[from[i]] is set when a value
  // of replica from[i] was inf or NaN; the seconds spent summing and writing the other replicas'
  // parameters are added to `sum` and `push` (the rest is the update).
  virtual bool fusesShardedExchange() const { return false; }
  virtual void sumUpdatePush(int /*r*/, int64_t /*offset*/, int64_t /*count*/, std::span<const int> /*from*/, float /*gradScale*/,
                             uint8_t* /*bad*/, double& /*sum*/, double& /*push*/) {}
  virtual ReplicaTimes times(int r, int micro) = 0;

  // ---- evaluation: forward of the staged rows, loss and metric sums; outputs (rows, k) to the host
  virtual void evaluate(int r, int64_t rows, const StepContext& ctx, float* outputs, double& lossSum, double& metricSum) = 0;

  // ---- collectives the backend implements over its own device memory ----
  // Its collective for this device list ("" = none: host collectives over hostGradients()).
  virtual std::string deviceCollective() const { return {}; }
  virtual std::unique_ptr<Collective> makeDeviceCollective(std::vector<GradBucket> /*buckets*/, FailureLatch& /*failure*/) {
    return nullptr;
  }
  // Across workers (processes), for a backend whose gradients are not in host memory: its own
  // collective over every worker's replicas, bootstrapped through the workers' link (a collective
  // call: every worker makes it). Null when the backend cannot cross workers.
  virtual std::unique_ptr<Collective> makeCrossWorkerCollective(std::vector<GradBucket> /*buckets*/, FailureLatch& /*failure*/,
                                                                const WorkerLink& /*workers*/) {
    return nullptr;
  }
  virtual bool crossesWorkers() const { return false; }
  // bfloat16 on the wire for the backend's own collectives (--allreduce-dtype bfloat16): "" when
  // it can, else why not, in words for the user. Host collectives round on their own (AllReduce).
  virtual std::string setBfloat16Wire(bool on) {
    return on ? "bfloat16 on the wire is not built for " + name() + " devices' own collectives" : std::string();
  }
};

// The backend for the device list's kind: CpuBackend for cpu:N, CudaBackend for gpu:... (which
// throws a UserError when the GPUs or the plugin are not there, or lack an operation the model
// needs). hosts: each replica's model (configureLoss done); blasThreads: a CPU replica's BLAS threads.
// tf32: GPU backends let cuBLAS use TF32 for float32 products (StrategyOptions::tf32).
std::unique_ptr<Backend> makeBackend(const DeviceList& devices, std::vector<Sequential*> hosts, const Loss& loss,
                                     MetricKind metric, const OptimizerSpec& optimizer, const std::vector<GradBucket>& buckets,
                                     int blasThreads, bool tf32 = false);

}  // namespace ml
