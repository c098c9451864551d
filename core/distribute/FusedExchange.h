// The sharded update fused with the ring's exchange (StrategyOptions::fuseShardedExchange), where
// the replicas share host memory, the ring sums float32 and there is no spare core for
// communication threads: nothing is reduced during backward; finish() waits until every replica's
// gradients are complete, then each owner sums the chunks it owns itself, tile by tile, in the
// ring's order and so with the ring's bits, updates them while they are in the cache and writes the
// new parameters into the other replicas (ShardedUpdate::sumUpdatePush). One pass over memory
// instead of the reduce-scatter's, the update's and the all-gather's. It is named as the ring it
// stands for.
#pragma once
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/Backend.h"
#include "backend/Collective.h"
#include "backend/SpinBarrier.h"

namespace ml {

class FusedExchange : public Collective {
 public:
  // ring: the collective it replaces (its name and description are kept).
  FusedExchange(std::unique_ptr<Collective> ring, HostGradients& grads, ShardedUpdate& update, int replicas,
                FailureLatch& failure);

  std::string name() const override { return ring_->name(); }
  std::string describe() const override { return ring_->describe(); }
  std::string threadNote() const override;
  // The owners check every replica's values as they sum them.
  CollectiveTraits traits() const override { return {.scatters = true, .checksLocalValues = true}; }
  void bucketsReady(int, int) override {}  // summed after backward, by the update
  void finish(int rank) override;
  // Whether no owner saw an inf or NaN among this replica's values (after the update's closing barrier).
  bool localFinite(int rank) const override;

  // Replica `rank`'s update of the ranges it owns: the sums, the optimizer and the push. The
  // seconds spent summing and pushing are added to sum and push.
  void update(int rank, std::span<const GradBucket> owned, float gradScale, double& sum, double& push);

 private:
  std::unique_ptr<Collective> ring_;
  HostGradients& grads_;
  ShardedUpdate& update_;
  const int n_;
  FailureLatch& failure_;
  SpinBarrier complete_;      // every replica's gradients are complete
  std::vector<uint8_t> bad_;  // [reader * n + source]: a non-finite value seen
  std::vector<int> order_;    // replica r's sources at [r * n, (r + 1) * n)
};

}  // namespace ml
