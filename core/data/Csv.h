// CSV data sets: a header row, one label column chosen by name, numeric features.
#pragma once
#include <string>

#include "data/Dataset.h"

namespace ml {

// classification: labels must be non-negative integers (numClasses = max + 1); otherwise the
// label column is a regression target. standardize: features to zero mean and unit variance.
// A non-numeric cell throws UserError naming the file, row and column.
Dataset readCsv(const std::string& path, const std::string& labelColumn, bool classification, bool standardize);

}  // namespace ml
