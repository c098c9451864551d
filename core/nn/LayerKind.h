// The layer registry: one entry per layer kind holding everything that differs between kinds (its
// names, its example arguments, the factory, its line in the summary, its weights' names, how each
// export format and each code generator writes it, whether the GPU plugin runs it). Project files,
// the studio, the exporters, the generators and the GPU backend read the entry and switch on no
// type name. A hook left null means the format cannot express the kind: it refuses the layer by name.
// The hooks speak through the small interfaces below, so nn/ links no format library.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "Error.h"
#include "nn/Layer.h"
#include "nn/LayerSpecs.h"
#include "nn/Spatial.h"

namespace ml {

// A layer's place in the model, for its messages: position (from 0), name and type.
struct LayerPlace {
  size_t index = 0;
  std::string name;
  std::string type;
  std::string layer() const;                          // the layer, for a message about it as a whole
  std::string arg(std::string_view key) const;        // one of its arguments
  std::string path(std::string_view key = {}) const;  // its field: "model.layers[2]", "model.layers[2].units"
  // A refusal of one of its arguments: "<the argument in words><rest>", carrying its path.
  UserError argError(std::string_view key, const std::string& rest) const;
};

// One array of a layer's slice of the flat buffer, in Keras' order and with Keras' names.
struct WeightArray {
  std::string name;    // kernel, bias, gamma, beta, moving_mean, moving_variance
  Shape shape;         // kernel (in, out) for Dense, (kh, kw, in, filters) for Conv2D
  int64_t offset = 0;  // floats from the start of the layer's slice
  bool trainable = true;
};

// ---- ONNX: the graph an exporter builds, one running tensor that each node takes and replaces ----
struct OnnxAttr {
  std::string name;
  std::variant<int64_t, float, std::vector<int64_t>> value;
};
class OnnxGraph {
 public:
  virtual ~OnnxGraph() = default;
  // Images are channels-last between layers, as in Keras; ONNX's Conv, pooling and
  // BatchNormalization work channels-first. These transpose the running tensor when it is not in
  // that layout already (`at` prefixes the Transpose's name).
  virtual void channelsFirst(const std::string& at) = 0;
  virtual void channelsLast(const std::string& at) = 0;
  // The running tensor keeps no image layout (GlobalAveragePool then Flatten gives (batch, c)).
  virtual void layoutGone() = 0;
  // Appends op on the running tensor (then the extra inputs); its output becomes the running tensor.
  virtual void node(const std::string& op, const std::string& name, const std::vector<std::string>& extraInputs = {},
                    const std::vector<OnnxAttr>& attrs = {}) = 0;
  // Constant inputs (initializers): float32 tensors and int64 vectors.
  virtual void floats(const std::string& name, const std::vector<int64_t>& dims, const float* data) = 0;
  virtual void ints(const std::string& name, const std::vector<int64_t>& values) = 0;
};
// An activation as ONNX ops after a layer named prefix whose per-sample output has this shape
// (Mirrorlab's softmax spans the whole sample: flattened, Softmax(axis 1), reshaped back).
void onnxActivation(OnnxGraph& g, Act act, const std::string& prefix, const Shape& shape);
// A Conv's or a pool's kernel_shape, strides and (same) pads: TensorFlow puts the odd padding row
// or column at the bottom and right, so pads are [top, left, bottom, right].
std::vector<OnnxAttr> onnxWindow(const Window& w, const Geometry& g);

// ---- Keras: the layer's class and config (the .keras archive, Keras import, the TF program) ----
using KerasValue = std::variant<std::nullptr_t, bool, int64_t, double, std::string, std::vector<int64_t>, Initializer>;
struct KerasEntry {
  std::string key;
  KerasValue value;
};
// How Keras' axis argument is checked against the built model on import.
enum class KerasAxis {
  None,
  LastAxis,  // Mirrorlab normalises the last axis only (BatchNormalization)
  Softmax    // a softmax spans Mirrorlab's whole sample
};
// Another Keras class read as this kind, with fixed arguments (ReLU as Activation("relu")).
struct KerasAlias {
  std::string_view cls;
  LayerArgs args;
  std::vector<KerasEntry> fixed;  // config keys that must hold these values (or be absent)
};
struct KerasForm {
  std::string_view cls;  // Keras 3's class; empty: Keras has no equivalent, every Keras export refuses it
  // Config keys Keras writes that Mirrorlab does not vary (data_format "channels_last"): written
  // on export, and on import they must hold that value or be absent.
  std::vector<KerasEntry> fixed;
  std::vector<std::pair<std::string_view, std::string_view>> renamed;  // {an older Keras' key, the argument}
  std::vector<KerasAlias> aliases;
  std::vector<std::string_view> ignored;  // keys import passes over whatever they hold
  KerasAxis axis = KerasAxis::None;
  // When set, writes the class and config in place of cls + the arguments + fixed.
  void (*write)(const Layer& layer, std::string& cls, std::vector<KerasEntry>& config) = nullptr;
};

// ---- The generated programs ----
// Python literals the generators and the hooks write.
std::string pyStr(const std::string& s);  // a double-quoted Python string literal
std::string pyNum(double v);              // shortest round-trip float literal ("0.001", "1e-07")
std::string pyInt(int64_t v);
std::string pyBool(bool b);
std::string pyShape(const Shape& s);  // "(28, 28)", "(2,)"

// What the TensorFlow program's hook writes a layer with.
struct TfContext {
  size_t index = 0;      // the layer's position (Dropout seeds each layer apart)
  std::string dtypeArg;  // ", dtype=\"float32\"" for a mixed model's output layer, else ""
  std::string nameArg;   // ", name=\"dense\"" when Keras takes the layer's name as it is, else ""
};
// Python the PyTorch program defines once when a layer's module needs it.
enum TorchHelper : unsigned {
  kTorchSpatial = 1,    // ChannelsLast, conv2d(), pool2d(), GlobalAveragePooling2D, Reshape
  kTorchBatchNorm = 2,  // KerasBatchNorm
};

struct LayerKind {
  std::string_view type;  // the project file's and Mirrorlab's name: "Dense"
  std::string_view help;  // one line for the palette
  std::string_view icon;  // resources/icons/<icon>.svg; empty: the generic layer icon
  LayerArgs example;      // what the palette adds: the defaults and typical required values
  Shape exampleInput;     // a sample shape the example builds on (tests walk every kind with it)
  bool gpu = false;       // the CUDA plugin has kernels for it; else GPU runs refuse it by name
  // Checks the arguments (UserError naming the argument through place) and makes the layer.
  std::unique_ptr<Layer> (*make)(const LayerArgs& args, const LayerPlace& place) = nullptr;
  // The Model screen's short description of the arguments: "128, relu".
  std::string (*describe)(const LayerArgs& args) = nullptr;
  // The layer's weights in Keras' order; null for a kind without weights.
  std::vector<WeightArray> (*weights)(const Layer& layer) = nullptr;
  KerasForm keras;
  void (*onnx)(const Layer& layer, OnnxGraph& g) = nullptr;
  // The TensorFlow program's tf.keras layer for these arguments (args may differ from the
  // layer's own: a mixed model's last activation moves to a layer of its own).
  std::string (*tf)(const LayerArgs& args, const Layer& layer, const TfContext& c) = nullptr;
  // The PyTorch program's nn.Module(s) for the layer without its activation, which the generator
  // adds (or folds into the loss); "" when the activation is all there is.
  std::string (*torch)(const LayerArgs& args, const Layer& layer) = nullptr;
  unsigned torchHelpers = 0;  // TorchHelper bits
};

// Every kind, in the palette's order (LayerArgs' alternatives).
const std::vector<const LayerKind*>& layerKinds();
// By the file's type name; null when there is none.
const LayerKind* findLayerKind(std::string_view type);
// "Dense, Activation, ...": for messages.
std::string layerTypeNames();
// Builds a layer from its spec through its kind's entry (index: its position, for messages). The
// layer's args() point into spec, which must outlive it (Sequential keeps its spec).
std::unique_ptr<Layer> makeLayer(const LayerSpec& spec, size_t index);
// Keras' generated layer name for a type (to_snake_case): "MaxPooling2D" -> "max_pooling2d",
// "BatchNormalization" -> "batch_normalization", "Conv2D" -> "conv2d".
std::string kerasLayerName(std::string_view type);
// The names the model gives its layers: the given ones, and Keras' generated ones (dense, dense_1,
// ...) for the empty ones, skipping any name given elsewhere. types and names run in layer order.
std::vector<std::string> layerNames(const std::vector<std::string>& types, const std::vector<std::string>& names);
// The Model screen's one-line description of a layer's arguments.
std::string describeLayer(const LayerArgs& args);

// For the kinds' own files: the checks their factories share (each throws UserError through place).
void requirePositive(const LayerPlace& place, const char* key, int64_t v);
void requireWindow(const LayerPlace& place, const char* key, const Pair& p);
void requireInitializer(const LayerPlace& place, const char* key, const Initializer& init);
std::string pairText(const Pair& p);  // "3x3"

}  // namespace ml
