// Unlabelled inputs for prediction: an IDX images file (gzip or raw, magic 0x00000803) or a CSV
// of numeric features (a header row is skipped when its first cell is not a number).
#pragma once
#include <string>

#include "data/Dataset.h"

namespace ml {

Dataset readFeatures(const std::string& path);

}  // namespace ml
