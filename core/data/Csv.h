// CSV data sets: a header row, one label column chosen by name, numeric features.
#pragma once
#include <string>
#include <vector>

#include "data/Dataset.h"

namespace ml {

// classification: labels must be non-negative integers (numClasses = max + 1); otherwise the
// label column is a regression target. standardize: features to zero mean and unit variance.
// A non-numeric cell throws UserError naming the file, row and column.
//
// Format: the first row is the header (required); every column other than labelColumn is a
// numeric feature. Rows count from 1 with the header as row 1 (what an editor shows). Surrounding
// double quotes are stripped, CRLF endings and blank lines are accepted, a row with a different
// number of cells than the header is an error.
//
// loadData (Dataset.h) does not know the loss, so it decides classification itself: the label
// column is a class index when every label is a non-negative integer and there are at most 1000
// distinct values (looksLikeClassLabels), and a regression target otherwise. Labels above 1e6
// also count as regression: numClasses = max + 1 would give the model a million outputs.
Dataset readCsv(const std::string& path, const std::string& labelColumn, bool classification, bool standardize);

// The classification rule loadData applies to a CSV label column (see above).
bool looksLikeClassLabels(const std::vector<float>& labels);

// Per-feature z-score statistics (FeatureStats, Dataset.h): computed on the training set and
// applied to both training and test sets, so the test set is scaled exactly like the data the
// model learned from.
FeatureStats computeFeatureStats(const Dataset& d);
void applyFeatureStats(Dataset& d, const FeatureStats& stats);

// Turns a regression-read label column into class indices (numClasses = max + 1). The labels must
// pass looksLikeClassLabels.
void makeClassification(Dataset& d);

}  // namespace ml
