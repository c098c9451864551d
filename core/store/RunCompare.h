// Comparing stored runs: which configuration keys differ, when each run reached a target metric,
// (speed-up and scaling efficiency: store/RunFigures.h).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/RunStore.h"

namespace ml {

// {"optimizer": {"name": "adam"}, "device_names": ["a", "b"]} ->
// {"optimizer.name": "adam", "device_names": "[\"a\",\"b\"]"}: nested objects flatten with dots,
// strings unquoted, everything else as compact JSON.
std::map<std::string, std::string> flattenJson(const nlohmann::json& j);

struct ConfigDiffRow {
  std::string key;
  std::vector<std::optional<std::string>> values;  // one per run; empty when the key is absent
};
// The keys whose values are not the same in every configuration, in key order.
std::vector<ConfigDiffRow> configDiff(const std::vector<std::string>& configJsons);

// Accuracy-like metrics improve upward; a regression run (MSE/MAE loss) reports MAE: downward.
bool metricHigherIsBetter(const std::string& configJson);

// The first epoch whose validation metric reaches target, with the wall time (since the run
// started) and the training samples it took.
struct TargetReached {
  int epoch = 0;
  double seconds = 0;
  int64_t samples = 0;
};
std::optional<TargetReached> reachTarget(RunStore& store, const RunDetail& run, double target);

}  // namespace ml
