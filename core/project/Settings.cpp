// Typed settings from text, each refused with the field named (see Settings.h).
#include "project/Settings.h"

#include <optional>

#include "Error.h"
#include "Field.h"
#include "Limits.h"

namespace ml {

void refuseSetting(const std::string& source, const std::string& field, const std::string& text, const std::string& allowed) {
  throw UserError(source + ": " + fieldInWords(field) + " is '" + clipText(text, 40) + "' (allowed: " + allowed + ")", field);
}

namespace {
// The value a name gave, or the refusal of `text` for `field`.
template <typename T>
T accepted(const std::optional<T>& v, const std::string& source, const char* field, const std::string& text,
           const char* allowed) {
  if (!v) refuseSetting(source, field, text, allowed);
  return *v;
}

// The refusal of a text that a lower layer's parser gave, with the source and the field before it.
[[noreturn]] void refuseParsed(const UserError& e, const std::string& source, const char* field) {
  throw UserError(source + ": " + fieldInWords(field) + ": " + e.what(), field);
}
}  // namespace

Precision precisionSetting(const std::string& text, const std::string& source) {
  return accepted(parsePrecision(text), source, "training.precision", text, kPrecisionNames);
}

LossKind lossSetting(const std::string& text, const std::string& source) {
  const auto k = parseLossKind(text);
  if (!k)
    throw UserError(source + ": " + fieldInWords("training.loss") + ": unknown loss '" + text + "' (allowed: " + kLossNames + ")",
                    "training.loss");
  return *k;
}

LrRule lrRuleSetting(const std::string& text, const std::string& source) {
  return accepted(parseLrRule(text), source, "training.lr_scaling", text, kLrRuleNames);
}

std::string metricSetting(const std::string& text, const std::string& source) {
  if (!metricNamed(text))
    throw UserError(source + ": " + fieldInWords("training.metrics") + ": unknown metric '" + clipText(text, 40) +
                        "' (allowed: " + kMetricNames + ")",
                    "training.metrics");
  return text;
}

DataKind dataKindSetting(const std::string& text, const std::string& source) {
  return accepted(dataKindNamed(text), source, "data.kind", text, kDataKindNames);
}

OptimizerKind optimizerSetting(const std::string& text, const std::string& source) {
  return accepted(optimizerKindNamed(text), source, "training.optimizer.name", text, kOptimizerNames);
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
    refuseParsed(e, source, field.c_str());
  }
}

AllReduceAlgo allReduceSetting(const std::string& text, const std::string& source) {
  return accepted(allReduceAlgoNamed(text), source, "distribute.allreduce", text, kAllReduceAlgoNames);
}

AllReduceDtype allReduceDtypeSetting(const std::string& text, const std::string& source) {
  return accepted(allReduceDtypeNamed(text), source, "distribute.allreduce_dtype", text, kAllReduceDtypeNames);
}

Fault faultSetting(const std::string& text, const std::string& source) {
  try {
    return parseFault(text);
  } catch (const UserError& e) {
    refuseParsed(e, source, "distribute.faults");
  }
}

}  // namespace ml
