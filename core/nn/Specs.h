// The plain specs the model and the optimizers are built from. The project library translates a
// project file into them; nothing here knows the file format. A layer's arguments are a plain struct per kind
// (nn/LayerSpecs.h).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "nn/LayerSpecs.h"
#include "tensor/Shape.h"

namespace ml {

struct ModelSpec {
  Shape inputShape;
  std::vector<LayerSpec> layers;
};

// The optimizers, by Keras' names (the file's training.optimizer.name).
enum class OptimizerKind { Sgd, Adam, RmsProp };
std::optional<OptimizerKind> optimizerKindNamed(const std::string& name);  // sgd | adam | rmsprop
const char* toString(OptimizerKind k);
inline constexpr const char* kOptimizerNames = "sgd, adam, rmsprop";

struct OptimizerSpec {
  OptimizerKind kind = OptimizerKind::Adam;
  double learningRate = 0.001;
  double momentum = 0.0;              // sgd, rmsprop
  bool nesterov = false;              // sgd
  double beta1 = 0.9, beta2 = 0.999;  // adam
  double rho = 0.9;                   // rmsprop
  double epsilon = 1e-7;              // adam, rmsprop
};

}  // namespace ml
