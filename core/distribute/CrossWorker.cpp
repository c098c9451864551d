#include "distribute/CrossWorker.h"

#include <algorithm>
#include <chrono>

#include "Error.h"
#include "Field.h"

namespace ml {

namespace {
double seconds() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

HierarchicalAllReduce::HierarchicalAllReduce(int localReplicas, WorkerGroup& workers, FailureLatch& failure)
    : AllReduce(localReplicas), workers_(workers), failure_(failure) {}

std::string HierarchicalAllReduce::describe() const {
  const std::string across = "across " + std::to_string(workers_.size()) + " workers with " + workers_.engine();
  if (participants() == 1) return "mpi: one replica per worker, summed " + across;
  return "hierarchical: the " + std::to_string(participants()) +
         " local replicas sum in memory into replica 0, which all-reduces " + across + ", then the local replicas copy it";
}

void HierarchicalAllReduce::beginStep(int rank) {
  if (rank != 0) return;
  network_ = 0;
  bucket_ = 0;
}

void HierarchicalAllReduce::setDtype(AllReduceDtype d) {
  if (d != AllReduceDtype::Float32)
    throw fieldError("distribute.allreduce_dtype",
                     std::string(" ") + toString(d) +
                         " across workers is not built yet (MPI sends float32); use float32, or train in one process");
}

void HierarchicalAllReduce::allReduce(int rank, std::span<float> data) {
  const int n = n_;
  if (n > 1) {
    slots_[static_cast<size_t>(rank)] = data.data();
    barrier_.arriveAndWait();
  }
  if (rank == 0) {
    const size_t len = data.size();
    float* __restrict dst = data.data();
    for (int r = 1; r < n; ++r) {
      const float* __restrict src = slots_[static_cast<size_t>(r)];
      for (size_t i = 0; i < len; ++i) dst[i] += src[i];
    }
    const double t = seconds();
    ++bucket_;
    // Even after a local failure this worker takes part, so the other workers are not left
    // waiting (the failure is shared at the step's exchange). A lost worker is kept as the
    // step's failure; the local replicas still pass the barriers below.
    if (!lost()) {
      try {
        workers_.allReduce(data, "the all-reduce of step " + std::to_string(step_.load(std::memory_order_relaxed)) +
                                     " (gradient bucket " + std::to_string(bucket_) + ")");
      } catch (const std::exception& e) {
        lost_.store(true, std::memory_order_release);
        failure_.fail(e.what());
      }
    }
    network_ += seconds() - t;
  }
  if (n == 1) return;
  barrier_.arriveAndWait();
  if (rank != 0) std::copy(slots_[0], slots_[0] + data.size(), data.data());
  barrier_.arriveAndWait();
}

}  // namespace ml
