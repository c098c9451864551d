// Command-line options that override a project's values, shared by train, scale and evaluate.
#pragma once
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "project/Project.h"

namespace mlcli {

struct Overrides {
  std::optional<int> epochs;
  std::optional<int64_t> batchSize, perDeviceBatch;
  std::optional<double> lr;
  std::optional<std::string> optimizer, devices, lrScaling, allreduce, dataPath;
  std::optional<uint64_t> seed;
  std::optional<double> warmupEpochs;
  std::optional<int> accumulate, threadsPerDevice;
  std::optional<int64_t> bucketKb, lrReferenceBatch;

  void addTo(CLI::App* cmd, bool training);
  void apply(ml::Project& p) const;
};

}  // namespace mlcli
