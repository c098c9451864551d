// Shared pieces of the two program generators (internal to core/learn): Python literals, the
// model as a flat list of layers with their resolved arguments, and the data-loading code both
// programs share.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "project/Project.h"

namespace ml::codegen {

std::string pyStr(const std::string& s);  // a double-quoted Python string literal
std::string pyNum(double v);              // shortest round-trip float literal ("0.001", "1e-07")
std::string pyInt(int64_t v);
std::string pyBool(bool b);
std::string pyShape(const Shape& s);  // "(28, 28)", "(2,)"
// Text that is safe inside a """docstring""" and a # comment (one line, no backslashes or """).
std::string pyDocText(const std::string& s);

struct LayerPlan {
  std::string type;        // Dense | Activation | Flatten | Dropout | Conv2D | MaxPooling2D | ...
  std::string name;        // as the model names it (generated names filled in)
  int64_t inFeatures = 0;  // numel of the layer's input
  int64_t units = 0;       // Dense
  std::string activation;  // Dense, Activation: linear | relu | sigmoid | tanh | softmax
  bool useBias = true;
  std::string kernelInit = "glorot_uniform", biasInit = "zeros";
  double rate = 0;      // Dropout
  nlohmann::json args;  // the layer's resolved Keras arguments (Layer::args): Conv2D, pooling, BatchNormalization, Reshape
  Shape inputShape, outputShape;
};

struct ModelPlan {
  Shape input;
  std::vector<LayerPlan> layers;
  int64_t outputs = 0;
  int64_t params = 0;
  bool endsInSoftmax = false;  // the last layer with an activation applies softmax
};

// Builds the model once (throws UserError naming the layer that does not fit).
ModelPlan planModel(const Project& p);

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
