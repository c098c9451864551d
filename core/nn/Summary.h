// model.summary() as Keras prints it, plus the memory one replica needs.
#pragma once
#include <string>

#include "nn/Sequential.h"

namespace ml {

std::string withThousands(int64_t v);
std::string formatBytes(double bytes);
// optimizerSlots: floats of optimizer state per parameter (Adam 2, SGD with momentum 1...).
std::string formatSummary(const Sequential& model, const std::string& name, int64_t perReplicaBatch, int optimizerSlots);
int optimizerSlotCount(const OptimizerSpec& spec);

}  // namespace ml
