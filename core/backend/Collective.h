// A collective sums the replicas' gradient buckets so that every replica reads the same bits. The
// strategy drives every implementation through these calls, on each replica's own thread, in the
// same order on every replica: beginStep, bucketsReady (as backward completes buckets), finish.
// Host-memory collectives (ring, reduce-to-one) live in distribute/; device-memory ones (NCCL, the
// logical-GPU all-reduce) in the backend that owns the device buffers.
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace ml {

// The format of the values that cross between replicas. Bfloat16 halves the bytes of every
// transfer and changes the result: each replica's gradient is rounded to bfloat16 before it is
// sent, and every partial sum a participant forwards is rounded again (the additions themselves
// are float32), as NCCL's ring does with a bfloat16 buffer and PyTorch's bf16_compress_hook asks for.
enum class AllReduceDtype { Float32, Bfloat16 };

// A range of the flat gradient buffer that one collective call reduces.
struct GradBucket {
  int64_t offset = 0, count = 0;  // floats
  size_t readyAfterLayer = 0;     // complete once this layer's backward is done
};

// The first failure of a job, kept so that every replica still passes every barrier and the
// caller's thread can throw it afterwards.
class FailureLatch {
 public:
  void fail(const std::string& message) {
    std::lock_guard lock(mu_);
    if (message_.empty()) message_ = message.empty() ? "the step failed" : message;
    failed_.store(true, std::memory_order_release);
  }
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // The message ("" if none), then cleared.
  std::string take() {
    std::lock_guard lock(mu_);
    std::string m = std::move(message_);
    message_.clear();
    failed_.store(false, std::memory_order_release);
    return m;
  }

 private:
  std::atomic<bool> failed_{false};
  std::mutex mu_;
  std::string message_;
};

// What a collective does besides summing, which the strategy reads once when it plans the step.
struct CollectiveTraits {
  // The ring's reduce-scatter: chunk c of each unit stays with its owner, where the optimizer reads it.
  bool scatters = false;
  // It checks each replica's own gradient values for inf/NaN as it reads them for the sum, so that
  // backward need not read them again to check (GradientCheck::Collective); localFinite(rank) then
  // says, once finish(rank) has returned, whether every value of that replica's buffer was finite.
  bool checksLocalValues = false;
  // Where the buckets are reduced as backward completes them: a communication thread per replica,
  // or the replica's own thread between layers (neither: after backward, or on a device's streams).
  bool commThreads = false, inlineBuckets = false;
};

class Collective {
 public:
  virtual ~Collective() = default;
  virtual std::string name() const = 0;  // "ring", "reduce-to-one", "nccl", "device-memory"
  // The sentence a run prints: which all-reduce and why.
  virtual std::string describe() const = 0;
  // How the collective uses the host threads, appended to the strategy's thread policy ("" = nothing to say).
  virtual std::string threadNote() const { return {}; }
  virtual CollectiveTraits traits() const { return {}; }
  virtual void beginStep(int /*rank*/) {}
  // Backward has completed buckets [0, upTo) on this replica (upTo never decreases within a step).
  virtual void bucketsReady(int rank, int upTo) = 0;
  // After backward, on every replica, even one that failed: releases the remaining buckets and
  // returns when this replica may read the reduced gradients.
  virtual void finish(int rank) = 0;
  // Seconds this replica's thread spent in collectives inside bucketsReady (timed as all-reduce).
  virtual double inlineSeconds(int /*rank*/) const { return 0; }
  // Seconds of this replica's step spent in the cross-worker hop (MPI), several workers only.
  virtual double networkSeconds(int /*rank*/) const { return 0; }
  // See CollectiveTraits::checksLocalValues.
  virtual bool localFinite(int /*rank*/) const { return true; }
};

// One replica: nothing to reduce.
class NoCollective : public Collective {
 public:
  std::string name() const override { return "none (one replica)"; }
  std::string describe() const override { return "none (one replica)"; }
  void bucketsReady(int, int) override {}
  void finish(int) override {}
};

}  // namespace ml
