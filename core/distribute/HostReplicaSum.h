// The cross-replica sum that synchronized BatchNormalization asks for (ReplicaSum in nn/Layer.h),
// over host memory: each call is a round keyed by (step generation, micro-batch, the replica's call
// number in it), joined by ctx.peers replicas (all of them: the strategy runs empty shards too when
// a layer needs these sums). Keyed rounds keep a replica that runs ahead from mixing two of them.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "backend/Collective.h"
#include "nn/Layer.h"

namespace ml {

class HostReplicaSum : public ReplicaSum {
 public:
  HostReplicaSum(int replicas, FailureLatch& failure);
  // Before each step, on the caller's thread (no replica running): forgets the last step's rounds.
  void newStep();
  // Blocks until ctx.peers replicas have given their values, then returns their sum (in replica
  // order) in `values`. Throws when another replica failed (it will never arrive).
  void sum(const StepContext& ctx, std::span<double> values) override;

 private:
  using Key = std::tuple<uint64_t, int, int>;
  struct Round {
    std::vector<std::vector<double>> given;  // per replica (a Qt-free name: "slots" is a Qt keyword); empty = not arrived
    int arrived = 0, readers = 0;
    bool done = false;
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
};

}  // namespace ml
