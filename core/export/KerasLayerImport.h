// One Keras layer's configuration (an entry of config.json's "layers") as Mirrorlab's layer spec,
// for KerasImport.cpp. A class or a setting Mirrorlab lacks is refused with the layer's position.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "nn/Specs.h"

namespace ml {

// "layer 3 'dense_1' (Dense)" in messages, after "Keras model 'FILE': ".
struct KerasLayerPlace {
  std::string file;
  size_t position = 0;  // 1-based, as model.layers[position - 1] (the InputLayer not counted)
  std::string name, cls;
  std::string text() const;
  [[noreturn]] void refuse(const std::string& problem, const std::string& fix) const;
};

struct ImportedLayer {
  LayerSpec spec;
  std::string weightsGroup;  // Keras' snake-case class name, before the per-class number ("dense", "re_lu")
  // The Keras axis argument of a BatchNormalization or a softmax (null for other layers): Mirrorlab
  // normalises the last axis and takes the softmax over the whole sample, which KerasImport.cpp
  // checks against the built model's shapes.
  nlohmann::json axis;
};

// Throws UserError through place.refuse. `policy` gathers the layers' dtype policy name
// ("float32", "mixed_bfloat16"...): the first one seen is kept, a different later one is refused.
ImportedLayer importLayer(const nlohmann::json& layer, const KerasLayerPlace& place, std::string& policy);

// The name of a dtype policy in Keras' config forms ("float32" or {"class_name": "DTypePolicy",
// "config": {"name": ...}}); "" when absent.
std::string policyName(const nlohmann::json& dtype);

}  // namespace ml
