// Run comparison arithmetic; see RunCompare.h.
#include "store/RunCompare.h"
#include "JsonFile.h"

#include <set>

namespace ml {
namespace {

void flattenInto(const nlohmann::json& j, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (j.is_object() && !j.empty()) {
    for (auto& [k, v] : j.items()) flattenInto(v, prefix.empty() ? k : prefix + "." + k, out);
    return;
  }
  out[prefix.empty() ? std::string("(value)") : prefix] = j.is_string() ? j.get<std::string>() : j.dump();
}

}  // namespace

std::map<std::string, std::string> flattenJson(const nlohmann::json& j) {
  std::map<std::string, std::string> out;
  flattenInto(j, "", out);
  return out;
}

std::vector<ConfigDiffRow> configDiff(const std::vector<std::string>& configJsons) {
  std::vector<std::map<std::string, std::string>> flat;
  std::set<std::string> keys;
  for (const auto& text : configJsons) {
    auto j = parseJsonOrDiscarded(text);
    flat.push_back(j.is_discarded() ? std::map<std::string, std::string>{} : flattenJson(j));
    for (auto& [k, v] : flat.back()) keys.insert(k);
  }
  std::vector<ConfigDiffRow> rows;
  for (const auto& key : keys) {
    ConfigDiffRow row{key, {}};
    for (const auto& f : flat) {
      auto it = f.find(key);
      row.values.push_back(it == f.end() ? std::nullopt : std::optional<std::string>(it->second));
    }
    bool same = true;
    for (const auto& v : row.values) same &= (v == row.values.front());
    if (!same) rows.push_back(std::move(row));
  }
  return rows;
}

bool metricHigherIsBetter(const std::string& configJson) {
  auto j = parseJsonOrDiscarded(configJson);
  if (!j.is_object() || !j.contains("loss") || !j["loss"].is_string()) return true;
  std::string loss = j["loss"].get<std::string>();
  for (const char* regression : {"mse", "mae", "squared", "absolute", "huber"})
    if (loss.find(regression) != std::string::npos) return false;
  return true;
}

std::optional<TargetReached> reachTarget(RunStore& store, const RunDetail& run, double target) {
  bool higher = metricHigherIsBetter(run.configJson);
  for (const EpochEvent& e : run.epochs) {
    if (!e.valMetric) continue;
    if (higher ? *e.valMetric >= target : *e.valMetric <= target)
      return TargetReached{e.epoch, e.wallTime, store.samplesThroughEpoch(run.summary.id, e.epoch)};
  }
  return std::nullopt;
}

}  // namespace ml
