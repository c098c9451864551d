// Finiteness checks over float buffers (divergence detection).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ml {

// True when every value is finite (no inf, no NaN): a float is non-finite exactly when its
// exponent bits are all ones, so the largest |bits| decides. An integer max vectorises freely.
inline bool allFinite(const float* p, size_t n) {
  uint32_t mx = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, p + i, sizeof b);
    b &= 0x7FFFFFFFu;
    mx = b > mx ? b : mx;
  }
  return mx < 0x7F800000u;
}

}  // namespace ml
