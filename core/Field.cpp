// The default field words (the file's own terms) and the installed front end's words.
#include "Field.h"

#include <atomic>

namespace ml {

namespace {

const FieldWords kFileTerms;
// Atomic so that a test swapping the words while nothing else runs is still well defined.
std::atomic<const FieldWords*> installed{&kFileTerms};

}  // namespace

void setFieldWords(const FieldWords* words) { installed.store(words ? words : &kFileTerms, std::memory_order_release); }

const FieldWords& fieldWords() { return *installed.load(std::memory_order_acquire); }

std::string layerPath(size_t index, const std::string& key) {
  return "model.layers[" + std::to_string(index) + "]" + (key.empty() ? "" : "." + key);
}

std::string FieldWords::field(const std::string& path) const { return path.empty() ? "the file's top level" : path; }

std::string FieldWords::fieldPlace(const std::string& path) const { return field(path); }

std::string FieldWords::fieldHeading(const std::string& path) const { return field(path); }

std::string FieldWords::fieldLabel(const std::string& path) const {
  const size_t dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

std::string FieldWords::layer(size_t index, const std::string& name, const std::string& type) const {
  std::string out = "layer " + std::to_string(index + 1);
  if (!name.empty()) out += " '" + name + "'";
  if (!type.empty()) out += " (" + type + ")";
  return out;
}

std::string FieldWords::layerBrief(size_t index, const std::string& name, const std::string& type) const {
  return layer(index, name, type);
}

std::string FieldWords::layerArg(size_t index, const std::string& name, const std::string& type, const std::string& key) const {
  return key + " of " + layer(index, name, type);
}

std::string FieldWords::argLabel(const std::string& key) const { return key; }

std::string FieldWords::lastLayerHeading(const std::string& name) const { return "last layer '" + name + "'"; }

std::string FieldWords::fitToData(const std::string&) const { return "Fit to data in the studio"; }

}  // namespace ml
