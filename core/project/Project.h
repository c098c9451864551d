// A project file (JSON): model + data + devices + hyper-parameters. Validation errors name the
// field, the value and what is allowed. The format is documented in README.md ("Project files").
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensor/Shape.h"

namespace ml {

inline constexpr int kProjectSchemaVersion = 1;

struct LayerSpec {
  std::string type;        // Dense, Activation, Flatten, Dropout
  std::string name;        // unique; generated ("dense_1") when empty
  nlohmann::json args = nlohmann::json::object();  // units, activation, rate, initializers...
};

struct ModelSpec {
  Shape inputShape;
  std::vector<LayerSpec> layers;
};

struct OptimizerSpec {
  std::string name = "adam";  // sgd | adam | rmsprop
  double learningRate = 0.001;
  double momentum = 0.0;       // sgd, rmsprop
  bool nesterov = false;       // sgd
  double beta1 = 0.9, beta2 = 0.999;  // adam
  double rho = 0.9;            // rmsprop
  double epsilon = 1e-7;       // adam, rmsprop
};

struct DataSpec {
  std::string kind = "fashion-mnist";  // fashion-mnist | idx | csv | spirals | blobs
  std::string path;                    // fashion-mnist: folder; csv: file
  std::string trainImages, trainLabels, testImages, testLabels;  // idx
  std::string labelColumn = "label";   // csv
  bool standardize = false;            // csv
  std::string testPath;                // csv: optional separate test file
  int64_t samples = 1000;              // spirals, blobs
  int classes = 3;                     // spirals, blobs
  int features = 2;                    // blobs
  double noise = 0.2;                  // spirals: angle noise; blobs: cluster std
  double validationSplit = 0.0;        // when there is no test set: hold out this share
  uint64_t seed = 1;                   // generators
};

struct TrainingSpec {
  int epochs = 5;
  int64_t batchSize = 128;            // global batch of one optimizer update
  bool perDeviceBatch = false;        // batchSize is per replica instead (global = per-device x replicas)
  OptimizerSpec optimizer;
  std::string loss = "sparse_categorical_crossentropy";
  bool fromLogits = false;
  std::vector<std::string> metrics = {"accuracy"};
  uint64_t seed = 42;
  std::string lrScaling = "none";     // none | linear | sqrt
  int64_t lrReferenceBatch = 0;       // the global batch the learning rate was set for; 0: batch_size (see LrScaling.h)
  double warmupEpochs = 0.0;
  int accumulate = 1;                 // micro-batches per update
};

struct DistributeSpec {
  std::string devices = "cpu:1";      // cpu:N | gpu:0,1 | gpu:0x4
  std::string allreduce = "ring";     // ring | reduce-to-one | nccl
  int64_t bucketBytes = 1 << 20;      // gradient bucket size for the all-reduce
  int threadsPerDevice = 0;           // BLAS threads per simulated device; 0 = its share of the cores
};

struct Project {
  int schemaVersion = kProjectSchemaVersion;
  std::string name = "untitled";
  std::string description;
  ModelSpec model;
  DataSpec data;
  TrainingSpec training;
  DistributeSpec distribute;

  nlohmann::json toJson() const;
  // source names the file (or "project") in error messages.
  static Project fromJson(const nlohmann::json& j, const std::string& source = "project");
  static Project load(const std::string& path);
  void save(const std::string& path) const;
};

// Checks the values (not the model's shapes: see Sequential) and throws UserError naming the field.
void validate(const Project& p, const std::string& source = "project");

}  // namespace ml
