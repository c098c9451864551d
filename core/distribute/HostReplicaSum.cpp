// Rounds of small cross-replica sums under one mutex: a few per BatchNormalization layer per step,
// a few hundred bytes each, so a lock and a condition variable cost less than the layer itself.
#include "distribute/HostReplicaSum.h"

#include <chrono>
#include <stdexcept>

namespace ml {

HostReplicaSum::HostReplicaSum(int replicas, FailureLatch& failure, WorkerGroup* workers)
    : positions_(static_cast<size_t>(replicas)), failure_(failure), workers_(workers) {}

void HostReplicaSum::newStep(uint64_t step) {
  std::lock_guard lock(mu_);
  rounds_.clear();  // rounds left over by a failed step
  ++generation_;
  step_ = step;
}

void HostReplicaSum::sum(const StepContext& ctx, std::span<double> values) {
  std::unique_lock lock(mu_);
  Position& pos = positions_[static_cast<size_t>(ctx.replica)];
  if (pos.generation != generation_ || pos.micro != ctx.micro) pos = {generation_, ctx.micro, 0};
  const Key key{generation_, ctx.micro, pos.call++};
  Round& round = rounds_[key];
  if (round.given.empty()) round.given.resize(positions_.size());
  round.given[static_cast<size_t>(ctx.replica)].assign(values.begin(), values.end());
  ++round.arrived;
  if (workers_) cv_.notify_all();  // replica 0 may be waiting for the others
  // The local sum: by the last replica to arrive; across workers, replica 0 adds the others'
  // (its thread makes every cross-worker call of this worker, in program order).
  const bool sums = workers_ ? ctx.replica == 0 : round.arrived == ctx.peers;
  if (sums && workers_)
    while (round.arrived < ctx.peers) {
      cv_.wait_for(lock, std::chrono::milliseconds(20));
      if (round.arrived < ctx.peers && failure_.failed())
        throw std::runtime_error("a cross-replica BatchNormalization sum was abandoned: another replica failed");
    }
  if (sums) {
    round.result.assign(values.size(), 0.0);
    for (const auto& part : round.given)
      for (size_t i = 0; i < part.size() && i < values.size(); ++i) round.result[i] += part[i];
    if (workers_) {
      // Across the workers, unlocked (the local replicas wait for this round; none can start another).
      lock.unlock();
      std::string error;
      try {
        workers_->allReduce(
            std::span<double>(round.result),
            "the BatchNormalization sum " + std::to_string(std::get<2>(key) + 1) + " of step " + std::to_string(step_));
      } catch (const std::exception& e) {
        error = e.what();
      }
      lock.lock();
      round.failed = error;
    }
    round.done = true;
    cv_.notify_all();
  } else {
    // Wakes on the round's completion; polls the failure latch, since a replica that failed before
    // reaching this round never arrives.
    while (!round.done) {
      cv_.wait_for(lock, std::chrono::milliseconds(20));
      if (!round.done && failure_.failed())
        throw std::runtime_error("a cross-replica BatchNormalization sum was abandoned: another replica failed");
    }
  }
  if (!round.failed.empty()) {
    const std::string error = round.failed;
    if (++round.readers == ctx.peers) rounds_.erase(key);
    throw WorkerLost(error);
  }
  std::copy(round.result.begin(), round.result.end(), values.begin());
  if (++round.readers == ctx.peers) rounds_.erase(key);
}

}  // namespace ml
