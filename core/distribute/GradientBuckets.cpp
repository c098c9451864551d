// The gradient buckets and update units of the mirrored step: which parameter ranges are reduced
// together (in backward order, so the last layers' gradients go first) and who updates what.
#include <algorithm>

#include "distribute/AllReduce.h"
#include "distribute/MirroredStrategy.h"

namespace ml {

std::vector<GradBucket> gradientBuckets(const std::vector<Sequential::ParamRange>& ranges, int64_t bucketBytes) {
  std::vector<GradBucket> buckets;
  const int64_t cap = std::max<int64_t>(1, bucketBytes / static_cast<int64_t>(sizeof(float)));
  int64_t curEnd = -1, curStart = -1;
  size_t curLayer = 0;
  for (auto it = ranges.rbegin(); it != ranges.rend(); ++it) {
    int64_t hi = it->offset + it->count;
    while (hi > it->offset) {
      if (curEnd < 0) curEnd = hi;
      const int64_t room = cap - (curEnd - hi);
      const int64_t lo = std::max(it->offset, hi - room);
      curStart = lo;
      curLayer = it->layer;
      hi = lo;
      if (curEnd - curStart >= cap) {
        buckets.push_back({curStart, curEnd - curStart, curLayer});
        curEnd = -1;
      }
    }
  }
  if (curEnd >= 0) buckets.push_back({curStart, curEnd - curStart, curLayer});
  return buckets;
}

std::vector<GradBucket> updateUnits(const std::vector<GradBucket>& buckets, int64_t paramCount, int replicas) {
  if (replicas > 1 && buckets.size() > 1) return buckets;
  return {{0, paramCount, 0}};
}

std::vector<SourceRange> unitChunks(const std::vector<GradBucket>& units, int n) {
  std::vector<SourceRange> out;
  for (const GradBucket& u : units) {
    const size_t len = static_cast<size_t>(u.count);
    for (int c = 0; c < n; ++c) {
      const size_t a = AllReduce::chunkBegin(len, c, n), b = AllReduce::chunkBegin(len, c + 1, n);
      if (a != b) out.push_back({u.offset + static_cast<int64_t>(a), static_cast<int64_t>(b - a), AllReduce::chunkOwner(c, n)});
    }
  }
  return out;
}

std::vector<GradBucket> ownedRanges(const std::vector<GradBucket>& units, int replica, int n) {
  std::vector<GradBucket> out;
  for (const SourceRange& c : unitChunks(units, n))
    if (c.from == replica) out.push_back({c.offset, c.count, 0});
  return out;
}

int64_t optimizerShare(const Sequential& model, const StrategyOptions& options, int replica) {
  const int n = options.devices.size();
  const int64_t p = model.paramCount();
  if (!options.shardOptimizer || n == 1) return p;
  const auto units = updateUnits(gradientBuckets(model.paramRanges(), options.bucketBytes), p, n);
  int64_t total = 0;
  for (const GradBucket& b : ownedRanges(units, replica, n)) total += b.count;
  return total;
}

}  // namespace ml
