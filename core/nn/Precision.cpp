// Precision names, the float16/bfloat16 rounding (bit-exact, no hardware support needed) and the
// policy's application to a model.
#include "nn/Precision.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "Names.h"
#include "nn/Bf16Gemm.h"
#include "nn/Conv2D.h"
#include "nn/Dense.h"
#include "nn/Sequential.h"

namespace ml {

const char* toString(Precision p) {
  switch (p) {
    case Precision::Float32: return "float32";
    case Precision::MixedBfloat16: return "mixed_bfloat16";
    case Precision::MixedFloat16: return "mixed_float16";
  }
  return "float32";
}

std::optional<Precision> parsePrecision(std::string_view name) {
  const Precision all[] = {Precision::Float32, Precision::MixedBfloat16, Precision::MixedFloat16};
  return fromName(name, all);
}

float roundToBfloat16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return x;  // NaN: adding the rounding bias could make it inf
  const uint32_t r = u + 0x7fffu + ((u >> 16) & 1u);
  return std::bit_cast<float>(r & 0xffff0000u);
}

float roundToFloat16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t a = u & 0x7fffffffu, sign = u & 0x80000000u;
  if (a >= 0x7f800000u) return x;  // inf, NaN
  const float ax = std::bit_cast<float>(a);
  uint32_t r;
  if (ax >= 65520.0f) {
    r = 0x7f800000u;  // 65520 is halfway between 65504 and 2^16: the tie goes to the even 2^16 = inf
  } else if (ax < 0x1p-14f) {
    // Subnormal float16: multiples of 2^-24. ax * 2^24 is exact; nearbyint rounds ties to even.
    r = std::bit_cast<uint32_t>(std::nearbyint(ax * 0x1p24f) * 0x1p-24f);
  } else {
    // Normal: keep 10 of float32's 23 mantissa bits, ties to even (a carry may bump the exponent).
    r = (a + 0xfffu + ((a >> 13) & 1u)) & ~0x1fffu;
  }
  return std::bit_cast<float>(r | sign);
}

void roundCopy(Precision p, const float* in, float* out, size_t n) {
  switch (p) {
    case Precision::Float32:
      if (in != out) std::copy(in, in + n, out);
      return;
    case Precision::MixedBfloat16:  // the same values, in Bf16Gemm's vectorized loop (the scalar one was 4x slower)
      if (in != out) std::copy(in, in + n, out);
      bf16::roundInPlace(out, n);
      return;
    case Precision::MixedFloat16:
      for (size_t i = 0; i < n; ++i) out[i] = roundToFloat16(in[i]);
      return;
  }
}

void roundTo(Precision p, float* values, size_t n) { roundCopy(p, values, values, n); }

void applyPrecision(Sequential& model, Precision p) {
  for (size_t i = 0; i < model.layerCount(); ++i)
    if (auto* d = dynamic_cast<Dense*>(&model.layer(i)))
      d->setPrecision(p);
    else if (auto* c = dynamic_cast<Conv2D*>(&model.layer(i)))
      c->setPrecision(p);
}

}  // namespace ml
