// A project file's fields in the words of the studio's screens: messages name the screen and the
// field a user sees ("Training screen › Batch size"), then the key for people editing the file by
// hand ("(batch_size in the file's training section)"), never a bare dotted JSON path. At the root
// of core/ so that every layer (nn/, data/, train/...) words its messages the same way.
#pragma once
#include <cstddef>
#include <string>

namespace ml {

// path: a JSON path as the reader walks it ("training.batch_size", "model.layers[2].units",
// "training.optimizer.epsilon", "" for the top level). Unknown paths still get the section and key
// in words.
std::string fieldInWords(const std::string& path);

// A layer as the Model screen lists it (position from 1, its name, its type), then where it sits in
// the file: "Model screen › layer 3 'dense_2' (Dense) (entry 3 of layers in the file's model section)".
// index counts from 0; an empty name or type is left out.
std::string layerInWords(size_t index, const std::string& name, const std::string& type);

// The layer as the Model screen lists it, without the file's words: "Model screen › layer 3 'dense_2' (Dense)",
// for messages about its shapes rather than one of its keys.
std::string layerOnScreen(size_t index, const std::string& name, const std::string& type);

// One argument of that layer as the layer panel labels it, then its key:
// "Model screen › layer 3 'dense_2' (Dense) › Units (units of entry 3 of layers in the file's model section)".
std::string layerArgInWords(size_t index, const std::string& name, const std::string& type, const std::string& key);

// A layer argument's label in the layer panel: "kernel_size" -> "Kernel size".
std::string argLabel(const std::string& key);

}  // namespace ml
