// What is decided once, when the strategy is built, so that the step tests no mode flags: the
// collective (the first enabled entry of an ordered list, as Horovod picks its all-reduce), where
// each replica's gradient is checked for inf/NaN, and how the update runs (whole, from the chunks'
// owners, sharded, or sharded and fused with the exchange), down to the ranges each replica reads.
#include "Error.h"
#include "Field.h"
#include "distribute/CrossWorker.h"
#include "distribute/FusedExchange.h"
#include "distribute/HostCollective.h"
#include "distribute/MirroredStrategy.h"
#include "distribute/Workers.h"

namespace ml {

namespace {
// Each entry says when that collective can reduce this run's gradients; where several can, the
// first wins: one replica needs none even where a device or host collective could run.
constexpr CollectiveEntry kCollectiveOrder[] = {
    {CollectiveKind::DeviceAcrossWorkers, "the backend's own across workers",
     [](const CollectiveCase& c) { return c.workers > 1 && c.deviceGradients; }},
    {CollectiveKind::Hierarchical, "hierarchical over host memory",
     [](const CollectiveCase& c) { return c.workers > 1 && !c.deviceGradients; }},
    {CollectiveKind::None, "none (one replica)", [](const CollectiveCase& c) { return c.workers == 1 && c.replicas == 1; }},
    {CollectiveKind::Device, "the backend's own", [](const CollectiveCase& c) { return c.deviceGradients; }},
    {CollectiveKind::Host, "the project's algorithm over host memory",
     [](const CollectiveCase& c) { return !c.deviceGradients; }},
};
}  // namespace

std::span<const CollectiveEntry> collectiveOrder() { return kCollectiveOrder; }

CollectiveKind chooseCollective(const CollectiveCase& c) {
  for (const CollectiveEntry& e : kCollectiveOrder)
    if (e.enabled(c)) return e.kind;
  throw std::logic_error("chooseCollective: no collective is enabled");  // Host or Device always is
}

std::unique_ptr<Collective> MirroredStrategy::makeCollective() {
  const CollectiveCase c{workerCount_, replicas(), caps_.collectives != nullptr};
  switch (chooseCollective(c)) {
    case CollectiveKind::DeviceAcrossWorkers: return crossWorkerDeviceCollective();
    case CollectiveKind::Hierarchical: {
      // The local sum, the cross-worker hop on replica 0, the local copy.
      auto h = std::make_unique<HierarchicalAllReduce>(replicas(), *workers_, failure_);
      hierarchical_ = h.get();
      return hostCollective(std::move(h));
    }
    case CollectiveKind::None: return std::make_unique<NoCollective>();  // nothing crosses: the dtype changes nothing
    case CollectiveKind::Device: return caps_.collectives->makeCollective(buckets_, failure_, options_.allreduceDtype);
    case CollectiveKind::Host: return hostCollective(makeAllReduce(options_.allreduce, replicas()));
  }
  throw std::logic_error("makeCollective: unknown collective");
}

// GPUs across workers: the backend's own collective (NCCL), bootstrapped through the group.
std::unique_ptr<Collective> MirroredStrategy::crossWorkerDeviceCollective() {
  WorkerLink link;
  link.rank = workers_->rank();
  link.size = workers_->size();
  link.engine = workers_->engine();
  WorkerGroup& group = *workers_;
  link.allGather = [&group](const std::string& mine) { return group.allGather(mine, "the NCCL unique id from worker 1"); };
  return caps_.collectives->makeCrossWorkerCollective(buckets_, failure_, link, options_.allreduceDtype);
}

// Several buckets on communication threads when every replica can have a spare core, else between
// layers (a comm thread without a core of its own could only preempt a compute thread).
std::unique_ptr<Collective> MirroredStrategy::hostCollective(std::unique_ptr<AllReduce> algorithm) {
  algorithm->setDtype(options_.allreduceDtype);
  const int n = replicas(), cores = coresOfThisWorker();
  auto mode = HostCollective::Mode::Whole;
  if (buckets_.size() > 1)
    mode = options_.bucketComm == BucketComm::Threads || (options_.bucketComm == BucketComm::Auto && 2 * n <= cores)
               ? HostCollective::Mode::Threads
               : HostCollective::Mode::Inline;
  // BatchNormalization's sums cross the workers from replica 0's thread in the middle of forward
  // and backward: the gradients' cross-worker calls must come from that same thread, in program
  // order, so that every worker makes its collective calls in one order.
  if (workers_ && plan_.joinAll && mode == HostCollective::Mode::Threads) mode = HostCollective::Mode::Inline;
  HostGradients* grads = caps_.hostGradients;
  return std::make_unique<HostCollective>(
      std::move(algorithm), [grads](int r) { return grads->hostGradients(r); }, buckets_, mode, spins_);
}

// The update, after the collective is chosen. Sharded (ZeRO stage 1): each replica keeps optimizer
// state for the chunks it owns alone. Where the replica threads share the memory, the ring sums
// float32 and each replica reduces on its own thread anyway (no communication threads to overlap
// backward with), the update is fused with its exchange: one pass over the summed chunk instead
// of three (FusedExchange). Then where the gradients are checked: by whoever reads them anyway.
void MirroredStrategy::planUpdate() {
  const int n = replicas();
  const int64_t params = replicas_[0]->model->paramCount();
  const CollectiveTraits traits = collective_->traits();
  if (options_.shardOptimizer && n > 1) {
    if (!caps_.sharded)
      throw fieldError(
          "distribute.shard_optimizer",
          ": the sharded optimizer update runs on CPU devices only; turn it off (no --shard-optimizer) to train on " +
              caps_.kind + " devices");
    const bool fuse = options_.fuseShardedExchange && !workers_ && caps_.hostGradients && traits.scatters &&
                      !traits.commThreads && options_.allreduceDtype == AllReduceDtype::Float32 && !plan_.lossScaling;
    plan_.update = fuse ? Plan::Update::ShardedFused : Plan::Update::Sharded;
  } else {
    plan_.update = traits.scatters ? Plan::Update::FromOwners : Plan::Update::Whole;
  }
  const std::vector<SourceRange> chunks = unitChunks(units_, n);
  std::vector<std::vector<GradBucket>> owned;
  for (auto& rep : replicas_) {
    const int r = rep->rank;
    rep->summed = traits.scatters ? chunks : std::vector<SourceRange>{{0, params, r}};
    rep->updates = rep->summed;
    rep->gathers.clear();
    if (!plan_.sharded()) continue;
    rep->owned = ownedRanges(units_, r, n);
    owned.push_back(rep->owned);
    rep->updates.clear();  // the sum of an owned chunk is in the owner's own buffer (or in everyone's)
    for (const GradBucket& b : rep->owned) rep->updates.push_back({b.offset, b.count, r});
    if (plan_.update == Plan::Update::Sharded)
      for (const SourceRange& c : chunks)
        if (c.from != r) rep->gathers.push_back(c);
  }
  if (plan_.sharded()) {
    caps_.sharded->shard(owned);
    updated_ = std::make_unique<SpinBarrier>(n);
  }
  if (plan_.update == Plan::Update::ShardedFused) {
    auto f = std::make_unique<FusedExchange>(std::move(collective_), *caps_.hostGradients, *caps_.sharded, n, failure_);
    fused_ = f.get();
    collective_ = std::move(f);
  }
  // A collective that checks every replica's own gradient values as it reads them for the sum (the
  // ring) saves backward a pass over them; the replica is still named (collectStep). One replica
  // without loss scaling reads every value of its gradient once, in its update, which checks each
  // tile as it reads it.
  if (collective_->traits().checksLocalValues)
    plan_.check = GradientCheck::Collective;
  else if (n == 1 && !workers_ && !plan_.lossScaling && caps_.hostGradients)
    plan_.check = GradientCheck::Update;
  if (caps_.hostGradients) caps_.hostGradients->setGradientCheck(plan_.check);
}

}  // namespace ml
