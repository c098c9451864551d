// PyTorch weights: the .npz the generated PyTorch program loads with --weights FILE, in the names
// and shapes WeightsNpz gives them (the file `train --save-weights FILE.npz` writes too): per Dense
// layer "<name>/kernel" (in, units) and "<name>/bias" (units,), Mirrorlab's layer names as in the
// program's comments. The program copies kernel.T into nn.Linear.weight (out, in), bias into .bias.
#include "export/ExportWriters.h"

#include "export/WeightsNpz.h"

namespace ml {

void writeTorchWeights(const Sequential& model, const std::string& file) {
  writeNpz(file, weightArrays(model), NpzCompression::Stored);  // weights barely deflate; stored reads fastest
}

}  // namespace ml
