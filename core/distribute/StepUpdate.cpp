// The update half of the mirrored step, as the plan (StepPlan.cpp) lays it out: the optimizer over
// the summed gradients, on every replica or sharded (ZeRO stage 1: each replica its own chunks),
// fused with the exchange or followed by the all-gather; the finiteness check that decides a
// loss-scaled step.
#include "Error.h"
#include "distribute/FusedExchange.h"
#include "distribute/MirroredStrategy.h"

namespace ml {

// Every replica applies the whole update, or its own chunks when sharded, over the ranges its
// plan lists (planUpdate), each read where the collective left its sum: from the chunk's owner after
// a scattering collective (the same bits for everyone; the owners' buffers stay untouched until the
// next step starts, which waits for every replica to finish this one), else from its own buffer.
// Fused, each owner forms its chunks' sums itself, tile by tile, as it updates them, and writes the
// new parameters into the others.
void MirroredStrategy::applyUpdate(Replica& r, const Job& job) {
  compute_->mark(r.rank, Mark::CommEnd);
  r.skipped = false;
  if (plan_.lossScaling && !reducedGradientsFinite(r)) {
    // Every replica reads the same summed bits, so every replica skips this same step.
    r.skipped = true;
    compute_->mark(r.rank, Mark::UpdateEnd);
    return;
  }
  params_->beginUpdate(r.rank, job.lr);
  r.fusedSum = r.fusedPush = 0;
  if (plan_.update == Plan::Update::ShardedFused)
    fused_->update(r.rank, r.owned, job.gradScale, r.fusedSum, r.fusedPush);
  else
    for (const SourceRange& u : r.updates) params_->update(r.rank, u.offset, u.count, u.from, job.gradScale);
  compute_->mark(r.rank, Mark::UpdateEnd);
}

// Whether the all-reduced gradient is finite everywhere, read where update() reads it.
bool MirroredStrategy::reducedGradientsFinite(Replica& r) {
  for (const SourceRange& u : r.summed)
    if (!params_->reducedFinite(r.rank, u.offset, u.count, u.from)) return false;
  return true;
}

// The all-gather: every chunk this replica does not own is copied from its owner, who has updated
// it (the barrier before this call); nobody writes parameters again before the next step's update.
void MirroredStrategy::gatherParameters(Replica& r) {
  for (const SourceRange& g : r.gathers) caps_.sharded->gatherParameters(r.rank, g.offset, g.count, g.from);
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
