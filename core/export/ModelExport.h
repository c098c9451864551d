// Exports a trained Sequential model to formats other programs read: an ONNX model (every
// runtime), PyTorch weights (.npz for the generated PyTorch program), a Keras 3 model (.keras,
// for keras.saving.load_model) and Keras 3 weights alone (.weights.h5, for model.load_weights).
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "nn/LayerKind.h"
#include "nn/Sequential.h"
#include "project/Project.h"

namespace ml {

// Keras is the whole model (a .keras archive: configuration and weights); KerasWeights the weights
// alone in Keras' layout, for a model built by other code (the generated TensorFlow program).
enum class ExportFormat { Onnx, Torch, Keras, KerasWeights };

// Throws UserError listing the formats.
ExportFormat parseExportFormat(const std::string& name);
const char* toString(ExportFormat f);       // onnx | torch | keras | keras-weights
const char* formatTitle(ExportFormat f);    // "ONNX model", ...
const char* defaultSuffix(ExportFormat f);  // .onnx | .npz | .keras | .weights.h5
// The format an output name asks for: Keras to a file ending in .weights.h5 is KerasWeights (the
// CLI's --format keras picks by the name); any other pair is returned as it is.
ExportFormat resolveFormat(ExportFormat f, const std::string& path);
// The format whose ending the path has, if any (for a --format left out, and for the fix offered
// when the two disagree).
std::optional<ExportFormat> formatOfPath(const std::string& path);
// False when the library the format needs was not found at build time (then exporting says so).
bool formatBuilt(ExportFormat f);

// What the exported file says about where it came from.
struct ExportInfo {
  std::string projectName;
  std::optional<int64_t> runId;
  std::string weightsFile;  // the .mlw the weights were read from
  std::string inputNote;    // how the inputs were prepared in training ("pixels / 255"), for users of the file
  // A model trained on standardized features: (x - mean) x scale in front of its layers (scale =
  // 1 / standard deviation, 0 for a constant column), so the exported model takes raw rows.
  // ONNX only: the PyTorch and Keras programs standardize in their own data code.
  std::vector<float> inputMean, inputScale;
  // The project's training settings: a .keras archive compiles the model with its loss, metric and
  // optimizer. Without them the archive holds an uncompiled model.
  std::optional<TrainingSpec> training;
  std::string version = MIRRORLAB_VERSION;
};

// One array of a layer's weights with its values (row-major, as Keras stores it).
struct ExportArray {
  WeightArray array;
  const float* data = nullptr;
};

// One layer as an exporter sees it: the built layer (inference form: Dropout is the identity,
// BatchNormalization uses its moving statistics), its registry entry, whose hooks write it, and its
// weights in Keras' order. Images are channels-last (height, width, channels), as Keras has them.
struct ExportLayer {
  const Layer* layer = nullptr;
  const LayerKind* kind = nullptr;
  std::string name;
  std::vector<ExportArray> weights;
};

// The layers in order; throws UserError naming the layer, its type and the format when the
// layer's kind has no hook for the format. The pointers stay valid while the model lives.
std::vector<ExportLayer> exportLayers(const Sequential& model, ExportFormat f);
// The same refusal for one layer (one made without the registry has no kind: refused too).
void checkExportable(const Layer& layer, ExportFormat f);

struct ExportResult {
  std::string path;
  int64_t bytes = 0;
  std::string description;  // one line: what the file holds
};

// Refuses a bad output path before any work (missing or unwritable folder, a folder, an ending
// that is not the format's), then writes the file atomically (temporary file + rename).
ExportResult exportModel(const Sequential& model, ExportFormat f, const std::string& path, const ExportInfo& info);
// The output-path checks alone (the studio runs them before it starts).
void checkExportPath(ExportFormat f, const std::string& path);

}  // namespace ml
