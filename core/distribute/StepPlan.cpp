// What is decided once, when the strategy is built: the collective, the first enabled entry of an
// ordered list, as Horovod picks its all-reduce.
#include "Error.h"
#include "distribute/CrossWorker.h"
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
  if (workers_ && crossReplica_ && mode == HostCollective::Mode::Threads) mode = HostCollective::Mode::Inline;
  HostGradients* grads = caps_.hostGradients;
  return std::make_unique<HostCollective>(
      std::move(algorithm), [grads](int r) { return grads->hostGradients(r); }, buckets_, mode, spins_);
}

}  // namespace ml
