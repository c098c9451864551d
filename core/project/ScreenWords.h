// A project file's fields in the words of the studio's screens: messages name the screen and the
// field a user sees ("Training screen › Batch size"), then the key for people editing the file by
// hand ("(batch_size in the file's training section)"), never a bare dotted JSON path. The CLI and
// the studio install these at start-up (setFieldWords(&screenWords())); core/ names fields only by
// their paths (Field.h).
#pragma once
#include "Field.h"

namespace ml {

// Unknown paths still get the section and key in words.
class ScreenWords : public FieldWords {
 public:
  // "Training screen › Batch size (batch_size in the file's training section)".
  std::string field(const std::string& path) const override;
  // "Training screen › Loss".
  std::string fieldPlace(const std::string& path) const override;
  // "Training screen, Loss".
  std::string fieldHeading(const std::string& path) const override;
  // "Input shape".
  std::string fieldLabel(const std::string& path) const override;
  // "Model screen › layer 3 'dense_2' (Dense) (entry 3 of layers in the file's model section)".
  std::string layer(size_t index, const std::string& name, const std::string& type) const override;
  // "Model screen › layer 3 'dense_2' (Dense)".
  std::string layerBrief(size_t index, const std::string& name, const std::string& type) const override;
  // "Model screen › layer 3 'dense_2' (Dense) › Units (units of entry 3 of layers in the file's model section)".
  std::string layerArg(size_t index, const std::string& name, const std::string& type, const std::string& key) const override;
  // The layer panel's label: "kernel_size" -> "Kernel size".
  std::string argLabel(const std::string& key) const override;
  // "Model screen, last layer 'dense_2'".
  std::string lastLayerHeading(const std::string& name) const override;
  // "Fit to data", with its screen when the message is about a field on another one.
  std::string fitToData(const std::string& fromPath) const override;
};

const ScreenWords& screenWords();

}  // namespace ml
