// Shared pieces of the two program generators (internal to core/learn): Python literals, the
// model as a flat list of layers with their resolved arguments, and the data-loading code both
// programs share.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/LayerKind.h"
#include "nn/Sequential.h"
#include "project/Project.h"

namespace ml::codegen {

// Python literals (nn/LayerKind.h, where the layers' hooks use them too).
using ml::pyBool;
using ml::pyInt;
using ml::pyNum;
using ml::pyShape;
using ml::pyStr;
// Text that is safe inside a """docstring""" and a # comment (one line, no backslashes or """).
std::string pyDocText(const std::string& s);

// One layer as the generators write it: its kind's hooks (nn/LayerKind.h) do the writing.
struct LayerPlan {
  std::string name;  // as the model names it (generated names filled in)
  const LayerKind* kind = nullptr;
  LayerArgs args;                // its arguments
  const Layer* layer = nullptr;  // the built layer: shapes, resolved windows
  Act activation = Act::Linear;  // its activation argument (linear for a kind without one)
  bool ownsActivation = false;   // the kind takes an activation argument (Dense, Conv2D, Activation)
  template <class T>
  const T* as() const {
    return std::get_if<T>(&args);
  }
};

struct ModelPlan {
  std::shared_ptr<const Sequential> model;  // built once: the plan's layers point into it
  Shape input;
  std::vector<LayerPlan> layers;
  int64_t outputs = 0;
  int64_t params = 0;
  bool endsInSoftmax = false;  // the last layer with an activation applies softmax
};

// Builds the model once (throws UserError naming the layer that does not fit).
ModelPlan planModel(const Project& p);
// The refusal of a layer whose kind has no hook for this program ("the TensorFlow program").
[[noreturn]] void refuseLayer(const LayerPlan& l, const std::string& program);

// Replicas the project's device list asks for per worker (cpu:4 -> 4, gpu:0,1 -> 2), and its workers (>= 1).
int projectReplicas(const Project& p);
int projectWorkers(const Project& p);

// GLOBAL_BATCH = ... (and PER_REPLICA_BATCH for a per-device batch): Mirrorlab's samples per update,
// per-device batch x devices x workers x accumulate, whatever number of replicas the program runs.
std::string globalBatchPython(const Project& p);

// The opening comment: the project's name, then the lines on the mirrored mapping (and on anything
// the framework does not do exactly as Mirrorlab).
std::string headerComment(const Project& p, const std::string& framework, const std::vector<std::string>& mapping);

// Python: constants and load_data(data_dir) -> (x_train, y_train, x_val, y_val, num_classes),
// with numpy only (no pandas). Classification labels are int64, regression targets float32.
std::string dataLoaderPython(const Project& p);

bool isClassification(const Project& p);

}  // namespace ml::codegen
