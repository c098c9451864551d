// The counter-based randomness of core/random/Rng.h (the same functions, compiled for the device too)
// and the Dropout mask of core/nn/SimpleLayers.cpp, so that GPU dropout masks equal the CPU's bit for bit.
// Includes no CUDA header: a host test compares it with the core's own functions.
#pragma once
#include <cstdint>

#include "random/Rng.h"

#define MLCUDA_HD ML_HOST_DEVICE

namespace mlcuda {

using ml::hashKeys;
using ml::splitmix64;

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
