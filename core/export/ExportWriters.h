// The format writers behind exportModel (ModelExport.cpp). Each gets the layers in inference
// form and throws UserError for what a user can fix.
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
// Writes an HDF5 file at `file` in Keras 3's .weights.h5 layout for a Sequential model.
void writeKerasWeights(const std::vector<ExportLayer>& layers, const ExportInfo& info, const std::string& file);
// Writes the PyTorch weights as .npz at `file` (see TorchExport.cpp for the names).
void writeTorchWeights(const Sequential& model, const std::string& file);

}  // namespace ml
