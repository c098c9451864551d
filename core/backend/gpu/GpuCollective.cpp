// The device collectives of the CUDA backend. Backward records an event per bucket on each
// replica's compute stream as it completes the bucket; after every replica has enqueued its
// backward (a barrier), replica 0's thread enqueues the all-reduce of every bucket, in order, on
// the comm streams, each after its bucket's events, so it overlaps the rest of backward on the GPU:
// NCCL across physical GPUs, the plugin's device-memory all-reduce for logical GPUs sharing one
// card (NCCL refuses two ranks on one GPU). After a second barrier each compute stream waits for it.
// Across workers (makeCrossWorkerCollective, bootstrapped through the workers' link): one NCCL
// communicator over every worker's physical GPUs, or, for logical GPUs, the device-memory sum
// followed by an NCCL all-reduce of replica 0's buffer across the workers, which the others copy.
// With bfloat16 on the wire both all-reduces round as mlcuda_*_allreduce_bf16 say.
#include <cstring>
#include <string>

#include "Error.h"
#include "backend/SpinBarrier.h"
#include "backend/gpu/CudaReplica.h"

namespace ml {

namespace {
void ok(const mlcuda_status& s) { throwIfFailed(s); }
}  // namespace

class GpuCollective : public Collective {
 public:
  GpuCollective(CudaBackend& b, std::vector<GradBucket> buckets, FailureLatch& failure, AllReduceDtype dtype)
      : b_(b),
        buckets_(std::move(buckets)),
        failure_(failure),
        bf16_(dtype == AllReduceDtype::Bfloat16),
        barrier_(b.replicas()),
        signalled_(static_cast<size_t>(b.replicas()), 0) {}

  std::string name() const override { return b_.crossWhat_.empty() ? b_.deviceCollective() : "nccl"; }
  std::string describe() const override { return describePath() + (bf16_ ? ", bfloat16 on the wire" : ""); }
  std::string describePath() const {
    if (!b_.crossWhat_.empty()) return b_.crossWhat_;
    const int n = b_.replicas();
    if (b_.logical_)
      return "logical GPUs share GPU " + std::to_string(b_.reps_[0]->device) +
             ": NCCL refuses two ranks on one GPU, so Mirrorlab's device-memory all-reduce is used";
    std::string list;
    for (const auto& r : b_.reps_) list += (list.empty() ? "" : ",") + r->label;
    return "NCCL over " + std::to_string(n) + " GPUs (" + list + "), one communicator, grouped per bucket";
  }
  void beginStep(int rank) override { signalled_[static_cast<size_t>(rank)] = 0; }
  // Logical GPUs across workers: the cross-worker all-reduces' time on replica 0's comm stream (from
  // their events; the step has synchronised that stream by now). Physical GPUs share one
  // communicator across workers, where the hop is not a part of its own: 0.
  double networkSeconds(int rank) const override {
    if (rank != 0 || !b_.crossNccl_ || crossEnd_.empty()) return 0;
    double total = 0;
    try {
      for (size_t k = 0; k < crossEnd_.size(); ++k) {
        float ms = 0;
        ok(b_.P_->eventElapsedMs(crossStart_[k].get(), crossEnd_[k].get(), &ms));
        total += static_cast<double>(ms) * 1e-3;
      }
    } catch (const std::exception&) {
      return 0;  // the step's own wait reports a failed stream
    }
    return total;
  }
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
    guarded([&] {
      ok(b_.P_->streamWaitEvent(p.ctx.get(), MLCUDA_STREAM_COMPUTE, done.get()));
      // Logical GPUs across workers: replica 0's buffer holds every worker's sum; the others copy it.
      if (b_.crossNccl_ && rank != 0)
        ok(b_.P_->copyOnDevice(p.ctx.get(), p.grads.get(), b_.reps_[0]->grads.get(),
                               static_cast<size_t>(b_.paramCount_) * sizeof(float)));
    });
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
        ok((bf16_ ? P->localAllReduceBf16 : P->localAllReduce)(ctxs[0], bufs.data(), static_cast<int>(n), bk.count, ready.data(),
                                                               static_cast<int>(n), nullptr));
        // Across workers: on the same comm stream, so after the local sum; timed by events.
        if (b_.crossNccl_) {
          while (crossEnd_.size() < buckets_.size()) {
            mlcuda_event* e = nullptr;
            ok(P->eventCreate(ctxs[0], &e));
            crossStart_.emplace_back(e, EventDestroy{P});
            ok(P->eventCreate(ctxs[0], &e));
            crossEnd_.emplace_back(e, EventDestroy{P});
          }
          ok(P->eventRecord(ctxs[0], MLCUDA_STREAM_COMM, crossStart_[k].get()));
          ok((bf16_ ? P->ncclAllReduceBf16 : P->ncclAllReduce)(b_.crossNccl_.get(), ctxs.data(), bufs.data(), bk.count));
          ok(P->eventRecord(ctxs[0], MLCUDA_STREAM_COMM, crossEnd_[k].get()));
        }
      } else {
        for (size_t r = 0; r < n; ++r) ok(P->streamWaitEvent(ctxs[r], MLCUDA_STREAM_COMM, ready[r]));
        ok((bf16_ ? P->ncclAllReduceBf16 : P->ncclAllReduce)(b_.nccl_.get(), ctxs.data(), bufs.data(), bk.count));
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
  bool bf16_;  // bfloat16 on the wire
  SpinBarrier barrier_;
  std::vector<int> signalled_;                   // buckets whose event each replica has recorded this step
  std::vector<GpuEvent> crossStart_, crossEnd_;  // replica 0's, around each bucket's cross-worker all-reduce
};

std::string CudaBackend::deviceCollective() const {
  if (reps_.size() < 2) return {};
  return logical_ ? "device-memory" : "nccl";
}

std::unique_ptr<Collective> CudaBackend::makeCollective(std::vector<GradBucket> buckets, FailureLatch& failure,
                                                        AllReduceDtype dtype) {
  return std::make_unique<GpuCollective>(*this, std::move(buckets), failure, dtype);
}

namespace {
std::string toHex(const unsigned char* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) s += {digits[p[i] >> 4], digits[p[i] & 15]};
  return s;
}
void fromHex(const std::string& s, unsigned char* p, size_t n) {
  if (s.size() != 2 * n) throw UserError("worker 1 sent an NCCL unique id of " + std::to_string(s.size() / 2) + " bytes");
  auto nibble = [](char c) { return static_cast<unsigned char>(c <= '9' ? c - '0' : c - 'a' + 10); };
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<unsigned char>(nibble(s[2 * i]) << 4 | nibble(s[2 * i + 1]));
}
}  // namespace

