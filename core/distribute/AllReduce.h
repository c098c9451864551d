// All-reduce over host memory between replica threads. A collective: every one of the N
// participants calls allReduce(rank, its buffer) with buffers of equal length; on return every
// buffer holds the element-wise sum, with identical bits on every replica (each element's sum
// is computed once, by one participant, then copied).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/Collective.h"
#include "backend/SpinBarrier.h"

namespace ml {

// AllReduceDtype (backend/Collective.h): the format of the values that cross between replicas.
// Host memory holds the values in float32 containers, so the simulated devices' own copies move as
// many bytes as before; the cost model counts two bytes per value.
std::optional<AllReduceDtype> allReduceDtypeNamed(const std::string& name);  // float32 | bfloat16
AllReduceDtype parseAllReduceDtype(const std::string& name);                 // the same; UserError otherwise
const char* toString(AllReduceDtype d);
inline constexpr const char* kAllReduceDtypeNames =
    "float32, the default, or bfloat16: half the bytes on the wire, and results change";

// The all-reduce a project asks for (distribute.allreduce). Ring and ReduceToOne sum over host
// memory in one process; Nccl names the GPUs' own (chosen for GPU devices whatever the name);
// Hierarchical (local sum, one hop across workers, local copy) and Mpi (one replica a worker)
// sum across workers.
enum class AllReduceAlgo { Ring, ReduceToOne, Nccl, Hierarchical, Mpi };
std::optional<AllReduceAlgo> allReduceAlgoNamed(const std::string& name);
AllReduceAlgo parseAllReduceAlgo(const std::string& name);  // UserError naming the allowed ones
const char* toString(AllReduceAlgo a);                      // "ring", "reduce-to-one", ...
inline constexpr const char* kAllReduceAlgoNames = "ring, reduce-to-one, nccl; across workers hierarchical, mpi";
inline bool acrossWorkers(AllReduceAlgo a) { return a == AllReduceAlgo::Hierarchical || a == AllReduceAlgo::Mpi; }
inline int64_t bytesPerValue(AllReduceDtype d) { return d == AllReduceDtype::Bfloat16 ? 2 : 4; }

class AllReduce {
 public:
  explicit AllReduce(int participants);
  virtual ~AllReduce() = default;
  virtual std::string name() const = 0;
  // The run's start line: "ring over host memory" (", bfloat16 on the wire").
  virtual std::string describe() const {
    return name() + " over host memory" + (dtype_ == AllReduceDtype::Bfloat16 ? ", bfloat16 on the wire" : "");
  }
  // Before the first call. Algorithms that cannot send bfloat16 throw UserError.
  virtual void setDtype(AllReduceDtype d) { dtype_ = d; }
  AllReduceDtype dtype() const { return dtype_; }
  virtual void allReduce(int rank, std::span<float> data) = 0;
  // Reduce-scatter alone, for algorithms that have that phase (ring): on return every
  // participant has finished adding, and chunk c of the buffer (see chunkBegin) holds the
  // complete sum in the buffer of participant chunkOwner(c) — and only there, so a reader takes
  // each chunk from its owner, up to the next collective on these buffers. That saves the
  // all-gather's copy: the optimizer reads the reduced gradient where it already is. Returns
  // false for algorithms without the phase; the buffer then holds the whole sum (allReduce).
  virtual bool reduceScatter(int rank, std::span<float> data) {
    allReduce(rank, data);
    return false;
  }
  virtual bool scatters() const { return false; }  // reduceScatter leaves chunks with owners
  // Whether the algorithm reads every participant's own values before adding them to anything and
  // checks them for inf/NaN as it goes; then localFinite(rank), after the participant's last call
  // of the step, says whether all of that participant's values were finite (every call since
  // beginStep). No pass of its own: the values are read for the sum anyway.
  virtual bool checksLocalValues() const { return false; }
  virtual bool localFinite(int /*rank*/) const { return true; }
  // A new step starts on this participant (before its first call of the step).
  virtual void beginStep(int /*rank*/) {}
  // Seconds this participant spent this step in the cross-worker hop (several workers only).
  virtual double networkSeconds(int /*rank*/) const { return 0; }
  int participants() const { return n_; }
  // The n chunks of a buffer of len elements: chunk c is [chunkBegin(c), chunkBegin(c + 1)).
  static size_t chunkBegin(size_t len, int c, int n) { return len * static_cast<size_t>(c) / static_cast<size_t>(n); }
  static int chunkOwner(int c, int n) { return (c - 1 + n) % n; }

 protected:
  // Rounds values that are about to be sent to the wire format (nothing for float32).
  void toWire(float* values, size_t n) const;
  int n_;
  AllReduceDtype dtype_ = AllReduceDtype::Float32;
  SpinBarrier barrier_;
  std::vector<float*> slots_;  // each participant's buffer for the current call
};

// Ring: reduce-scatter then all-gather; each participant sums 1/N of the buffer per step.
class RingAllReduce : public AllReduce {
 public:
  using AllReduce::AllReduce;
  std::string name() const override { return "ring"; }
  void allReduce(int rank, std::span<float> data) override;
  bool reduceScatter(int rank, std::span<float> data) override;
  bool scatters() const override { return true; }
  bool checksLocalValues() const override { return n_ > 1; }
  bool localFinite(int rank) const override;
  void beginStep(int rank) override;

 private:
  // Non-finite values seen this step, each written only by its own participant's thread: in its own
  // buffer (ownBad_), and in its predecessor's chunk it read untouched in the first step (prevBad_).
  std::vector<uint8_t> ownBad_ = std::vector<uint8_t>(static_cast<size_t>(n_), 0);
  std::vector<uint8_t> prevBad_ = std::vector<uint8_t>(static_cast<size_t>(n_), 0);
  // Reduce-scatter's n-1 steps; returns the predecessor's buffer.
  const float* scatter(int rank, std::span<float> data);
};

// Replica 0 sums every buffer, then everybody copies from it.
class ReduceToOneAllReduce : public AllReduce {
 public:
  using AllReduce::AllReduce;
  std::string name() const override { return "reduce-to-one"; }
  void allReduce(int rank, std::span<float> data) override;
};

// name: ring | reduce-to-one. Throws UserError otherwise.
std::unique_ptr<AllReduce> makeAllReduce(AllReduceAlgo algo, int participants);

}  // namespace ml
