// MirroredStrategy's GPU path: the replica threads, the job hand-off and the step's bookkeeping
// stay the strategy's; each replica's work goes to GpuReplicas (the CUDA plugin) instead of the
// host layers. Kept apart from MirroredStrategy.cpp so that the CPU step reads on its own.
#include "Error.h"
#include "distribute/GpuReplicas.h"
#include "distribute/MirroredStrategy.h"

namespace ml {

void MirroredStrategy::startGpu(const OptimizerSpec& optimizer) {
  std::vector<Sequential*> hosts;
  for (auto& r : replicas_) hosts.push_back(r->model.get());
  std::vector<GpuBucket> buckets;
  for (const auto& b : buckets_) buckets.push_back({b.offset, b.count, b.readyAfterLayer});
  gpu_ = std::make_unique<GpuReplicas>(options_.devices, std::move(hosts), loss_, metric_, optimizer, std::move(buckets));
}

void MirroredStrategy::runOneOnGpu(Replica& r, const Job& job) {
  if (job.kind == JobKind::Train) {
    GpuStepArgs a;
    a.data = job.data;
    a.indices = job.indices;
    a.accumulate = job.accumulate;
    a.lr = job.lr;
    a.gradScale = job.gradScale;
    a.step = job.step;
    a.seed = seed_;
    GpuReplicaResult res;
    r.start = now();  // GpuReplicas::train records its first event on an idle stream right after
    gpu_->train(r.rank, a, res);
    r.lossSum = res.lossSum;
    r.metricSum = res.metricSum;
    r.samples = res.samples;
    r.finite = res.finite;
    r.badWhat = res.badWhat;
    r.phases = res.phases;
    r.backwardEnd = r.start + res.backwardEnd;
    r.commEnd = r.start + res.commEnd;
  } else if (job.kind == JobKind::Eval) {
    gpu_->evaluate(r.rank, *job.data, job.indices, job.outputs, seed_, r.lossSum, r.metricSum, r.samples);
  }
}

void MirroredStrategy::finishGpuJob() {
  const std::string failure = gpu_->takeFailure();
  if (!failure.empty()) throw UserError(failure);
}

void MirroredStrategy::syncFromGpu() const {
  if (gpu_) gpu_->pullParameters();
}

std::string MirroredStrategy::gpuAllReduceName() const { return gpu_->allReduceName(); }

std::string MirroredStrategy::gpuAllReducePath() const { return gpu_ ? gpu_->allReducePath() : std::string(); }

std::string MirroredStrategy::gpuName(int r) const { return gpu_ ? gpu_->deviceName(r) : std::string(); }

std::vector<std::span<const float>> MirroredStrategy::gpuOptimizerSlots(int r) const { return gpu_->optimizerSlots(r); }

}  // namespace ml
