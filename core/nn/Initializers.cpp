#include "nn/Initializers.h"

#include <cmath>

#include "Error.h"
#include "random/Rng.h"

namespace ml {

void validateInitializer(const std::string& name, const std::string& where) {
  for (const char* ok :
       {"glorot_uniform", "glorot_normal", "he_uniform", "he_normal", "random_normal", "random_uniform", "zeros", "ones"})
    if (name == ok) return;
  throw UserError(where + ": unknown initializer '" + name +
                  "' (allowed: glorot_uniform, glorot_normal, he_uniform, he_normal, random_normal, random_uniform, zeros, "
                  "ones)");
}

void initialize(const std::string& name, float* w, int64_t count, int64_t fanIn, int64_t fanOut, uint64_t seed) {
  Rng rng(seed);
  auto truncatedNormal = [&](double stddev) {
    // Keras' TruncatedNormal: redraw outside 2 std; its std is the variance-scaling std / .8796.
    const double s = stddev / 0.87962566103423978;
    for (int64_t i = 0; i < count; ++i) {
      double v;
      do v = rng.normal();
      while (std::fabs(v) > 2.0);
      w[i] = static_cast<float>(v * s);
    }
  };
  auto uniform = [&](double limit) {
    for (int64_t i = 0; i < count; ++i) w[i] = static_cast<float>(rng.uniform(-limit, limit));
  };
  const double fanAvg = 0.5 * static_cast<double>(fanIn + fanOut);
  if (name == "glorot_uniform")
    uniform(std::sqrt(3.0 / fanAvg));
  else if (name == "glorot_normal")
    truncatedNormal(std::sqrt(1.0 / fanAvg));
  else if (name == "he_uniform")
    uniform(std::sqrt(6.0 / static_cast<double>(fanIn)));
  else if (name == "he_normal")
    truncatedNormal(std::sqrt(2.0 / static_cast<double>(fanIn)));
  else if (name == "random_normal")  // Keras' RandomNormal(): mean 0, stddev 0.05, not truncated
    for (int64_t i = 0; i < count; ++i) w[i] = static_cast<float>(0.05 * rng.normal());
  else if (name == "random_uniform")  // Keras' RandomUniform(): from -0.05 to 0.05
    uniform(0.05);
  else if (name == "zeros")
    std::fill(w, w + count, 0.0f);
  else if (name == "ones")
    std::fill(w, w + count, 1.0f);
  else
    validateInitializer(name, "initializer");
}

}  // namespace ml
