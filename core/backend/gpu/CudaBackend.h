// The CUDA backend: the replicas of a mirrored run on GPUs, through the CUDA plugin (never a CUDA
// header here). Each replica keeps its parameters, gradients, optimizer slots and activations in
// device memory and works on its own compute stream; its device collective (NCCL across physical
// GPUs, the plugin's device-memory all-reduce for logical GPUs sharing one card; NCCL across
// workers too) reduces the buckets on the comm streams. Layers: CudaLayers.cpp. The host
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

#include "backend/Backend.h"
#include "backend/DeviceList.h"
#include "backend/gpu/Handles.h"
#include "nn/Loss.h"
#include "nn/Sequential.h"

namespace ml {

// Its gradients live in device memory and its own collectives reduce them; it has no sharded update.
class CudaBackend : public Backend, public DeviceCollectives {
 public:
  // Checks the device list against this machine's GPUs (a UserError names a missing GPU, or says
  // why there is none), refuses by name a layer, loss, metric or optimizer it cannot run, creates
  // one plugin context per replica and the NCCL communicator, and allocates parameters, gradients
  // and optimizer slots. config.hosts: each replica's host model (configureLoss done); buckets:
  // the strategy's gradient buckets; tf32: cuBLAS may run the float32 products on TF32 tensor
  // cores; precision: Dense and Conv2D compute in bfloat16 or float16 (the plugin's *_low kernels,
  // rounding where core/nn rounds), with the loss gradient scaled for float16.
  explicit CudaBackend(const BackendConfig& config);
  ~CudaBackend() override;

  // ReplicaCompute (the layers: CudaLayers.cpp)
  void prepare(int r, int micro, int64_t maxRows, int64_t targetDim, bool training) override;
  void mark(int r, Mark m, int micro) override;
  void stage(int r, const Dataset& data, std::span<const int64_t> idx) override;
  void setLossScale(int r, float scale) override;
  void forwardLoss(int r, int micro, int64_t rows, const StepContext& ctx) override;
  void backward(int r, int64_t rows, const StepContext& ctx, const std::function<void(size_t)>& onLayerDone) override;
  void checkGradients(int r) override;
  ReplicaSums finishStep(int r, int micro) override;
  ReplicaTimes times(int r, int micro) override;
  void evaluate(int r, int64_t rows, const StepContext& ctx, float* outputs, double& lossSum, double& metricSum) override;

  // ReplicaParameters: the whole buffer of a replica's own, always (a device collective leaves the
  // whole sum with every replica).
  void pushParameters() override;
  void pullParameters() override;
  std::vector<std::span<const float>> optimizerSlots(int r) override;
  int64_t optimizerIterations(int r) override;
  void restoreOptimizer(int r, const std::vector<std::vector<float>>& slots, int64_t iterations) override;
  void beginUpdate(int r, float lr) override;
  void update(int r, int64_t offset, int64_t count, int from, float gradScale) override;
  bool reducedFinite(int r, int64_t offset, int64_t count, int from) override;

  // DeviceCollectives (GpuCollective.cpp): NCCL over physical GPUs, the device-memory all-reduce
  // over logical ones; both can carry bfloat16 (the logical-GPU sum rounds as the host ring does,
  // NCCL sums ncclBfloat16 buffers packed on the comm streams). Across workers: NCCL, its unique id
  // sent from worker 0 through the group (Horovod's bootstrap): physical GPUs join one communicator
  // over every worker's GPUs; logical GPUs sum on their card, then replica 0 of each worker
  // all-reduces across the workers and the others copy its sum.
  std::unique_ptr<Collective> makeCollective(std::vector<GradBucket> buckets, FailureLatch& failure,
                                             AllReduceDtype dtype) override;
  std::unique_ptr<Collective> makeCrossWorkerCollective(std::vector<GradBucket> buckets, FailureLatch& failure,
                                                        const WorkerLink& workers, AllReduceDtype dtype) override;

 private:
  struct Layer;
  struct Replica;
  struct ResidentData;
  struct NormState;
  friend class GpuCollective;
  enum class Opt { Sgd, Adam, RmsProp };

  int replicas() const { return static_cast<int>(reps_.size()); }
  std::string deviceCollective() const;  // "nccl" or "device-memory" (two replicas or more)
  void checkDevices(const DeviceList& devices);
  void translateLayers(const Sequential& model);
  void createReplica(const Device& d, int rank, size_t buckets);
  template <typename T>
  DeviceBuffer<T> allocate(Replica& rep, size_t count, bool zero);
  void ensureCapacity(Replica& rep, int64_t rows, int64_t targetDim);
  void ensureStepBuffers(Replica& rep, int accumulate);
  // ctx: the training step's (BatchNormalization's cross-replica sums), or null for evaluation.
  const float* forward(Replica& rep, int64_t rows, const StepContext* ctx, uint64_t seed, uint64_t step);
  void normForward(Replica& rep, size_t i, const float* x, float* y, int64_t rows, const StepContext* ctx);
  void normBackward(Replica& rep, size_t i, const float* x, float* dy, float* dx, int64_t rows, const StepContext& ctx);
  const ResidentData* residentData(Replica& rep, const Dataset& data);
  char* takeSlot(Replica& rep, size_t bytes);
  Replica& rep(int r) { return *reps_[static_cast<size_t>(r)]; }

  const CudaPlugin* P_ = nullptr;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Sequential*> hosts_;
  std::vector<std::string> gpuNames_;  // by physical index
  Loss loss_;
  MetricKind metric_;
  OptimizerSpec optSpec_;
  Opt opt_ = Opt::Adam;
  bool logical_ = false;
  bool tf32_ = false;  // cuBLAS may use TF32 for float32 products
  int precision_ = MLCUDA_PRECISION_FLOAT32;
  int64_t paramCount_ = 0, inFeatures_ = 0, outFeatures_ = 0;
  std::vector<std::unique_ptr<Replica>> reps_;
  // Declared after reps_, so destroyed before the replicas' contexts, whose streams ran its
  // all-reduces: NCCL wants those streams idle but still there. ~CudaBackend waits for them first
  // (the Replica destructor's own wait would come too late), then resets it.
  NcclComm nccl_;
  NcclComm crossNccl_;     // logical GPUs across workers: replica 0 of every worker
  std::string crossWhat_;  // how the all-reduce crosses workers, for the start line ("" in one process)
  // Data sets kept in device memory, one copy per physical GPU (declared after reps_: freed while
  // the contexts that allocated them still exist).
  std::vector<std::unique_ptr<ResidentData>> resident_;
  std::mutex residentMutex_;
  std::atomic<bool> paramsNewer_{false};  // the devices hold parameters the hosts have not seen
};

}  // namespace ml
