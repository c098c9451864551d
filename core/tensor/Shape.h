// Per-sample shapes. Every activation in Mirrorlab is batch-major and contiguous: a batch of n
// samples of shape S is an (n, numel(S)) row-major matrix; the shape is kept for display.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ml {

using Shape = std::vector<int64_t>;

inline int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// "(None, 28, 28)" with the batch shown as None, like Keras.
inline std::string shapeToString(const Shape& s, bool withBatch = true) {
  std::string out = "(";
  bool first = true;
  if (withBatch) {
    out += "None";
    first = false;
  }
  for (int64_t d : s) {
    if (!first) out += ", ";
    out += std::to_string(d);
    first = false;
  }
  if (!withBatch && s.size() == 1) out += ",";
  return out + ")";
}

}  // namespace ml
