// Typed settings from text, each refused with the field named (see Settings.h).
#include "project/Settings.h"

#include "Error.h"
#include "Field.h"
#include "Limits.h"

namespace ml {

void refuseSetting(const std::string& source, const std::string& field, const std::string& text, const std::string& allowed) {
  throw UserError(source + ": " + fieldInWords(field) + " is '" + clipText(text, 40) + "' (allowed: " + allowed + ")", field);
}

Precision precisionSetting(const std::string& text, const std::string& source) {
  const auto p = parsePrecision(text);
  if (!p) refuseSetting(source, "training.precision", text, kPrecisionNames);
  return *p;
}

LossKind lossSetting(const std::string& text, const std::string& source) {
  const auto k = parseLossKind(text);
  if (!k)
    throw UserError(source + ": " + fieldInWords("training.loss") + ": unknown loss '" + text + "' (allowed: " + kLossNames + ")",
                    "training.loss");
  return *k;
}

LrRule lrRuleSetting(const std::string& text, const std::string& source) {
  const auto r = parseLrRule(text);
  if (!r) refuseSetting(source, "training.lr_scaling", text, kLrRuleNames);
  return *r;
}

std::string metricSetting(const std::string& text, const std::string& source) {
  if (!metricNamed(text))
    throw UserError(source + ": " + fieldInWords("training.metrics") + ": unknown metric '" + clipText(text, 40) +
                        "' (allowed: " + kMetricNames + ")",
                    "training.metrics");
  return text;
}

DataKind dataKindSetting(const std::string& text, const std::string& source) {
  const auto k = dataKindNamed(text);
  if (!k) refuseSetting(source, "data.kind", text, kDataKindNames);
  return *k;
}

OptimizerKind optimizerSetting(const std::string& text, const std::string& source) {
  const auto k = optimizerKindNamed(text);
  if (!k) refuseSetting(source, "training.optimizer.name", text, kOptimizerNames);
  return *k;
}

DeviceList devicesSetting(const std::string& text, const std::string& source) {
  const std::string field = "distribute.devices";
  if (text.size() > 256)
    throw UserError(source + ": " + fieldInWords(field) + " is '" + clipText(text, 40) +
                        "': give a device list such as \"cpu:2\" or \"gpu:0,1\"",
                    field);
  try {
    return parseDevices(text);
  } catch (const UserError& e) {
    throw UserError(source + ": " + fieldInWords(field) + ": " + e.what(), field);
  }
}

AllReduceAlgo allReduceSetting(const std::string& text, const std::string& source) {
  const auto a = allReduceAlgoNamed(text);
  if (!a) refuseSetting(source, "distribute.allreduce", text, kAllReduceAlgoNames);
  return *a;
}

AllReduceDtype allReduceDtypeSetting(const std::string& text, const std::string& source) {
  const auto d = allReduceDtypeNamed(text);
  if (!d) refuseSetting(source, "distribute.allreduce_dtype", text, kAllReduceDtypeNames);
  return *d;
}

Fault faultSetting(const std::string& text, const std::string& source) {
  try {
    return parseFault(text);
  } catch (const UserError& e) {
    throw UserError(source + ": " + fieldInWords("distribute.faults") + ": " + e.what(), "distribute.faults");
  }
}

}  // namespace ml
