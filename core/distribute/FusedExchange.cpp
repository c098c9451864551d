// The fused exchange's barrier, its order of sources and its record of non-finite values.
#include "distribute/FusedExchange.h"

#include <algorithm>

namespace ml {

FusedExchange::FusedExchange(std::unique_ptr<Collective> ring, HostGradients& grads, ShardedUpdate& update, int replicas,
                             FailureLatch& failure)
    : ring_(std::move(ring)),
      grads_(grads),
      update_(update),
      n_(replicas),
      failure_(failure),
      complete_(replicas),
      bad_(static_cast<size_t>(replicas) * static_cast<size_t>(replicas), 0) {
  // The owner of chunk c is c - 1, and the ring adds c's values first, then c + 1's, ..., the owner's last.
  for (int r = 0; r < n_; ++r)
    for (int k = 1; k <= n_; ++k) order_.push_back((r + k) % n_);
}

std::string FusedExchange::threadNote() const {
  return "no spare core for communication threads, so each replica sums the gradient chunks it owns itself, in its update";
}

// Every replica's gradients complete (zeroed where a replica had no rows) before anyone sums them;
// every replica passes the barrier, even one that failed.
void FusedExchange::finish(int rank) {
  try {
    grads_.hostGradients(rank);
  } catch (const std::exception& e) {
    failure_.fail(e.what());
  }
  complete_.arriveAndWait();
}

void FusedExchange::update(int rank, std::span<const GradBucket> owned, float gradScale, double& sum, double& push) {
  const size_t row = static_cast<size_t>(rank) * static_cast<size_t>(n_);
  uint8_t* bad = bad_.data() + row;
  std::fill(bad, bad + n_, uint8_t{0});  // read after the closing barrier; this step starts after the last one's
  const std::span<const int> from(order_.data() + row, static_cast<size_t>(n_));
  for (const GradBucket& u : owned) update_.sumUpdatePush(rank, u.offset, u.count, from, gradScale, bad, sum, push);
}

bool FusedExchange::localFinite(int rank) const {
  for (int reader = 0; reader < n_; ++reader)
    if (bad_[static_cast<size_t>(reader) * static_cast<size_t>(n_) + static_cast<size_t>(rank)]) return false;
  return true;
}

}  // namespace ml
