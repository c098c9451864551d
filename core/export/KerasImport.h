// Opens a Keras 3 model archive (.keras) of a Sequential model as a Mirrorlab project and its
// weights: every layer and setting is mapped to Mirrorlab's, or the file is refused with the
// layer's position, the setting and what to do. Nothing is written until all of it has been read.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "project/Project.h"

namespace ml {

struct KerasImport {
  Project project;                 // the model, the compile settings as training settings, data guessed
  std::vector<float> params;       // Mirrorlab's flat parameter buffer for project.model
  std::string kerasVersion;        // from the archive's metadata.json
  std::vector<std::string> notes;  // what the user should check (data guessed, settings defaulted)
};

// Throws UserError naming the file, the place in it and the fix: not a .keras archive, damaged,
// saved by a Keras newer than Mirrorlab reads, not Sequential, a layer or setting Mirrorlab lacks.
KerasImport importKeras(const std::string& path);

struct ImportRequest {
  std::string model;    // the .keras archive
  std::string project;  // where the project goes (default: beside the model, .json)
  std::string weights;  // where the weights go (default: beside the model, .mlw; .npz also written)
};

struct ImportResult {
  KerasImport imported;
  std::string projectPath, weightsPath;
};

// Checks both outputs can be written, imports, then writes the weights and the project (each
// atomically; the weights are removed again when the project cannot be written).
ImportResult runImport(const ImportRequest& request);

// model.weights.h5 of an archive: for each group under /layers (Keras' snake-case class names,
// "dense", "dense_1"), its variables "0", "1", ... as float32 arrays. `what` names the file.
struct KerasArray {
  std::vector<int64_t> shape;
  std::vector<float> data;
};
std::map<std::string, std::vector<KerasArray>> readKerasWeights(const std::string& h5Bytes, const std::string& what);

}  // namespace ml
