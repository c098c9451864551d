#include "distribute/AllReduce.h"

#include <algorithm>

#include "Error.h"
#include "Names.h"
#include "nn/Bf16Gemm.h"
#include "tensor/Finite.h"

namespace ml {

AllReduce::AllReduce(int participants)
    : n_(participants), barrier_(participants), slots_(static_cast<size_t>(participants), nullptr) {}

const char* toString(AllReduceDtype d) { return d == AllReduceDtype::Bfloat16 ? "bfloat16" : "float32"; }

std::optional<AllReduceDtype> allReduceDtypeNamed(const std::string& name) {
  const AllReduceDtype all[] = {AllReduceDtype::Float32, AllReduceDtype::Bfloat16};
  return fromName(name, all);
}

AllReduceDtype parseAllReduceDtype(const std::string& name) {
  if (const auto d = allReduceDtypeNamed(name)) return *d;
  throw UserError("unknown all-reduce dtype '" + name + "' (allowed: " + kAllReduceDtypeNames + ")");
}

const char* toString(AllReduceAlgo a) {
  switch (a) {
    case AllReduceAlgo::Ring: return "ring";
    case AllReduceAlgo::ReduceToOne: return "reduce-to-one";
    case AllReduceAlgo::Nccl: return "nccl";
    case AllReduceAlgo::Hierarchical: return "hierarchical";
    case AllReduceAlgo::Mpi: return "mpi";
  }
  return "ring";
}

std::optional<AllReduceAlgo> allReduceAlgoNamed(const std::string& name) {
  const AllReduceAlgo all[] = {AllReduceAlgo::Ring, AllReduceAlgo::ReduceToOne, AllReduceAlgo::Nccl, AllReduceAlgo::Hierarchical,
                               AllReduceAlgo::Mpi};
  return fromName(name, all);
}

AllReduceAlgo parseAllReduceAlgo(const std::string& name) {
  if (const auto a = allReduceAlgoNamed(name)) return *a;
  throw UserError("unknown all-reduce '" + name + "' (allowed: " + kAllReduceAlgoNames + ")");
}

void AllReduce::toWire(float* values, size_t n) const {
  if (dtype_ == AllReduceDtype::Bfloat16) bf16::roundInPlace(values, n);
}

// The host-memory algorithms, by the name a project gives: adding one is one line here.
namespace {
struct Algorithm {
  AllReduceAlgo algo;
  std::unique_ptr<AllReduce> (*make)(int participants);
};
template <typename T>
std::unique_ptr<AllReduce> make(int n) {
  return std::make_unique<T>(n);
}
constexpr Algorithm kAlgorithms[] = {{AllReduceAlgo::Ring, make<RingAllReduce>},
                                     {AllReduceAlgo::ReduceToOne, make<ReduceToOneAllReduce>}};
}  // namespace

std::unique_ptr<AllReduce> makeAllReduce(AllReduceAlgo algo, int n) {
  std::string names;
  for (const auto& a : kAlgorithms) {
    if (algo == a.algo) return a.make(n);
    names += (names.empty() ? "" : ", ") + std::string(toString(a.algo));
  }
  if (algo == AllReduceAlgo::Nccl)
    throw UserError("all-reduce 'nccl' needs GPU devices and the CUDA plugin; on CPU devices use " + names);
  throw UserError(std::string("all-reduce '") + toString(algo) + "' sums across workers; in one process use " + names);
}

namespace {
// dst[i] += src[i] over [a, b); returns whether any dst value read was inf or NaN, and with
// srcBad also whether any src value was (tensor/Finite.h's test of the exponent bits, which vectorizes).
bool addChecking(float* __restrict dst, const float* __restrict src, size_t a, size_t b, bool* srcBad) {
  int32_t bad = 0;
  if (srcBad) {
    int32_t sbad = 0;
    for (size_t i = a; i < b; ++i) {
      const float d = dst[i], s = src[i];
      bad |= nonFiniteBit(d);
      sbad |= nonFiniteBit(s);
      dst[i] = d + s;
    }
    *srcBad = sbad != 0;
  } else {
    for (size_t i = a; i < b; ++i) {
      const float d = dst[i];
      bad |= nonFiniteBit(d);
      dst[i] = d + src[i];
    }
  }
  return bad != 0;
}
}  // namespace

// Ring over shared memory. Chunk c = [c*len/n, (c+1)*len/n). Reduce-scatter step s: rank r adds
// chunk (r-1-s) mod n of its predecessor into its own; nobody writes that chunk of the
// predecessor in the same step, so a barrier between steps is all the synchronisation needed.
// After n-1 steps rank r owns the complete sum of chunk (r+1) mod n; all-gather step s: rank r
// copies chunk (r-s) mod n from its predecessor. In bfloat16, each rank rounds its buffer before
// the first step and every sum it forms (which it sends on, or owns at the end, for the
// all-gather to send): chunk c's sum is R(..R(R(x_c) + R(x_c+1)).. + R(x_c+n-1)), R rounding.
//
// Every participant's own values are read exactly once before anything is added to them: chunk c
// != r of rank r as the destination of rank r's own addition (each chunk is its destination once,
// and only rank r writes its buffer), and chunk r, which rank r never adds into, by its successor
// in the first step. Both reads check for inf/NaN, so the replica where one appeared is known
// without a pass of its own over the gradient (localFinite). In bfloat16 they see the rounded
// values, the ones that are sent (a finite float32 beyond bfloat16's range is infinite there).
const float* RingAllReduce::scatter(int rank, std::span<float> data) {
  const int n = n_;
  toWire(data.data(), data.size());
  slots_[static_cast<size_t>(rank)] = data.data();
  barrier_.arriveAndWait();
  const size_t len = data.size();
  const int prev = (rank + n - 1) % n;
  const float* pbuf = slots_[static_cast<size_t>(prev)];
  float* mine = data.data();
  for (int s = 0; s < n - 1; ++s) {
    const int c = ((rank - 1 - s) % n + n) % n;
    const size_t a = chunkBegin(len, c, n), b = chunkBegin(len, c + 1, n);
    bool srcBad = false;
    if (addChecking(mine, pbuf, a, b, s == 0 ? &srcBad : nullptr)) ownBad_[static_cast<size_t>(rank)] = 1;
    if (srcBad) prevBad_[static_cast<size_t>(rank)] = 1;
    toWire(mine + a, b - a);
    barrier_.arriveAndWait();
  }
  return pbuf;
}

void RingAllReduce::beginStep(int rank) {
  ownBad_[static_cast<size_t>(rank)] = 0;
  prevBad_[static_cast<size_t>(rank)] = 0;
}

// Read after the participant's last reduce-scatter of the step, whose closing barrier orders the
// successor's writes of prevBad_ before it; reset by each participant's next beginStep, which comes
// after every replica has finished the step.
bool RingAllReduce::localFinite(int rank) const {
  return ownBad_[static_cast<size_t>(rank)] == 0 && prevBad_[static_cast<size_t>((rank + 1) % n_)] == 0;
}

void RingAllReduce::allReduce(int rank, std::span<float> data) {
  const int n = n_;
  if (n == 1) return;
  const float* pbuf = scatter(rank, data);
  const size_t len = data.size();
  float* mine = data.data();
  for (int s = 0; s < n - 1; ++s) {
    const int c = ((rank - s) % n + n) % n;
    const size_t a = chunkBegin(len, c, n), b = chunkBegin(len, c + 1, n);
    std::copy(pbuf + a, pbuf + b, mine + a);
    barrier_.arriveAndWait();
  }
}

bool RingAllReduce::reduceScatter(int rank, std::span<float> data) {
  if (n_ > 1) scatter(rank, data);
  return true;
}

// In bfloat16: every buffer is rounded before replica 0 reads it, and the sum (float32 additions)
// before the others copy it.
void ReduceToOneAllReduce::allReduce(int rank, std::span<float> data) {
  const int n = n_;
  if (n == 1) return;
  toWire(data.data(), data.size());
  slots_[static_cast<size_t>(rank)] = data.data();
  barrier_.arriveAndWait();
  const size_t len = data.size();
  if (rank == 0) {
    float* __restrict dst = data.data();
    for (int r = 1; r < n; ++r) {
      const float* __restrict src = slots_[static_cast<size_t>(r)];
      for (size_t i = 0; i < len; ++i) dst[i] += src[i];
    }
    toWire(dst, len);
  }
  barrier_.arriveAndWait();
  if (rank != 0) std::copy(slots_[0], slots_[0] + len, data.data());
  barrier_.arriveAndWait();
}

}  // namespace ml
