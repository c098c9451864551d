// The update half of the mirrored step: the optimizer over the summed gradients, on every replica
// or sharded (ZeRO stage 1: each replica its own chunks), fused with the exchange or followed by
// the all-gather; the finiteness checks that decide a loss-scaled step and name a bad replica.
#include <algorithm>

#include "Error.h"
#include "FieldNames.h"
#include "distribute/MirroredStrategy.h"

namespace ml {

// ZeRO stage 1: each replica keeps optimizer state for the chunks it owns alone; where the
// replica threads share the memory, the ring sums float32 and each replica reduces on its own
// thread anyway (no communication threads to overlap backward with), the update is fused with its
// exchange: one pass over the summed chunk instead of three (ShardedUpdate::sumUpdatePush).
void MirroredStrategy::setUpShardedUpdate() {
  const int n = replicas();
  std::vector<std::vector<GradBucket>> owned;
  for (auto& rep : replicas_) {
    rep->owned = ownedRanges(units_, rep->rank, n);
    owned.push_back(rep->owned);
  }
  if (!caps_.sharded)
    throw UserError(fieldInWords("distribute.shard_optimizer") +
                    ": the sharded optimizer update runs on CPU devices only; turn it off (no --shard-optimizer) to train on " +
                    caps_.kind + " devices");
  caps_.sharded->shard(owned);
  sharded_ = true;
  updated_ = std::make_unique<SpinBarrier>(n);
  fused_ = options_.fuseShardedExchange && !workers_ && caps_.hostGradients && collective_->traits().scatters &&
           !collective_->traits().commThreads && options_.allreduceDtype == AllReduceDtype::Float32 && !lossScale_.active();
  if (fused_) {
    fusedBad_.assign(static_cast<size_t>(n) * static_cast<size_t>(n), 0);
    // The owner of chunk c is c - 1, and the ring adds c's values first, then c + 1's, ..., the owner's last.
    for (int r = 0; r < n; ++r)
      for (int k = 1; k <= n; ++k) fusedOrder_.push_back((r + k) % n);
  }
}

// Every replica applies the whole update. After a scattering collective it reads each chunk's
// summed gradient from its owner (the same bits for everyone); the owners' buffers stay untouched
// until the next step starts, which waits for every replica to finish this one. Sharded, each
// replica updates only the chunks it owns (their sums are in its own buffer after the ring's
// reduce-scatter, and the same bits in everyone's after reduce-to-one); fused, it forms those sums
// itself, tile by tile, as it updates them, and writes the new parameters into the others.
void MirroredStrategy::applyUpdate(Replica& r, const Job& job) {
  const int n = replicas();
  compute_->mark(r.rank, Mark::CommEnd);
  r.skipped = false;
  if (lossScale_.active() && !reducedGradientsFinite(r)) {
    // Every replica reads the same summed bits, so every replica skips this same step.
    r.skipped = true;
    compute_->mark(r.rank, Mark::UpdateEnd);
    return;
  }
  params_->beginUpdate(r.rank, job.lr);
  r.fusedSum = r.fusedPush = 0;
  if (fused_) {
    const size_t n0 = static_cast<size_t>(r.rank) * static_cast<size_t>(n);
    uint8_t* bad = fusedBad_.data() + n0;
    std::fill(bad, bad + n, uint8_t{0});  // read by collectStep after the closing barrier; this step starts after the last one's
    const std::span<const int> from(fusedOrder_.data() + n0, static_cast<size_t>(n));
    for (const GradBucket& u : r.owned)
      caps_.sharded->sumUpdatePush(r.rank, u.offset, u.count, from, job.gradScale, bad, r.fusedSum, r.fusedPush);
  } else if (sharded_) {
    for (const GradBucket& u : r.owned) params_->update(r.rank, u.offset, u.count, r.rank, job.gradScale);
  } else if (collective_->traits().scatters) {
    for (const GradBucket& u : units_) {
      const size_t len = static_cast<size_t>(u.count);
      for (int c = 0; c < n; ++c) {
        const size_t a = AllReduce::chunkBegin(len, c, n), b = AllReduce::chunkBegin(len, c + 1, n);
        if (a == b) continue;
        params_->update(r.rank, u.offset + static_cast<int64_t>(a), static_cast<int64_t>(b - a), AllReduce::chunkOwner(c, n),
                        job.gradScale);
      }
    }
  } else {
    params_->update(r.rank, 0, replicas_[0]->model->paramCount(), r.rank, job.gradScale);
  }
  compute_->mark(r.rank, Mark::UpdateEnd);
}

// Whether the all-reduced gradient is finite everywhere, read where update() reads it: each
// chunk from its owner after a scattering collective, else this replica's own summed buffer.
bool MirroredStrategy::reducedGradientsFinite(Replica& r) {
  const int n = replicas();
  if (!collective_->traits().scatters) return params_->reducedFinite(r.rank, 0, replicas_[0]->model->paramCount(), r.rank);
  for (const GradBucket& u : units_) {
    const size_t len = static_cast<size_t>(u.count);
    for (int c = 0; c < n; ++c) {
      const size_t a = AllReduce::chunkBegin(len, c, n), b = AllReduce::chunkBegin(len, c + 1, n);
      if (a != b && !params_->reducedFinite(r.rank, u.offset + static_cast<int64_t>(a), static_cast<int64_t>(b - a),
                                            AllReduce::chunkOwner(c, n)))
        return false;
    }
  }
  return true;
}

// Fused: whether no owner saw an inf or NaN among this replica's values (read after the closing barrier).
bool MirroredStrategy::fusedLocalFinite(int rank) const {
  const int n = replicas();
  for (int reader = 0; reader < n; ++reader)
    if (fusedBad_[static_cast<size_t>(reader) * static_cast<size_t>(n) + static_cast<size_t>(rank)]) return false;
  return true;
}

// The all-gather: every chunk this replica does not own is copied from its owner, who has updated
// it (the barrier before this call); nobody writes parameters again before the next step's update.
void MirroredStrategy::gatherParameters(Replica& r) {
  const int n = replicas();
  for (const GradBucket& u : units_) {
    const size_t len = static_cast<size_t>(u.count);
    for (int c = 0; c < n; ++c) {
      const size_t a = AllReduce::chunkBegin(len, c, n), b = AllReduce::chunkBegin(len, c + 1, n);
      const int owner = AllReduce::chunkOwner(c, n);
      if (a == b || owner == r.rank) continue;
      caps_.sharded->gatherParameters(r.rank, u.offset + static_cast<int64_t>(a), static_cast<int64_t>(b - a), owner);
    }
  }
}

// The dynamic loss scale (LossScale.h), decided once per step on the caller's thread from the
// replicas' common verdict on the summed gradients: a skipped step is not a divergence unless the
// scale was already 1.
void MirroredStrategy::applyLossScaling(StepResult& res) {
  res.lossScale = lossScale_.scale();
  res.skipped = replicas_[0]->skipped;
  for (const auto& r : replicas_)
    if (r->skipped != res.skipped) throw UserError("internal: the replicas disagree on skipping a loss-scaled step");
  if (res.skipped) {
    if (lossScale_.scale() > 1.0) {
      res.finite = true;
      res.badReplica = -1;
      res.badWhat.clear();
    } else if (res.finite) {
      res.finite = false;
      res.badReplica = 0;
      res.badWhat = "gradient";
    }
  }
  lossScale_.afterStep(res.skipped);
}

}  // namespace ml
