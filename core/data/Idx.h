// IDX files (the MNIST format), gzip-compressed or raw. Integers are big-endian.
#pragma once
#include <string>

#include "data/Dataset.h"

namespace ml {

// Reads an images file (magic 0x00000803, uint8, N x rows x cols) and a labels file
// (magic 0x00000801, uint8, N). Pixels are scaled to [0, 1]. Validates magic numbers, dimensions,
// sizes and that the counts agree; throws UserError naming the file and the problem.
Dataset readIdxPair(const std::string& imagesPath, const std::string& labelsPath, const std::string& name);

// Where Debian's dataset-fashion-mnist package puts the files.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

}  // namespace ml
