// An in-memory data set: n samples of features (float32, batch-major) and targets.
// Classification targets are class indices stored as floats (targetDim = 1);
// regression targets are targetDim values per sample.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/DataSpec.h"
#include "tensor/Shape.h"

namespace ml {

struct Dataset {
  std::string name;      // for messages and the UI ("Fashion-MNIST train")
  Shape sampleShape;     // e.g. {28, 28}, {2}, {features}
  int64_t size = 0;      // number of samples
  std::vector<float> x;  // size * numel(sampleShape)
  int64_t targetDim = 1;
  std::vector<float> y;                 // size * targetDim
  int numClasses = 0;                   // 0 for regression
  std::vector<std::string> classNames;  // optional, numClasses entries

  int64_t featureCount() const { return numel(sampleShape); }
  const float* sample(int64_t i) const { return x.data() + i * featureCount(); }
  const float* target(int64_t i) const { return y.data() + i * targetDim; }
};

// Per-feature z-score statistics (data/Csv.h computes and applies them).
struct FeatureStats {
  std::vector<double> mean;
  std::vector<double> stddev;  // 0 marks a constant column: it maps to 0
};

struct DataSplit {
  Dataset train;
  std::optional<Dataset> validation;  // the test set, or a held-out split of train
  // A standardized CSV: the statistics its features were scaled with (the training part's). An
  // exported model puts them in front of its layers so that it takes the file's raw rows.
  std::optional<FeatureStats> standardization;
};

// Reserves n floats for a data set's samples, asking the kernel for huge pages where it has them
// (Linux, transparent huge pages in madvise mode): a training step gathers its batch from rows all
// over the set, and with 4 KiB pages that copy ran at ~3 GB/s on 188 MB of Fashion-MNIST (perf: 3.3%
// of a cpu:2 step of the wide MLP, 2.5% with huge pages). Call it before the first resize; the values come later.
void reserveSamples(std::vector<float>& v, size_t n);

// Loads (or generates) what the project's data section describes. Throws UserError with a
// message that names the file or package and the fix.
DataSplit loadData(const DataSpec& spec);

// Holds out the last `share` of a shuffled copy of train as validation (keyed by seed).
DataSplit splitValidation(Dataset all, double share, uint64_t seed);

}  // namespace ml