// Horovod's bootstrap: worker 0 makes the unique id, every worker gets it over MPI (the group's
// gather), then every worker creates its ranks from it (which waits for all of them).
std::unique_ptr<Collective> CudaBackend::makeCrossWorkerCollective(std::vector<GradBucket> buckets, FailureLatch& failure,
                                                                   const WorkerLink& workers, AllReduceDtype dtype) {
  const int W = workers.size, w = workers.rank, n = replicas();
  unsigned char id[MLCUDA_NCCL_ID_BYTES] = {};
  std::string mine;
  if (w == 0) {
    ok(P_->ncclUniqueId(id));
    mine = toHex(id, sizeof id);
  }
  const std::vector<std::string> all = workers.allGather(mine);
  fromHex(all.at(0), id, sizeof id);
  std::vector<int> ranks, devices;
  std::string list;
  for (const auto& r : reps_) list += (list.empty() ? "" : ",") + r->label;
  mlcuda_nccl* comm = nullptr;
  if (logical_) {
    // One rank per worker (replica 0): NCCL refuses two ranks on one GPU.
    ranks = {w};
    devices = {reps_[0]->device};
    ok(P_->ncclCreateRanks(id, W, ranks.data(), devices.data(), 1, &comm));
    crossNccl_ = NcclComm(comm, NcclDestroy{P_});
    crossWhat_ = "hierarchical on GPUs: the " + std::to_string(n) + " logical GPUs of each worker (" + list +
                 ") sum in device memory, then replica 0 of each of the " + std::to_string(W) +
                 " workers all-reduces with NCCL (its id sent over " + workers.engine + "), then the others copy it";
  } else {
    // One communicator over every worker's GPUs (rank = worker * n + replica): NCCL sums within and
    // across the machines as its topology allows.
    for (int r = 0; r < n; ++r) {
      ranks.push_back(w * n + r);
      devices.push_back(reps_[static_cast<size_t>(r)]->device);
    }
    nccl_.reset();
    ok(P_->ncclCreateRanks(id, W * n, ranks.data(), devices.data(), n, &comm));
    nccl_ = NcclComm(comm, NcclDestroy{P_});
    crossWhat_ = "NCCL over the " + std::to_string(W * n) + " GPUs of " + std::to_string(W) + " workers (" + list +
                 " on this one), one communicator made from worker 1's unique id sent over " + workers.engine +
                 ", grouped per bucket";
  }
  return std::make_unique<GpuCollective>(*this, std::move(buckets), failure, dtype);
}

}  // namespace ml
