// The fixed Python of the PyTorch program (internal to core/learn): initialisers and the weights
// reader, Keras' optimizer formulas as torch.optim.Optimizer classes, and the training loop.
#pragma once
#include <string>

#include "project/Project.h"

namespace ml::codegen {

std::string torchInitPython();
// make_optimizer(params, learning_rate) and, where PyTorch's formula differs from Keras', the class it uses.
std::string torchOptimizerPython(const OptimizerSpec& o);
std::string torchTrainPython();

}  // namespace ml::codegen
