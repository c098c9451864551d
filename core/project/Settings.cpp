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

}  // namespace ml
