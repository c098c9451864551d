// The replicas of a MirroredStrategy on GPUs, through the CUDA plugin (never a CUDA header here).
// Each replica keeps its parameters, gradients, optimizer slots and activations in device memory
// and works on its own compute stream; gradients are all-reduced bucket by bucket, in a fixed order,
// on the comm streams (NCCL across physical GPUs, the plugin's device-memory all-reduce for logical
// GPUs sharing one card), then every replica applies the same fused optimizer update. The host
// Sequential of each replica keeps the layer shapes and receives the parameters when checksums,
// saving or tests need them (pullParameters).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "data/Dataset.h"
#include "distribute/DeviceList.h"
#include "distribute/SpinBarrier.h"
#include "nn/Loss.h"
#include "nn/Sequential.h"
#include "project/Project.h"
#include "telemetry/Events.h"

struct mlcuda_context;
struct mlcuda_event;
struct mlcuda_nccl;

namespace ml {

struct CudaPlugin;

struct GpuBucket {
  int64_t offset, count;   // floats in the flat gradient buffer
  size_t readyAfterLayer;  // complete once this layer's backward is done
};

struct GpuStepArgs {
  const Dataset* data = nullptr;
  std::span<const int64_t> indices;
  int accumulate = 1;
  float lr = 0, gradScale = 1;
  uint64_t step = 0, seed = 0;
};

struct GpuReplicaResult {
  double lossSum = 0, metricSum = 0;
  int64_t samples = 0;
  bool finite = true;
  std::string badWhat;
  PhaseTimes phases;              // forward, backward, optimizer (allreduce and wait are derived by the strategy)
  double backwardEnd = 0, commEnd = 0;  // seconds after the replica's step start, from CUDA events
};

class GpuReplicas {
 public:
  // Checks the device list against this machine's GPUs (a UserError names a missing GPU, or says
  // why there is none), translates the model's layers (a UserError names a layer the GPU backend
  // does not have), creates one plugin context per replica and the NCCL communicator, and allocates
  // parameters, gradients and optimizer slots. hosts: each replica's host model, same architecture.
  GpuReplicas(const DeviceList& devices, std::vector<Sequential*> hosts, const Loss& loss, MetricKind metric,
              const OptimizerSpec& optimizer, std::vector<GpuBucket> buckets);
  ~GpuReplicas();
  GpuReplicas(const GpuReplicas&) = delete;
  GpuReplicas& operator=(const GpuReplicas&) = delete;

  int replicas() const { return static_cast<int>(reps_.size()); }
  bool logical() const { return logical_; }
  std::string allReduceName() const;    // "nccl", "device-memory" or "none (one replica)"
  std::string allReducePath() const;    // the sentence the run prints: which all-reduce and why
  std::string threadPolicy() const;
  std::string deviceName(int r) const;  // "NVIDIA H200"

  void pushParameters();  // each replica's host parameters -> its device (after initialize / load)
  void pullParameters();  // device -> host, when a step has changed them since the last pull
  // The device's optimizer slots of replica r, copied to the host (same buffers as Optimizer::stateBuffers).
  std::vector<std::span<const float>> optimizerSlots(int r);

  // A collective: the thread of every replica r calls it for the same step. Never throws; a failure
  // (CUDA, cuBLAS, NCCL, out of memory) is kept and every replica still passes both barriers.
  void train(int r, const GpuStepArgs& args, GpuReplicaResult& out);
  // Replica r's share of indices (as the CPU replicas split it); outputs (n, k) in indices order.
  void evaluate(int r, const Dataset& data, std::span<const int64_t> indices, float* outputs, uint64_t seed,
                double& lossSum, double& metricSum, int64_t& samples);
  // After a job, on the calling thread: the first failure's message ("" if none), then cleared.
  std::string takeFailure();

 private:
  struct Layer;
  struct Replica;

  void destroy();
  void ensureCapacity(Replica& rep, int64_t rows, int64_t targetDim);
  void ensureStepBuffers(Replica& rep, int accumulate);
  void stage(Replica& rep, const Dataset& data, std::span<const int64_t> idx, bool withIds);
  const float* forward(Replica& rep, int64_t rows, bool training, uint64_t seed, uint64_t step);
  void backward(Replica& rep, int64_t rows, bool last, unsigned long long* nonfinite, size_t& signalled);
  void allReduce();
  void optimizerStep(Replica& rep, float gradScale, float lr);
  void fail(const std::string& message);

  const CudaPlugin* P_ = nullptr;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<std::unique_ptr<Replica>> reps_;
  std::vector<Sequential*> hosts_;
  std::vector<GpuBucket> buckets_;
  std::vector<std::string> gpuNames_;  // by physical index
  Loss loss_;
  MetricKind metric_;
  OptimizerSpec opt_;
  bool logical_ = false;
  int64_t paramCount_ = 0, inFeatures_ = 0, outFeatures_ = 0;
  mlcuda_nccl* nccl_ = nullptr;
  SpinBarrier barrier_;
  std::atomic<bool> failed_{false};
  std::atomic<bool> paramsNewer_{false};  // the devices hold parameters the hosts have not seen
  std::mutex failMu_;
  std::string failure_;  // the first failure of the current job, guarded by failMu_
};

}  // namespace ml
