// The CPU backend: simulated devices, one replica per thread, each running the host layers of its
// own Sequential (OpenBLAS, single-threaded per replica when there are several) over host buffers.
#pragma once
#include <chrono>
#include <memory>
#include <vector>

#include "backend/Backend.h"
#include "nn/Loss.h"
#include "nn/Optimizer.h"
#include "nn/Sequential.h"
#include "nn/ThreadTeam.h"

namespace ml {

// Every layer, loss, metric and optimizer of core/nn runs here (it is the reference), its
// gradients are in host memory and every replica's memory is reachable from every thread: it has
// host gradients and the sharded update, and leaves the collectives to distribute/'s host ones.
class CpuBackend : public Backend, public HostGradients, public ShardedUpdate {
 public:
  // hosts: each replica's model (owned by the caller, same architecture, configureLoss done).
  // blasThreads: OpenBLAS threads (the count is process-wide: 1 when there are several replicas).
  CpuBackend(std::vector<Sequential*> hosts, const Loss& loss, MetricKind metric, const OptimizerSpec& optimizer,
             int blasThreads);

  // ReplicaCompute
  void prepare(int r, int micro, int64_t maxRows, int64_t targetDim, bool training) override;
  void mark(int r, Mark m, int micro) override;
  void stage(int r, const Dataset& data, std::span<const int64_t> idx) override;
  void setLossScale(int r, float scale) override { rep(r).lossScale = scale; }
  void forwardLoss(int r, int micro, int64_t rows, const StepContext& ctx) override;
  void backward(int r, int64_t rows, const StepContext& ctx, const std::function<void(size_t)>& onLayerDone) override;
  void checkGradients(int r) override;
  ReplicaSums finishStep(int r, int micro) override;
  ReplicaTimes times(int r, int micro) override;
  void evaluate(int r, int64_t rows, const StepContext& ctx, float* outputs, double& lossSum, double& metricSum) override;

  // ReplicaParameters: the host models are the parameters.
  void pushParameters() override {}
  void pullParameters() override {}
  std::vector<std::span<const float>> optimizerSlots(int r) override { return rep(r).opt->stateBuffers(); }
  int64_t optimizerIterations(int r) override { return rep(r).opt->iterations(); }
  void restoreOptimizer(int r, const std::vector<std::vector<float>>& slots, int64_t iterations) override {
    rep(r).opt->restore(slots, iterations);
  }
  void beginUpdate(int r, float lr) override { rep(r).opt->beginStep(lr); }
  void update(int r, int64_t offset, int64_t count, int from, float gradScale) override;
  bool reducedFinite(int r, int64_t offset, int64_t count, int from) override;

  // HostGradients. Zeroed first if no backward has written them this step (Sequential::discardGrads):
  // read by the replica's own thread, or by others only after its backward.
  std::span<float> hostGradients(int r) override {
    rep(r).model->settleGrads();
    return rep(r).model->grads();
  }
  void setGradientCheck(GradientCheck where) override {
    layerChecks_ = where == GradientCheck::Backward;
    updateChecks_ = where == GradientCheck::Update;
  }

  // ShardedUpdate
  void shard(const std::vector<std::vector<GradBucket>>& owned) override;
  void gatherParameters(int r, int64_t offset, int64_t count, int from) override;
  void sumUpdatePush(int r, int64_t offset, int64_t count, std::span<const int> from, float gradScale, uint8_t* bad, double& sum,
                     double& push) override;

 private:
  bool layerChecks_ = true;    // GradientCheck::Backward: backward checks each layer's gradients
  bool updateChecks_ = false;  // GradientCheck::Update: update() checks the gradients it reads
  struct Replica {
    Sequential* model = nullptr;
    std::unique_ptr<Optimizer> opt;
    // Sharded: (start in the flat buffer, start in the optimizer's state) of each owned range, by start.
    std::vector<std::pair<int64_t, int64_t>> stateAt;
    std::vector<float> x, y;   // staged inputs and targets
    std::vector<int64_t> ids;  // global sample ids of the staged rows
    int64_t targetDim = 1;
    ReplicaSums sums;
    float lossScale = 1;  // dynamic loss scaling: multiplies the loss gradient
    // Mark times (seconds on the steady clock): start, then per micro-batch start/input/forward/backward ends.
    double start = 0, commEnd = 0, updateEnd = 0;
    std::vector<double> micro;  // 4 per micro-batch
  };
  Replica& rep(int r) { return *reps_[static_cast<size_t>(r)]; }
  size_t stateOffset(const Replica& p, int64_t offset) const;  // where the range's optimizer state starts

  std::vector<std::unique_ptr<Replica>> reps_;
  Loss loss_;
  MetricKind metric_;
  OptimizerSpec optimizer_;
  int blasThreads_ = 1;
  // One replica on several cores: its team (BLAS then runs single-threaded inside each task).
  std::unique_ptr<ThreadTeam> team_;
};

}  // namespace ml
