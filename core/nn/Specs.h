// The plain specs the model and the optimizers are built from. The project library translates a
// project file into them; nothing here knows the file format. A layer's arguments are a plain struct per kind
// (nn/LayerSpecs.h).
#pragma once
#include <string>
#include <vector>

#include "nn/LayerSpecs.h"
#include "tensor/Shape.h"

namespace ml {

struct ModelSpec {
  Shape inputShape;
  std::vector<LayerSpec> layers;
};

struct OptimizerSpec {
  std::string name = "adam";  // sgd | adam | rmsprop
  double learningRate = 0.001;
  double momentum = 0.0;              // sgd, rmsprop
  bool nesterov = false;              // sgd
  double beta1 = 0.9, beta2 = 0.999;  // adam
  double rho = 0.9;                   // rmsprop
  double epsilon = 1e-7;              // adam, rmsprop
};

}  // namespace ml
