// The format writers behind exportModel (ModelExport.cpp). Each returns the file's bytes, which
// exportModel writes through a temporary file and a rename; each throws UserError for what a user
// can fix.
#pragma once
#include <string>
#include <vector>

#include "export/ModelExport.h"

namespace ml {

inline constexpr int kOnnxOpset = 13;     // Gemm, Softmax(axis) and Flatten as every runtime reads them
inline constexpr int kOnnxIrVersion = 7;  // the IR version that goes with opset 13

// The serialized ModelProto, already passed through the ONNX checker and shape inference.
std::string onnxModelBytes(const std::vector<ExportLayer>& layers, const Shape& input, const Shape& output,
                           const ExportInfo& info);
// The bytes of an HDF5 file in Keras 3's .weights.h5 layout for a Sequential model; `file` names
// the target in messages. With an optimizer: its fresh variables too (the .keras archive's).
std::string kerasWeightsBytes(const std::vector<ExportLayer>& layers, const std::string& file,
                              const OptimizerSpec* optimizer = nullptr);
// The bytes of a Keras 3 .keras archive (configuration, weights, metadata) of the Sequential model.
std::string kerasArchiveBytes(const std::vector<ExportLayer>& layers, const Shape& input, const ExportInfo& info,
                              const std::string& file);
// The bytes of the PyTorch weights .npz (see TorchExport.cpp for the names).
std::string torchWeightsBytes(const Sequential& model);

}  // namespace ml
