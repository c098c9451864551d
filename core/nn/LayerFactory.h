// Builds a layer from its project-file spec, validating its arguments (errors name the layer,
// the argument, the value and what is allowed).
#pragma once
#include <memory>
#include <vector>

#include "nn/Layer.h"
#include "nn/Specs.h"

namespace ml {

std::unique_ptr<Layer> makeLayer(const LayerSpec& spec, size_t index);
// The layer types the palette offers, with their arguments and defaults (for the studio and --help).
struct LayerKind {
  std::string type;
  nlohmann::json defaults;
  std::string help;
};
const std::vector<LayerKind>& layerKinds();
// Keras' generated layer name for a type (to_snake_case): "MaxPooling2D" -> "max_pooling2d",
// "BatchNormalization" -> "batch_normalization", "Conv2D" -> "conv2d".
std::string kerasLayerName(const std::string& type);

}  // namespace ml
