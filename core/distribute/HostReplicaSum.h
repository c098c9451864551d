// The cross-replica sum that synchronized BatchNormalization asks for (ReplicaSum in nn/Layer.h),
// over host memory: each call is a round keyed by (step generation, micro-batch, the replica's call
// number in it), joined by ctx.peers replicas (all of them: the strategy runs empty shards too when
// a layer needs these sums). Keyed rounds keep a replica that runs ahead from mixing two of them.
// Across workers, the replica that completes a round sums it across the workers too (the
// hierarchical form of the gradients' all-reduce): every worker's replicas complete their rounds in
// the same order, so the workers' collective calls match.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "backend/Collective.h"
#include "distribute/Workers.h"
#include "nn/Layer.h"

namespace ml {

class HostReplicaSum : public ReplicaSum {
 public:
  // workers: the other processes' replicas join every sum through it (null: one process).
  HostReplicaSum(int replicas, FailureLatch& failure, WorkerGroup* workers = nullptr);
  // Before each step, on the caller's thread (no replica running): forgets the last step's rounds.
  void newStep(uint64_t step = 0);
  // Blocks until ctx.peers replicas have given their values, then returns their sum (in replica
  // order) in `values`. Throws when another replica failed (it will never arrive).
  void sum(const StepContext& ctx, std::span<double> values) override;

 private:
  using Key = std::tuple<uint64_t, int, int>;
  struct Round {
    std::vector<std::vector<double>> given;  // per replica (a Qt-free name: "slots" is a Qt keyword); empty = not arrived
    int arrived = 0, readers = 0;
    bool done = false;
    std::string failed;  // the cross-worker sum's failure, for the replicas that waited for it
    std::vector<double> result;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<Key, Round> rounds_;
  uint64_t generation_ = 0;
  struct Position {
    uint64_t generation = ~0ull;
    int micro = -1, call = 0;
  };
  std::vector<Position> positions_;  // per replica: where its next call falls
  FailureLatch& failure_;
  WorkerGroup* workers_;
  uint64_t step_ = 0;
};

}  // namespace ml
