// The all-reduce of several workers (processes), hierarchical as Horovod's and NCCL's: the local
// replicas of a worker sum into replica 0's buffer (in memory, in replica order), replica 0 sums
// that across the workers (WorkerGroup::allReduce: MPI_Allreduce), and the local replicas copy the
// result. Every replica of every worker ends with the same bits. With one replica per worker it
// is the flat form ("mpi": every replica is an MPI rank), for teaching.
#pragma once
#include <atomic>
#include <string>

#include "backend/Collective.h"
#include "distribute/AllReduce.h"
#include "distribute/Workers.h"

namespace ml {

class HierarchicalAllReduce : public AllReduce {
 public:
  // A lost worker is kept in `failure` (the local replicas still pass every barrier).
  HierarchicalAllReduce(int localReplicas, WorkerGroup& workers, FailureLatch& failure);
  std::string name() const override { return participants() == 1 ? "mpi" : "hierarchical"; }
  std::string describe() const override;
  void allReduce(int rank, std::span<float> data) override;
  void setDtype(AllReduceDtype d) override;  // float32 only, so far
  void beginStep(int rank) override;
  double networkSeconds(int rank) const override { return rank == 0 ? network_ : 0.0; }
  // The step the next calls belong to (named when a worker stops answering); set before the step.
  void setStep(uint64_t step) { step_.store(step, std::memory_order_relaxed); }
  // A cross-worker call failed (WorkerLost): the group cannot be used again.
  bool lost() const { return lost_.load(std::memory_order_acquire); }

 private:
  WorkerGroup& workers_;
  FailureLatch& failure_;
  std::atomic<bool> lost_{false};
  double network_ = 0;  // replica 0's thread (or its communication thread) only
  int bucket_ = 0;
  std::atomic<uint64_t> step_{0};
};

}  // namespace ml
