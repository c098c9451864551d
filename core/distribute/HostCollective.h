// The collectives over host memory (ring, reduce-to-one; see AllReduce.h) as the strategy uses them
// on a step: with several buckets they start during backward, either on a communication thread per
// replica (overlapping the rest of backward, when every replica can have a spare core) or on the
// replica's own thread between layers; with one bucket the replica reduces the whole buffer after
// backward.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "backend/Collective.h"
#include "distribute/AllReduce.h"

namespace ml {

class HostCollective : public Collective {
 public:
  enum class Mode { Whole, Threads, Inline };
  // grads(r): replica r's flat gradient buffer. spins: the strategy's spin budget.
  HostCollective(std::unique_ptr<AllReduce> algorithm, std::function<std::span<float>(int)> grads,
                 std::vector<GradBucket> buckets, Mode mode, int spins);
  ~HostCollective() override;

  std::string name() const override { return algo_->name(); }
  std::string describe() const override { return algo_->describe(); }
  std::string threadNote() const override;
  void beginStep(int rank) override;
  void bucketsReady(int rank, int upTo) override;
  void finish(int rank) override;
  double inlineSeconds(int rank) const override { return slot(rank).inlineSeconds; }
  double networkSeconds(int rank) const override { return algo_->networkSeconds(rank); }
  CollectiveTraits traits() const override {
    return {algo_->scatters(), algo_->checksLocalValues(), mode_ == Mode::Threads, mode_ == Mode::Inline};
  }
  bool localFinite(int rank) const override { return algo_->localFinite(rank); }

 private:
  struct Slot {
    std::thread comm;
    std::atomic<int> ready{0};         // buckets whose gradients are complete
    std::atomic<int> reduced{0};       // buckets all-reduced
    std::atomic<uint64_t> commGen{0};  // a new step for the comm thread
    int inlineDone = 0;                // buckets reduced between layers this step
    double inlineSeconds = 0;
  };
  Slot& slot(int r) { return *slots_[static_cast<size_t>(r)]; }
  const Slot& slot(int r) const { return *slots_[static_cast<size_t>(r)]; }
  void reduce(int rank, const GradBucket& b);
  void reduceInline(int rank, int upTo);
  void commLoop(int rank);

  std::unique_ptr<AllReduce> algo_;
  std::function<std::span<float>(int)> grads_;
  std::vector<GradBucket> buckets_;
  Mode mode_;
  int spins_;
  std::vector<std::unique_ptr<Slot>> slots_;
};

}  // namespace ml
