// All-reduce over host memory between replica threads. A collective: every one of the N
// participants calls allReduce(rank, its buffer) with buffers of equal length; on return every
// buffer holds the element-wise sum, with identical bits on every replica (each element's sum
// is computed once, by one participant, then copied).
#pragma once
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "distribute/SpinBarrier.h"

namespace ml {

class AllReduce {
 public:
  explicit AllReduce(int participants);
  virtual ~AllReduce() = default;
  virtual std::string name() const = 0;
  virtual void allReduce(int rank, std::span<float> data) = 0;
  int participants() const { return n_; }

 protected:
  int n_;
  SpinBarrier barrier_;
  std::vector<float*> slots_;  // each participant's buffer for the current call
};

// Ring: reduce-scatter then all-gather; each participant sums 1/N of the buffer per step.
class RingAllReduce : public AllReduce {
 public:
  using AllReduce::AllReduce;
  std::string name() const override { return "ring"; }
  void allReduce(int rank, std::span<float> data) override;
};

// Replica 0 sums every buffer, then everybody copies from it.
class ReduceToOneAllReduce : public AllReduce {
 public:
  using AllReduce::AllReduce;
  std::string name() const override { return "reduce-to-one"; }
  void allReduce(int rank, std::span<float> data) override;
};

// name: ring | reduce-to-one. Throws UserError otherwise.
std::unique_ptr<AllReduce> makeAllReduce(const std::string& name, int participants);

}  // namespace ml
