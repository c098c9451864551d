// The typed settings of a project read from text, once: the project file, the command line and a
// lesson all parse here, and a bad value is refused with the project reader's message, "<source>:
// <field> is 'x' (allowed: ...)", naming the field. Nothing below project/ sees the text.
#pragma once
#include <string>

#include "nn/Loss.h"
#include "nn/Precision.h"

namespace ml {

// Throws UserError "<source>: <field in words> is '<text>' (allowed: <allowed>)" for field.
[[noreturn]] void refuseSetting(const std::string& source, const std::string& field, const std::string& text,
                                const std::string& allowed);

// training.precision: float32 | mixed_bfloat16 | mixed_float16.
Precision precisionSetting(const std::string& text, const std::string& source);
// training.loss, Keras' names ("mse" too); refused as "<source>: <field>: unknown loss '<text>' (allowed: ...)".
LossKind lossSetting(const std::string& text, const std::string& source);

}  // namespace ml
