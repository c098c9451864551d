// The geometry shared by Conv2D and the pooling layers: channels-last (height, width, channels)
// samples, a window of (kh, kw) moved by (sh, sw), "valid" or "same" padding as TensorFlow defines
// them (same: out = ceil(in / stride), the extra padding row/column at the bottom/right).
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>

#include "tensor/Shape.h"

namespace ml {

struct Window {
  int64_t kh = 1, kw = 1, sh = 1, sw = 1;
  bool same = false;
};

struct Geometry {
  int64_t h = 0, w = 0, c = 0;  // input
  int64_t oh = 0, ow = 0;       // output
  int64_t padTop = 0, padLeft = 0;
};

// Output size along one axis; 0 when the window does not fit (valid padding, k > in).
inline int64_t outSize(int64_t in, int64_t k, int64_t s, bool same) {
  if (same) return (in + s - 1) / s;
  return in >= k ? (in - k) / s + 1 : 0;
}

inline int64_t padBefore(int64_t in, int64_t out, int64_t k, int64_t s, bool same) {
  if (!same) return 0;
  const int64_t total = std::max<int64_t>((out - 1) * s + k - in, 0);
  return total / 2;
}

// Checks that input is (h, w, c) and the window leaves at least one output position; throws
// UserError naming the layer, its input shape and the fix.
Geometry spatialGeometry(const std::string& layer, const std::string& type, const Shape& input, const Window& win,
                         const char* windowWord);

}  // namespace ml
