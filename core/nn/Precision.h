// The compute precision policy (Keras' names) and the one place where float32 values are rounded
// to bfloat16 or float16. Layers that have a low-precision path (Dense) keep float32 master weights
// and float32 accumulation; they round their inputs, weights and outputs with these functions, so
// underflow and overflow happen exactly where a GPU computing in that format would have them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ml {

class Sequential;

enum class Precision { Float32, MixedBfloat16, MixedFloat16 };

const char* toString(Precision p);  // "float32", "mixed_bfloat16", "mixed_float16"
std::optional<Precision> parsePrecision(std::string_view name);
inline constexpr const char* kPrecisionNames = "float32, mixed_bfloat16, mixed_float16";

// Keras' LossScaleOptimizer: the loss is multiplied by the scale before backward, the summed
// gradients are divided by it; a step with an inf/NaN gradient is skipped and halves the scale
// (never below 1), growthSteps finite steps in a row double it. Only float16 needs it.
struct LossScaling {
  bool enabled = false;
  double initial = 32768.0;  // 2^15, Keras' default
  int64_t growthSteps = 2000;
};

// Round to nearest, ties to even. bfloat16 keeps float32's exponent range (8 mantissa bits).
// float16: normals down to 2^-14, subnormals in steps of 2^-24 below that (half of 2^-24 and less
// becomes 0), magnitudes from 65520 up become inf. NaN stays NaN, inf stays inf.
float roundToBfloat16(float x);
float roundToFloat16(float x);
inline float roundOne(Precision p, float x) {
  return p == Precision::MixedBfloat16 ? roundToBfloat16(x) : p == Precision::MixedFloat16 ? roundToFloat16(x) : x;
}
// In place / into out (out may equal in); Float32 copies (or does nothing in place).
void roundTo(Precision p, float* values, size_t n);
void roundCopy(Precision p, const float* in, float* out, size_t n);

// Sets the compute precision of every layer of the model that has a low-precision path.
void applyPrecision(Sequential& model, Precision p);

}  // namespace ml
