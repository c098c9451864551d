// A model's parameters as named NumPy arrays in Keras' layout, for Python programs: per Dense
// layer "<name>/kernel" (in, out) and "<name>/bias" (out,); any other layer with parameters
// "<name>/params" (flat). PyTorch's nn.Linear.weight is the kernel transposed.
#pragma once
#include <string>
#include <vector>

#include "export/NpzFile.h"
#include "nn/Sequential.h"

namespace ml {

std::vector<NpyArray> weightArrays(const Sequential& model);
void saveWeightsNpz(const Sequential& model, const std::string& path);
// Sets the model's parameters from an .npz with exactly the arrays weightArrays() names; throws
// UserError naming a missing, extra or misshapen array.
void loadWeightsNpz(Sequential& model, const std::string& path);

}  // namespace ml
