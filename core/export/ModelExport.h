// Exports a trained Sequential model to formats other programs read: an ONNX model (every
// runtime), PyTorch weights (.npz for the generated PyTorch program), a Keras 3 model (.keras,
// for keras.saving.load_model) and Keras 3 weights alone (.weights.h5, for model.load_weights).
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "nn/Activations.h"
#include "nn/Layer.h"
#include "nn/Sequential.h"
#include "nn/Spatial.h"
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

// One layer as an exporter sees it (inference form: Dropout is the identity, BatchNormalization
// uses its moving statistics). Images are channels-last (height, width, channels), as Keras has them.
struct ExportLayer {
  enum class Kind {
    Dense,
    Activation,
    Flatten,
    Dropout,
    Conv2D,
    MaxPooling2D,
    AveragePooling2D,
    GlobalAveragePooling2D,
    BatchNormalization,
    Reshape
  };
  Kind kind = Kind::Dense;
  std::string name, type;         // Mirrorlab's layer name and type
  Act activation = Act::Linear;   // Dense, Conv2D and Activation
  Shape inputShape, outputShape;  // per sample
  int64_t in = 0, out = 0;        // Dense: features in and units; Conv2D: input channels and filters
  const float* kernel = nullptr;  // Dense: (in, out); Conv2D: (kh, kw, in, filters); row-major, as Keras stores it
  const float* bias = nullptr;    // Dense, Conv2D: (out), null without a bias
  Window window;                  // Conv2D and pooling: size, strides, padding
  Geometry geometry;              // Conv2D and pooling: input and output sizes, padding before
  // BatchNormalization over the last axis (channels): gamma and beta are null without scale or center.
  const float *gamma = nullptr, *beta = nullptr, *movingMean = nullptr, *movingVariance = nullptr;
  double epsilon = 0;
  nlohmann::json args;  // the layer's arguments as in the project file (initializers, rate, target_shape...)
};

// The layers in order; throws UserError naming the layer, its type and the format when a layer
// has no equivalent there. The pointers stay valid while the model lives.
std::vector<ExportLayer> exportLayers(const Sequential& model, ExportFormat f);
std::vector<ExportLayer> exportLayers(std::span<const Layer* const> layers, ExportFormat f);

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
