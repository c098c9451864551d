// Long series drawn at the chart's pixel width: min/max per pixel column, as oscilloscope views
// and PlotJuggler do, so a 100,000-step curve costs what a 400-point one does and no spike is lost.
// Plain C++, no Qt. Two forms: a one-shot function over a whole series, and a streaming decimator
// that appends in O(1) and says which tail of its output changed (so a chart appends, not rebuilds).
#pragma once
#include <cstddef>
#include <span>
#include <vector>

namespace mlui {

struct XY {
  double x, y;
  bool operator==(const XY&) const = default;
};

// Keys ascending. Splits [lo, hi) into `columns` equal columns; for each column keeps the first
// point, its minimum and maximum, and the last point, in key order (duplicates removed), so the
// extremes of every column and the line's ends are exact. Points outside [lo, hi) are dropped.
std::vector<XY> minMaxPerColumn(std::span<const double> keys, std::span<const double> values, double lo, double hi, int columns);

class StreamingDecimator {
 public:
  // Keeps between `columns` and 2 x `columns` buckets of equal key width (at most 4 points each);
  // below 2 x `columns` points it keeps them all.
  explicit StreamingDecimator(int columns = 400);
  void setColumns(int columns);  // rebuilds from the raw points it was given
  int columns() const { return columns_; }
  // Keys must not decrease.
  void add(double x, double y);
  void clear();

  // The decimated series, in key order.
  const std::vector<XY>& points() const { return out_; }
  // The first index of points() that changed since the last takeChanges(); points().size() when
  // nothing did. rebuilt(): everything changed (the buckets doubled their width).
  size_t firstChanged() const { return firstChanged_; }
  bool rebuilt() const { return rebuilt_; }
  void takeChanges();
  size_t rawCount() const { return raw_.size(); }
  double bucketWidth() const { return width_; }

 private:
  struct Bucket {
    long index;  // column number: floor((x - origin) / width)
    XY first, min, max, last;
  };
  void addToBuckets(XY p);
  void emitBucket(const Bucket& b);
  void rebuildOutput();
  void markChanged(size_t from);

  int columns_;
  std::vector<XY> raw_;          // every point: a resize or a new width rebuilds from them
  std::vector<Bucket> buckets_;  // empty while the series is short
  double origin_ = 0, width_ = 0;
  std::vector<XY> out_;
  size_t lastBucketOut_ = 0;  // where the last bucket's points start in out_
  size_t firstChanged_ = 0;
  bool rebuilt_ = true;
};

}  // namespace mlui
