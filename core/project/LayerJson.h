// Layer specs to and from JSON (a project file's model.layers entries, the studio's layer form,
// a Keras config's arguments): one reader and one writer for every kind, through the arguments
// each spec struct lists (nn/LayerSpecs.h). Keys are Keras' keyword arguments.
#pragma once
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "nn/LayerKind.h"

namespace ml {

// Words one argument of the layer for a message ("... › Units (units of entry 3 ...)").
using ArgWords = std::function<std::string(std::string_view key)>;

// The kind's arguments from an object of keyword arguments: each key the kind has, typed and
// checked for its form (a whole number, a known activation...); a required one missing is a
// UserError worded through where. Keys the kind lacks are left to the caller.
LayerArgs layerArgsFromJson(const LayerKind& kind, const nlohmann::json& obj, const ArgWords& where);
// The arguments as keyword arguments: the required ones and those that differ from the default,
// or every one with all.
nlohmann::json layerArgsToJson(const LayerArgs& args, bool all = false);
// The names of the kind's arguments, in its order: "units, activation, use_bias, ...".
std::string layerArgNames(const LayerKind& kind);

// An entry of a project's model.layers: {"type": "Dense", "name": "hidden", "units": 128, ...}.
// place names the layer (its position and the name the model shows) in messages, after source.
LayerSpec layerFromJson(const nlohmann::json& entry, const LayerPlace& place, const std::string& source);
nlohmann::json layerToJson(const LayerSpec& spec);
// A spec from its type and keyword arguments as a project file gives them, for models built in
// code ({"units": 8, "activation": "relu"}); throws UserError as the file reader would.
LayerSpec makeLayerSpec(std::string_view type, const nlohmann::json& args = nlohmann::json::object(),
                        const std::string& name = "");

}  // namespace ml
