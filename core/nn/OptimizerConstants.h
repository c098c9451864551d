// The per-step constants of Adam and RMSprop, computed where and in the precision Keras 3 computes
// them, so the CPU update, the CUDA plugin (and its test fake) and the generated programs agree.
// Header-only: the plugin, a separate library, includes it too.
#pragma once
#include <cmath>
#include <cstdint>

namespace ml {

// Keras' Adam.update_step: `1 - self.beta_1` is Python arithmetic on the double the user set
// (0.001 for beta_2 = 0.999), cast to float32 once; computed from the float32 beta it would be
// 0.00099998713. The bias correction is tensor arithmetic in the variable's dtype: beta ** t,
// 1 - it, sqrt and the rate all in float32.
struct AdamConstants {
  float alpha;   // lr * sqrt(1 - b2^t) / (1 - b1^t), this step's rate
  float b1, b2;  // the decay factors as float32
  float c1, c2;  // 1 - beta_1, 1 - beta_2 taken in double, then float32
};

inline AdamConstants adamConstants(float lr, double beta1, double beta2, int64_t iteration) {
  const float t = static_cast<float>(iteration), b1 = static_cast<float>(beta1), b2 = static_cast<float>(beta2);
  const float b1Power = std::pow(b1, t), b2Power = std::pow(b2, t);
  const float alpha = lr * std::sqrt(1.0f - b2Power) / (1.0f - b1Power);
  return {alpha, b1, b2, static_cast<float>(1.0 - beta1), static_cast<float>(1.0 - beta2)};
}

// Keras' RMSprop.update_step: rho * v + (1 - rho) * g^2 with rho a Python float: (1 - rho) in double.
struct RmsPropConstants {
  float rho, c;  // rho and 1 - rho as float32
};

inline RmsPropConstants rmspropConstants(double rho) { return {static_cast<float>(rho), static_cast<float>(1.0 - rho)}; }

}  // namespace ml
