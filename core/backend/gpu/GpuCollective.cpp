// The device collectives of the CUDA backend. Backward records an event per bucket on each
// replica's compute stream as it completes the bucket; after every replica has enqueued its
// backward (a barrier), replica 0's thread enqueues the all-reduce of every bucket, in order, on
// the comm streams, each after its bucket's events, so it overlaps the rest of backward on the GPU:
// NCCL across physical GPUs, the plugin's device-memory all-reduce for logical GPUs sharing one
// card (NCCL refuses two ranks on one GPU). After a second barrier each compute stream waits for it.
#include <string>

#include "backend/SpinBarrier.h"
#include "backend/gpu/CudaReplica.h"

namespace ml {

namespace {
void ok(const mlcuda_status& s) { throwIfFailed(s); }
}  // namespace

class GpuCollective : public Collective {
 public:
  GpuCollective(CudaBackend& b, std::vector<GradBucket> buckets, FailureLatch& failure)
      : b_(b),
        buckets_(std::move(buckets)),
        failure_(failure),
        barrier_(b.replicas()),
        signalled_(static_cast<size_t>(b.replicas()), 0) {}

  std::string name() const override { return b_.deviceCollective(); }
  std::string describe() const override {
    const int n = b_.replicas();
    if (b_.logical_)
      return "logical GPUs share GPU " + std::to_string(b_.reps_[0]->device) +
             ": NCCL refuses two ranks on one GPU, so Mirrorlab's device-memory all-reduce is used";
    std::string list;
    for (const auto& r : b_.reps_) list += (list.empty() ? "" : ",") + r->label;
    return "NCCL over " + std::to_string(n) + " GPUs (" + list + "), one communicator, grouped per bucket";
  }
  void beginStep(int rank) override { signalled_[static_cast<size_t>(rank)] = 0; }
  void bucketsReady(int rank, int upTo) override {
    CudaBackend::Replica& p = *b_.reps_[static_cast<size_t>(rank)];
    for (int& k = signalled_[static_cast<size_t>(rank)]; k < upTo; ++k)
      ok(b_.P_->eventRecord(p.ctx.get(), MLCUDA_STREAM_COMPUTE, p.bucket[static_cast<size_t>(k)].get()));
  }
  void finish(int rank) override {
    guarded([&] { bucketsReady(rank, static_cast<int>(buckets_.size())); });
    barrier_.arriveAndWait();
    if (rank == 0 && !failure_.failed()) guarded([&] { enqueueAll(); });
    barrier_.arriveAndWait();
    if (failure_.failed()) return;
    CudaBackend::Replica& p = *b_.reps_[static_cast<size_t>(rank)];
    const GpuEvent& done = b_.logical_ ? b_.reps_[0]->commDone : p.commDone;
    guarded([&] { ok(b_.P_->streamWaitEvent(p.ctx.get(), MLCUDA_STREAM_COMPUTE, done.get())); });
  }

 private:
  template <typename F>
  void guarded(F&& f) {
    try {
      f();
    } catch (const std::exception& e) {
      failure_.fail(e.what());
    }
  }
  // Replica 0's thread, between the barriers (every other replica waits).
  void enqueueAll() {
    const CudaPlugin* P = b_.P_;
    const size_t n = b_.reps_.size();
    std::vector<float*> bufs(n);
    std::vector<mlcuda_event*> ready(n);
    std::vector<mlcuda_context*> ctxs(n);
    for (size_t r = 0; r < n; ++r) ctxs[r] = b_.reps_[r]->ctx.get();
    for (size_t k = 0; k < buckets_.size(); ++k) {
      const GradBucket& bk = buckets_[k];
      for (size_t r = 0; r < n; ++r) {
        bufs[r] = b_.reps_[r]->grads.get() + bk.offset;
        ready[r] = b_.reps_[r]->bucket[k].get();
      }
      if (b_.logical_) {
        ok(P->localAllReduce(ctxs[0], bufs.data(), static_cast<int>(n), bk.count, ready.data(), static_cast<int>(n), nullptr));
      } else {
        for (size_t r = 0; r < n; ++r) ok(P->streamWaitEvent(ctxs[r], MLCUDA_STREAM_COMM, ready[r]));
        ok(P->ncclAllReduce(b_.nccl_.get(), ctxs.data(), bufs.data(), bk.count));
      }
    }
    if (b_.logical_)
      ok(P->eventRecord(ctxs[0], MLCUDA_STREAM_COMM, b_.reps_[0]->commDone.get()));
    else
      for (size_t r = 0; r < n; ++r) ok(P->eventRecord(ctxs[r], MLCUDA_STREAM_COMM, b_.reps_[r]->commDone.get()));
  }

  CudaBackend& b_;
  std::vector<GradBucket> buckets_;
  FailureLatch& failure_;
  SpinBarrier barrier_;
  std::vector<int> signalled_;  // buckets whose event each replica has recorded this step
};

std::string CudaBackend::deviceCollective() const {
  if (reps_.size() < 2) return {};
  return logical_ ? "device-memory" : "nccl";
}

std::unique_ptr<Collective> CudaBackend::makeDeviceCollective(std::vector<GradBucket> buckets, FailureLatch& failure) {
  return std::make_unique<GpuCollective>(*this, std::move(buckets), failure);
}

}  // namespace ml
