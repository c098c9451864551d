// Counter-based randomness: every random number is a pure function of (seed, stream, counter), so
// dropout masks and initial weights never depend on thread scheduling or on the replica count.
#pragma once
#include <cmath>
#include <cstdint>

// The GPU plugin compiles these same functions for the device (backend/cuda/DeviceRng.h), so
// dropout masks are identical on every backend.
#if defined(__CUDACC__)
#define ML_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define ML_HOST_DEVICE inline
#endif

namespace ml {

ML_HOST_DEVICE uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Hash of several keys, order-sensitive.
ML_HOST_DEVICE uint64_t hashKeys(uint64_t a, uint64_t b, uint64_t c = 0, uint64_t d = 0) {
  return splitmix64(splitmix64(splitmix64(splitmix64(a) ^ b) ^ c) ^ d);
}

// Uniform in [0, 1) from 24 random bits.
inline float uniformFromBits(uint64_t bits) { return static_cast<float>(bits >> 40) * (1.0f / 16777216.0f); }

// A small sequential generator for initialisation and shuffling (deterministic by seed).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() { return splitmix64(state_++); }
  double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Box-Muller; one value per call keeps it simple and reproducible.
  double normal() {
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  uint64_t below(uint64_t n) { return next() % n; }

 private:
  uint64_t state_;
};

}  // namespace ml
