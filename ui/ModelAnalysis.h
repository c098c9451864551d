// What the model builder shows about a model: per-layer output shapes and parameters, the first
// layer that does not fit (with the core's reason), totals and memory per replica. Computed from
// core (Sequential) without Qt types so it is easy to test.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "project/Project.h"

namespace mlui {

struct LayerRow {
  std::string name, type;
  std::string describe;  // "128, relu"
  std::string shape;     // "(None, 128)"; "?" after a layer that does not fit
  int64_t params = 0;
  bool known = true;  // shape and params are known (the layers before it fit)
  std::string error;  // why this layer does not fit; empty when it does
};

struct ModelAnalysis {
  std::vector<LayerRow> rows;
  bool ok = false;
  int errorLayer = -1;  // index of the layer that does not fit, -1 when none (or model-level)
  std::string error;    // the ml::UserError message
  int64_t totalParams = 0;
  int64_t nonTrainableParams = 0;  // of totalParams: BatchNormalization's moving statistics
  std::string inputShape, outputShape;
  int replicas = 1;
  std::vector<std::string> deviceLabels;  // "cpu:0", ...
  int64_t perReplicaBatch = 0;
  int optimizerSlots = 0;
  bool shardedOptimizer = false;  // ZeRO stage 1 over several replicas: optimizerBytes is one replica's share
  int64_t optimizerParams = 0;    // parameters whose optimizer state the fullest replica keeps
  double paramBytes = 0, gradBytes = 0, optimizerBytes = 0, activationBytes = 0;
  std::string precision = "float32";  // the project's policy
  double lowPrecisionBytes = 0;       // a mixed policy's working copies (Layer::lowPrecisionBytes)
  double totalBytes() const { return paramBytes + gradBytes + optimizerBytes + activationBytes + lowPrecisionBytes; }
};

ModelAnalysis analyzeModel(const ml::Project& project);
// The names Sequential generates for unnamed layers (dense, dense_1, ...), in layer order.
std::vector<std::string> layerNames(const ml::ModelSpec& spec);
// "128, relu" for a Dense, "0.5" for Dropout...
std::string describeLayer(const ml::LayerSpec& layer);
// Replicas the project's device list asks for (1 when it does not parse): one worker's.
int replicaCount(const ml::Project& project);
// Several workers (distribute.workers): the replicas of every worker, which share each batch.
int allReplicaCount(const ml::Project& project);
// Global and per-replica batch of one micro-batch.
int64_t globalBatch(const ml::Project& project);
int64_t perReplicaBatch(const ml::Project& project);

}  // namespace mlui
