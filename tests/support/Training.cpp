// The tests' training loop (Training.h).
#include "support/Training.h"

#include <gtest/gtest.h>

#include <span>

#include "train/Trainer.h"

namespace mltest {

Trained train(ml::MirroredStrategy& s, const ml::Dataset& data, int64_t B, int steps, int accumulate,
              const TrainOptions& options) {
  const auto order = ml::epochOrder(data.size, options.orderSeed, 1);
  Trained t;
  for (int k = 0; k < steps; ++k) {
    const auto idx = std::span<const int64_t>(order).subspan(static_cast<size_t>(k * B), static_cast<size_t>(B));
    const auto r = s.trainStep(data, idx, accumulate, options.lr, static_cast<uint64_t>(k + 1));
    if (options.expectFinite) {
      EXPECT_TRUE(r.finite) << "step " << k + 1;
    }
    if (options.expectFullBatch) {
      EXPECT_EQ(r.samples, B) << "step " << k + 1;
    }
    t.losses.push_back(r.lossSum / static_cast<double>(r.samples));
    t.steps.push_back(r);
    if (options.checkReplicas) {
      t.finalChecksums = s.checksums();
      const auto& sums = t.finalChecksums;
      for (size_t i = 1; i < sums.size(); ++i) EXPECT_EQ(sums[i], sums[0]) << "replica " << i << " after step " << k + 1;
      t.checksums.push_back(sums[0]);
    }
  }
  // Without the per-step check, the checksums are taken once (with several workers, a collective
  // that every worker makes at the same point).
  if (!options.checkReplicas) t.finalChecksums = s.checksums();
  auto p = s.model(0).params();
  t.weights.assign(p.begin(), p.end());
  t.allReduce = s.allReducePath();
  return t;
}

}  // namespace mltest
