// Synthetic teaching sets: interleaved spirals and Gaussian blobs, deterministic by seed.
#pragma once
#include <cstdint>

#include "data/Dataset.h"

namespace ml {

// `classes` spiral arms in 2-D, `samples` points in all, angle noise `noise`.
Dataset makeSpirals(int64_t samples, int classes, double noise, uint64_t seed);
// `classes` isotropic Gaussian clusters in `features` dimensions with standard deviation `noise`.
Dataset makeBlobs(int64_t samples, int classes, int features, double noise, uint64_t seed);

}  // namespace ml
