// The counter-based randomness of core/nn/Rng.h and the Dropout mask of core/nn/SimpleLayers.cpp,
// written once for host and device so that GPU dropout masks equal the CPU's bit for bit.
// Includes no CUDA header: a host test compares it with the core's own functions.
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define MLCUDA_HD __host__ __device__ __forceinline__
#else
#define MLCUDA_HD inline
#endif

namespace mlcuda {

MLCUDA_HD uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

MLCUDA_HD uint64_t hashKeys(uint64_t a, uint64_t b, uint64_t c = 0, uint64_t d = 0) {
  return splitmix64(splitmix64(splitmix64(splitmix64(a) ^ b) ^ c) ^ d);
}

// Dropout's threshold on 16 random bits, computed on the host as ml::Dropout does.
inline uint32_t dropoutThreshold(double rate) { return static_cast<uint32_t>(rate * 65536.0); }

// ml::Dropout::forward keeps element j of the row with key rowKey = hashKeys(seed ^ salt, step, id)
// when the j%4-th group of 16 bits of splitmix64(rowKey + (j - j%4)) is >= threshold.
MLCUDA_HD bool dropoutKeep(uint64_t rowKey, int64_t j, uint32_t threshold) {
  const int64_t j0 = j - (j % 4);
  const uint64_t bits = splitmix64(rowKey + static_cast<uint64_t>(j0)) >> (16 * (j - j0));
  return static_cast<uint32_t>(bits & 0xFFFF) >= threshold;
}

}  // namespace mlcuda
