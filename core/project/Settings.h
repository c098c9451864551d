// The typed settings of a project read from text, once: the project file, the command line and the
// studio's fields parse here, and a bad value is refused with the project reader's message,
// "<source>: <field> is 'x' (allowed: ...)", naming the field (a lesson's experiments use the same
// parsers below, refused with the lesson's own field paths). Nothing below project/ sees the text.
#pragma once
#include <string>

#include "backend/DeviceList.h"
#include "data/DataSpec.h"
#include "distribute/AllReduce.h"
#include "distribute/Faults.h"
#include "nn/Loss.h"
#include "nn/Precision.h"
#include "nn/Specs.h"
#include "project/LrScaling.h"

namespace ml {

// Throws UserError "<source>: <field in words> is '<text>' (allowed: <allowed>)" for field.
[[noreturn]] void refuseSetting(const std::string& source, const std::string& field, const std::string& text,
                                const std::string& allowed);

// training.precision: float32 | mixed_bfloat16 | mixed_float16.
Precision precisionSetting(const std::string& text, const std::string& source);
// training.loss, Keras' names ("mse" too); refused as "<source>: <field>: unknown loss '<text>' (allowed: ...)".
LossKind lossSetting(const std::string& text, const std::string& source);
// training.lr_scaling: none | linear | sqrt.
LrRule lrRuleSetting(const std::string& text, const std::string& source);
// One of training.metrics, checked: kept as text, since what "accuracy" means depends on the loss
// (nn/Loss.h, metricFor); refused as "<source>: <field>: unknown metric '<text>' (allowed: ...)".
std::string metricSetting(const std::string& text, const std::string& source);
// data.kind: fashion-mnist | idx | csv | spirals | blobs.
DataKind dataKindSetting(const std::string& text, const std::string& source);
// training.optimizer.name: sgd | adam | rmsprop.
OptimizerKind optimizerSetting(const std::string& text, const std::string& source);
// distribute.devices: cpu:N | gpu:0,1 | gpu:0x4 (backend/DeviceList.h), the list's own message after the field.
DeviceList devicesSetting(const std::string& text, const std::string& source);
// distribute.allreduce: ring | reduce-to-one | nccl | hierarchical | mpi.
AllReduceAlgo allReduceSetting(const std::string& text, const std::string& source);
// distribute.allreduce_dtype: float32 | bfloat16.
AllReduceDtype allReduceDtypeSetting(const std::string& text, const std::string& source);
// One of distribute.faults (distribute/Faults.h): its syntax; the devices are checked when the run is planned.
Fault faultSetting(const std::string& text, const std::string& source);

}  // namespace ml
