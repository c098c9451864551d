// Min/max-per-column decimation. The streaming form keeps buckets of equal key width; when the
// series grows past 2 x columns buckets, neighbours merge (the width doubles), so the work per
// point stays O(1) amortised and the output never exceeds ~8 x columns points.
#include "charts/Decimator.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mlui {

namespace {

struct Column {
  long index;
  XY first, min, max, last;
};

Column startColumn(long index, XY p) { return {index, p, p, p, p}; }

void extend(Column& c, XY p) {
  if (p.y < c.min.y) c.min = p;
  if (p.y > c.max.y) c.max = p;
  c.last = p;
}

// The column's points in key order (arrival order on ties), without repeats.
void emit(const Column& c, std::vector<XY>& out) {
  XY pts[4] = {c.first, c.min, c.max, c.last};
  std::stable_sort(pts, pts + 4, [](const XY& a, const XY& b) { return a.x < b.x; });
  const size_t start = out.size();
  for (const XY& p : pts)
    if (std::find(out.begin() + static_cast<std::ptrdiff_t>(start), out.end(), p) == out.end()) out.push_back(p);
}

}  // namespace

std::vector<XY> minMaxPerColumn(std::span<const double> keys, std::span<const double> values, double lo, double hi, int columns) {
  std::vector<XY> out;
  if (columns <= 0 || !(hi > lo)) return out;
  const size_t n = std::min(keys.size(), values.size());
  const double perKey = columns / (hi - lo);
  bool open = false;
  Column col{};
  for (size_t i = 0; i < n; ++i) {
    if (!(keys[i] >= lo && keys[i] < hi)) continue;
    const long c = std::min<long>(columns - 1, static_cast<long>((keys[i] - lo) * perKey));
    const XY p{keys[i], values[i]};
    if (open && c == col.index) {
      extend(col, p);
      continue;
    }
    if (open) emit(col, out);
    col = startColumn(c, p);
    open = true;
  }
  if (open) emit(col, out);
  return out;
}

// ---- streaming ------------------------------------------------------------------------------

StreamingDecimator::StreamingDecimator(int columns) : columns_(std::max(1, columns)) {}

void StreamingDecimator::clear() {
  raw_.clear();
  buckets_.clear();
  out_.clear();
  width_ = 0;
  lastBucketOut_ = 0;
  firstChanged_ = 0;
  rebuilt_ = true;
}

void StreamingDecimator::setColumns(int columns) {
  columns = std::max(1, columns);
  if (columns == columns_) return;
  columns_ = columns;
  std::vector<XY> raw = std::move(raw_);
  clear();
  for (const XY& p : raw) add(p.x, p.y);
  rebuilt_ = true;
  firstChanged_ = 0;
}

void StreamingDecimator::markChanged(size_t from) { firstChanged_ = std::min(firstChanged_, from); }

void StreamingDecimator::takeChanges() {
  firstChanged_ = out_.size();
  rebuilt_ = false;
}

void StreamingDecimator::emitBucket(const Bucket& b) { emit(Column{0, b.first, b.min, b.max, b.last}, out_); }

void StreamingDecimator::rebuildOutput() {
  out_.clear();
  for (const Bucket& b : buckets_) {
    lastBucketOut_ = out_.size();
    emitBucket(b);
  }
  rebuilt_ = true;
  firstChanged_ = 0;
}

void StreamingDecimator::add(double x, double y) {
  const XY p{x, y};
  raw_.push_back(p);
  if (buckets_.empty()) {
    if (raw_.size() <= 2 * static_cast<size_t>(columns_)) {
      out_.push_back(p);
      markChanged(out_.size() - 1);
      return;
    }
    // Long enough to decimate: columns_ buckets over the span so far, growing from there.
    origin_ = raw_.front().x;
    width_ = std::max((x - origin_) / columns_, std::numeric_limits<double>::min() * 1e10);
    out_.clear();
    lastBucketOut_ = 0;
    for (const XY& q : raw_) addToBuckets(q);
    rebuildOutput();
    return;
  }
  addToBuckets(p);
}

void StreamingDecimator::addToBuckets(XY p) {
  auto column = [&] { return static_cast<long>(std::floor((p.x - origin_) / width_)); };
  long c = column();
  while (c >= 2L * columns_) {  // too many columns: merge neighbours, double the width
    std::vector<Bucket> merged;
    merged.reserve(buckets_.size() / 2 + 1);
    for (const Bucket& b : buckets_) {
      const long mc = b.index / 2;
      if (!merged.empty() && merged.back().index == mc) {
        Bucket& m = merged.back();
        if (b.min.y < m.min.y) m.min = b.min;
        if (b.max.y > m.max.y) m.max = b.max;
        m.last = b.last;
      } else {
        merged.push_back({mc, b.first, b.min, b.max, b.last});
      }
    }
    buckets_ = std::move(merged);
    width_ *= 2;
    c = column();
    rebuildOutput();
  }
  if (!buckets_.empty() && buckets_.back().index == c) {
    Bucket& b = buckets_.back();
    if (p.y < b.min.y) b.min = p;
    if (p.y > b.max.y) b.max = p;
    b.last = p;
  } else {
    buckets_.push_back({c, p, p, p, p});
    lastBucketOut_ = out_.size();
  }
  if (out_.size() < lastBucketOut_) lastBucketOut_ = out_.size();
  out_.resize(lastBucketOut_);
  emitBucket(buckets_.back());
  markChanged(lastBucketOut_);
}

}  // namespace mlui
