// Ring and reduce-to-one over host memory, bucket by bucket, on communication threads, between
// layers, or once after backward.
#include "distribute/HostCollective.h"

#include <algorithm>
#include <chrono>

#include "backend/SpinBarrier.h"
#include "tensor/Denormals.h"

namespace ml {

namespace {
double seconds() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

HostCollective::HostCollective(std::unique_ptr<AllReduce> algorithm, std::function<std::span<float>(int)> grads,
                               std::vector<GradBucket> buckets, Mode mode, int spins)
    : algo_(std::move(algorithm)), grads_(std::move(grads)), buckets_(std::move(buckets)), mode_(mode), spins_(spins) {
  for (int r = 0; r < algo_->participants(); ++r) slots_.push_back(std::make_unique<Slot>());
  if (mode_ == Mode::Threads)
    for (int r = 0; r < algo_->participants(); ++r) slot(r).comm = std::thread([this, r] { commLoop(r); });
}

HostCollective::~HostCollective() {
  for (auto& s : slots_) {
    if (!s->comm.joinable()) continue;
    s->commGen.store(UINT64_MAX, std::memory_order_release);
    s->commGen.notify_one();
    s->comm.join();
  }
}

std::string HostCollective::threadNote() const {
  if (mode_ == Mode::Threads) return "a communication thread per replica reduces each gradient bucket while backward goes on";
  if (mode_ == Mode::Inline)
    return "no spare core for communication threads, so each replica reduces every gradient bucket itself "
           "between layers, as soon as backward has completed it";
  return {};
}

void HostCollective::reduce(int rank, const GradBucket& b) {
  auto span = grads_(rank).subspan(static_cast<size_t>(b.offset), static_cast<size_t>(b.count));
  if (algo_->scatters())
    algo_->reduceScatter(rank, span);
  else
    algo_->allReduce(rank, span);
}

// Every complete bucket, in the fixed bucket order every replica follows, so the collectives match up.
void HostCollective::reduceInline(int rank, int upTo) {
  Slot& s = slot(rank);
  for (; s.inlineDone < upTo; ++s.inlineDone) reduce(rank, buckets_[static_cast<size_t>(s.inlineDone)]);
}

void HostCollective::beginStep(int rank) {
  Slot& s = slot(rank);
  s.inlineDone = 0;
  s.inlineSeconds = 0;
  algo_->beginStep(rank);
  if (mode_ != Mode::Threads) return;
  s.ready.store(0, std::memory_order_relaxed);
  s.reduced.store(0, std::memory_order_relaxed);
  s.commGen.fetch_add(1, std::memory_order_release);
  s.commGen.notify_one();
}

void HostCollective::bucketsReady(int rank, int upTo) {
  Slot& s = slot(rank);
  if (mode_ == Mode::Inline) {
    const double t = seconds();
    reduceInline(rank, upTo);
    s.inlineSeconds += seconds() - t;
  } else if (mode_ == Mode::Threads && upTo > s.ready.load(std::memory_order_relaxed)) {
    s.ready.store(upTo, std::memory_order_release);
    s.ready.notify_one();
  }
}

void HostCollective::finish(int rank) {
  const int nb = static_cast<int>(buckets_.size());
  Slot& s = slot(rank);
  if (mode_ == Mode::Inline) {
    reduceInline(rank, nb);  // the rest, in order (all of them for an empty shard)
  } else if (mode_ == Mode::Threads) {
    // Empty shards and parameter-free tails: release every bucket so nobody waits forever.
    bucketsReady(rank, nb);
    for (int rd = s.reduced.load(std::memory_order_acquire); rd < nb; rd = s.reduced.load(std::memory_order_acquire))
      spinWaitWhileEqual(s.reduced, rd, std::min(200, spins_));
  } else {
    reduce(rank, {0, static_cast<int64_t>(grads_(rank).size()), 0});
  }
}

void HostCollective::commLoop(int rank) {
  const FlushDenormals flush;  // sums the replicas' gradients: the same mode as the replica threads
  Slot& s = slot(rank);
  uint64_t seen = 0;
  const int nb = static_cast<int>(buckets_.size());
  for (;;) {
    spinWaitWhileEqual(s.commGen, seen, std::min(200, spins_));
    seen = s.commGen.load(std::memory_order_acquire);
    if (seen == UINT64_MAX) return;
    for (int k = 0; k < nb; ++k) {
      for (int rd = s.ready.load(std::memory_order_acquire); rd <= k; rd = s.ready.load(std::memory_order_acquire))
        spinWaitWhileEqual(s.ready, rd, std::min(200, spins_));
      reduce(rank, buckets_[static_cast<size_t>(k)]);
      s.reduced.store(k + 1, std::memory_order_release);
      s.reduced.notify_one();
    }
  }
}

}  // namespace ml
