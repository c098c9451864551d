// A project file (JSON): model + data + devices + hyper-parameters. Validation errors name the
// field, the value and what is allowed. The format is documented in docs/PROJECT_FORMAT.md.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/DeviceList.h"
#include "data/DataSpec.h"
#include "distribute/AllReduce.h"
#include "distribute/Faults.h"
#include "nn/Loss.h"
#include "nn/Precision.h"
#include "nn/Specs.h"
#include "project/LayerJson.h"
#include "project/LrScaling.h"
#include "tensor/Shape.h"

namespace ml {

inline constexpr int kProjectSchemaVersion = 1;

struct TrainingSpec {
  int epochs = 5;
  int64_t batchSize = 128;      // global batch of one optimizer update
  bool perDeviceBatch = false;  // batchSize is per replica instead (global = per-device x replicas)
  OptimizerSpec optimizer;
  LossKind loss = LossKind::SparseCategoricalCrossentropy;
  bool lossSpelledMse = false;  // the file wrote mean_squared_error as Keras' "mse": written back and shown so
  bool fromLogits = false;
  std::vector<std::string> metrics = {"accuracy"};
  uint64_t seed = 42;
  LrRule lrScaling = LrRule::None;
  int64_t lrReferenceBatch = 0;  // the global batch the learning rate was set for; 0: batch_size (see LrScaling.h)
  double warmupEpochs = 0.0;
  // Step decay (the TensorFlow tutorial's decay callback, Keras' PiecewiseConstantDecay by epoch):
  // after each listed number of finished epochs the rate is multiplied by lrDecayFactor.
  std::vector<int64_t> lrDecayEpochs;
  double lrDecayFactor = 0.1;
  int accumulate = 1;  // micro-batches per update
  // Checkpoints: every checkpointEvery steps (checkpointInSteps) or epochs; the last checkpointKeep kept.
  int64_t checkpointEvery = 1;
  bool checkpointInSteps = false;
  int checkpointKeep = 3;
  // Compute precision (nn/Precision.h; float32 | mixed_bfloat16 | mixed_float16 in the file). Master weights,
  // the optimizer, softmax, losses and the all-reduce stay float32 under every policy (the
  // all-reduce has its own setting, distribute.allreduceDtype).
  Precision precision = Precision::Float32;
  // Dynamic loss scaling, used by mixed_float16 only (bfloat16 has float32's range and needs none):
  // lossScaling false is "loss_scale": "none" in the file.
  bool lossScaling = true;
  double lossScale = 32768.0;           // the initial scale, 2^15
  int64_t lossScaleGrowthSteps = 2000;  // finite steps in a row that double the scale
};

struct DistributeSpec {
  DeviceList devices = parseDevices("cpu:1");     // cpu:N | gpu:0,1 | gpu:0x4; .spec is the file's text
  AllReduceAlgo allreduce = AllReduceAlgo::Ring;  // ring | reduce-to-one | nccl; across workers hierarchical | mpi
  int64_t bucketBytes = 1 << 20;                  // gradient bucket size for the all-reduce
  int threadsPerDevice = 0;                       // BLAS threads of a single simulated device (0 = every core); several: 1 each
  // The watchdog: a run with no replica progress for hangSeconds stops as failed with a diagnosis;
  // a replica arriving at the all-reduce later than stragglerFactor x a replica's typical compute
  // time (median over recent steps) is named in a warning.
  double hangSeconds = 60;
  double stragglerFactor = 1.0;
  std::vector<Fault> faults;    // fault injection: "slow:cpu:1=3x", "hang:cpu:2@step=50", ...
  bool shardOptimizer = false;  // ZeRO stage 1: each replica updates 1/N of the parameters, then all-gather
  bool tf32 = false;            // GPUs: cuBLAS may run float32 products on TF32 tensor cores (TensorFlow's default)
  // float32 | bfloat16: the gradients' format between replicas (bfloat16 halves the all-reduce's
  // bytes and changes the results; distribute/AllReduce.h)
  AllReduceDtype allreduceDtype = AllReduceDtype::Float32;
  // Workers (processes, e.g. one per machine) that train the run together, each with `devices`
  // as its local replicas: mirrorlab-cli starts them under mpirun (MultiWorkerMirroredStrategy).
  int workers = 1;
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

// "2 epochs", "500 steps", "3steps", "1 epoch", or a bare number of epochs. Throws UserError.
void parseCheckpointEvery(const std::string& text, int64_t& every, bool& inSteps);
std::string checkpointEveryText(int64_t every, bool inSteps);  // "1 epoch", "50 steps"

// The loss as the file names it ("mse" stays "mse"), and the loss set from such a name: an unknown
// one throws UserError naming training.loss (source: the file or "command line").
std::string lossText(const TrainingSpec& t);
void setLoss(TrainingSpec& t, const std::string& name, const std::string& source);

// Checks the values (not the model's shapes: see Sequential) and throws UserError naming the field.
void validate(const Project& p, const std::string& source = "project");

}  // namespace ml
