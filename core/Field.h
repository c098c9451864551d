// A project file's fields as core/ names them: by a neutral identifier, the JSON path as the reader
// walks it ("training.batch_size", "model.layers[2].units", "" for the top level), worded by the
// front end. The CLI and the studio install the screens' words (project/ScreenWords.h); with none
// installed a field reads in the file's terms ("training.batch_size", "units of layer 3 'dense_2'
// (Dense)"). At the root of core/ so that every layer names fields the same way.
#pragma once
#include <cstddef>
#include <string>

#include "Error.h"

namespace ml {

// How messages word fields. Each default renders the identifier in the file's terms; a front end
// derives and overrides them. index counts layers from 0; an empty name or type is left out.
class FieldWords {
 public:
  virtual ~FieldWords() = default;
  // The field and where to find it: "training.batch_size".
  virtual std::string field(const std::string& path) const;
  // Where a person sets it, for "set X to ...": "training.loss".
  virtual std::string fieldPlace(const std::string& path) const;
  // The opening of a message about it, "X: ...": "training.loss".
  virtual std::string fieldHeading(const std::string& path) const;
  // The field alone, once the message has said where it is: "input_shape".
  virtual std::string fieldLabel(const std::string& path) const;
  // A layer and where it sits: "layer 3 'dense_2' (Dense)".
  virtual std::string layer(size_t index, const std::string& name, const std::string& type) const;
  // The layer alone, for messages about its shapes rather than one of its keys.
  virtual std::string layerBrief(size_t index, const std::string& name, const std::string& type) const;
  // One argument of a layer: "units of layer 3 'dense_2' (Dense)".
  virtual std::string layerArg(size_t index, const std::string& name, const std::string& type, const std::string& key) const;
  // A layer argument alone: "kernel_size".
  virtual std::string argLabel(const std::string& key) const;
  // The model's last layer, opening a message about the model's outputs: "last layer 'dense_2'".
  virtual std::string lastLayerHeading(const std::string& name) const;
  // The one-step fix that fits the model to the data, seen from the field a message is about.
  virtual std::string fitToData(const std::string& fromPath) const;
};

// Installs a front end's words (nullptr: the file's terms again). Call once at start-up, before
// any thread that words a message starts; the words must outlive every message.
void setFieldWords(const FieldWords* words);
const FieldWords& fieldWords();

// The installed words, as free functions (the calls core/ makes).
inline std::string fieldInWords(const std::string& path) { return fieldWords().field(path); }
inline std::string fieldPlace(const std::string& path) { return fieldWords().fieldPlace(path); }
inline std::string fieldHeading(const std::string& path) { return fieldWords().fieldHeading(path); }
inline std::string fieldLabel(const std::string& path) { return fieldWords().fieldLabel(path); }
inline std::string layerInWords(size_t index, const std::string& name, const std::string& type) {
  return fieldWords().layer(index, name, type);
}
inline std::string layerBrief(size_t index, const std::string& name, const std::string& type) {
  return fieldWords().layerBrief(index, name, type);
}
inline std::string layerArgInWords(size_t index, const std::string& name, const std::string& type, const std::string& key) {
  return fieldWords().layerArg(index, name, type, key);
}
inline std::string argLabel(const std::string& key) { return fieldWords().argLabel(key); }
inline std::string lastLayerHeading(const std::string& name) { return fieldWords().lastLayerHeading(name); }
inline std::string fitToDataAction(const std::string& fromPath) { return fieldWords().fitToData(fromPath); }

// The JSON path of a layer ("model.layers[2]") or of one of its arguments ("model.layers[2].units").
std::string layerPath(size_t index, const std::string& key = "");

// A refusal about one field: "<the field in words><rest>", carrying the field's path.
inline UserError fieldError(const std::string& path, const std::string& rest) {
  return UserError(fieldInWords(path) + rest, path);
}

}  // namespace ml
