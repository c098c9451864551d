// Options that override a project's values; the result is validated like a project file.
#include "Overrides.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "Error.h"
#include "Limits.h"
#include "project/Settings.h"

namespace mlcli {

CLI::Validator positiveWhole() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        errno = 0;
        char* end = nullptr;
        const long long v = std::strtoll(s.c_str(), &end, 10);
        if (s.empty() || *end != '\0' || errno == ERANGE || v < 1)
          return "must be a positive whole number, got '" + ml::clipText(s, 40) + "'";
        return {};
      },
      "POSITIVE");
}

CLI::Validator positiveFinite() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (s.empty() || *end != '\0' || !std::isfinite(v) || !(v > 0))
          return "must be a positive finite number, got '" + ml::clipText(s, 40) + "'";
        return {};
      },
      "POSITIVE");
}

void Overrides::addTo(CLI::App* c, bool training) {
  c->add_option("--devices", devices, "Devices: cpu:N (N simulated CPU devices), gpu:0,1 or gpu:0x4 (4 logical GPUs on GPU 0)");
  c->add_option("--data-path", dataPath, "Folder or file of the data set (overrides data.path)");
  c->add_option("--threads-per-device", threadsPerDevice, "BLAS threads for a single simulated device (default: all cores)");
  if (!training) return;
  c->add_option("--checkpoint-every", checkpointEvery,
                "Write a checkpoint every N steps or epochs, e.g. 500steps or 1epoch (default: the project's, else every epoch); "
                "checkpoints live beside the run store and make `train --resume RUN_ID` exact");
  c->add_option("--checkpoint-keep", checkpointKeep, "How many of the newest checkpoints to keep (default 3)")
      ->check(positiveWhole());
  c->add_option("--hang-seconds", hangSeconds,
                "Watchdog: stop the run with a diagnosis when no replica makes progress for this long (default 60; the first "
                "step gets 10x)")
      ->check(positiveFinite());
  c->add_option("--straggler-factor", stragglerFactor,
                "Watchdog: warn when a replica reaches the all-reduce later than this many times a replica's typical compute "
                "time (default 1)")
      ->check(positiveFinite());
  c->add_option(
      "--inject", inject,
      "Inject a fault (repeatable): slow:cpu:1=3x, hang:cpu:2@step=50, nan:cpu:1@step=20, kill@step=30; the run is tagged "
      "'fault injected'");
  c->add_option("--epochs", epochs, "Number of epochs")->check(positiveWhole());
  c->add_option("--batch-size", batchSize, "Global batch per optimizer update, split across the replicas")
      ->check(positiveWhole());
  c->add_option("--per-device-batch", perDeviceBatch,
                "Batch per replica and micro-batch instead (global = this x replicas x accumulate)")
      ->check(positiveWhole());
  c->add_option("--lr", lr, "Base learning rate, set for the reference batch (see --lr-reference-batch)")
      ->check(positiveFinite());
  c->add_option("--optimizer", optimizer, "Optimizer: sgd, adam or rmsprop (Keras defaults for its other arguments)")
      ->check(CLI::IsMember({"sgd", "adam", "rmsprop"}));
  c->add_option("--seed", seed, "Seed for initial weights, shuffling and dropout");
  c->add_option("--lr-scaling", lrScaling, "Scale the learning rate with the replicas: none, linear or sqrt")
      ->check(CLI::IsMember({"none", "linear", "sqrt"}));
  c->add_option("--warmup-epochs", warmupEpochs, "Ramp the learning rate from the base rate to the scaled one over E epochs");
  c->add_option("--lr-decay-epochs", lrDecayEpochs,
                "Step decay: multiply the learning rate by --lr-decay-factor after each of these finished epochs, e.g. 3,7")
      ->delimiter(',');
  c->add_option("--lr-decay-factor", lrDecayFactor, "What --lr-decay-epochs multiply the learning rate by (default 0.1)");
  c->add_option("--precision", precision,
                "Compute precision: float32, mixed_bfloat16 or mixed_float16 (Dense and Conv2D layers compute in the low format, "
                "weights, optimizer, softmax, loss and all-reduce stay float32; CPU devices)")
      ->check(CLI::IsMember({"float32", "mixed_bfloat16", "mixed_float16"}));
  c->add_option("--loss-scale", lossScale,
                "mixed_float16: the initial dynamic loss scale (default 32768), or none to train without loss scaling");
  c->add_option("--loss-scale-growth-steps", lossScaleGrowthSteps,
                "mixed_float16: finite steps in a row after which the loss scale doubles (default 2000)")
      ->check(positiveWhole());
  c->add_option("--accumulate", accumulate, "Micro-batches per update (gradient accumulation)")->check(positiveWhole());
  c->add_option("--allreduce", allreduce,
                "All-reduce algorithm: ring or reduce-to-one (nccl on GPUs); across workers (mpirun) hierarchical, the "
                "default there, or mpi (flat: one replica per worker)")
      ->check(CLI::IsMember({"ring", "reduce-to-one", "nccl", "hierarchical", "mpi"}));
  c->add_option("--allreduce-dtype", allreduceDtype,
                "Format of the gradients between replicas: float32 (default) or bfloat16 (half the all-reduce's bytes; "
                "changes the results). One process, CPU devices")
      ->check(CLI::IsMember({"float32", "bfloat16"}));
  c->add_option("--bucket-kb", bucketKb, "All-reduce bucket size in KiB")->check(positiveWhole());
  c->add_flag("--shard-optimizer", shardOptimizer,
              "Sharded optimizer update (ZeRO stage 1): each replica updates 1/N of the parameters and keeps 1/N of the "
              "optimizer state, then the parameters are all-gathered (CPU devices)");
  c->add_flag("--tf32", tf32,
              "GPUs: let cuBLAS run float32 products on TF32 tensor cores (10-bit mantissa inputs, float32 sums; faster, "
              "results change), TensorFlow's default on Ampere and later GPUs. Off by default: float32 exactly");
}

void Overrides::apply(ml::Project& p) const {
  if (epochs) p.training.epochs = *epochs;
  if (batchSize && perDeviceBatch) throw ml::UserError("give either --batch-size or --per-device-batch, not both");
  if (batchSize) {
    p.training.batchSize = *batchSize;
    p.training.perDeviceBatch = false;
  }
  if (perDeviceBatch) {
    p.training.batchSize = *perDeviceBatch;
    p.training.perDeviceBatch = true;
  }
  if (optimizer) {
    // Another optimizer starts from Keras' defaults for it; the same one keeps the file's arguments.
    if (const ml::OptimizerKind kind = ml::optimizerSetting(*optimizer, "command line"); kind != p.training.optimizer.kind) {
      ml::OptimizerSpec fresh;
      fresh.kind = kind;
      fresh.learningRate = kind == ml::OptimizerKind::Sgd ? 0.01 : 0.001;
      p.training.optimizer = fresh;
    }
  }
  if (lr) p.training.optimizer.learningRate = *lr;
  if (seed) p.training.seed = *seed;
  if (devices) p.distribute.devices = ml::devicesSetting(*devices, "command line");
  if (lrScaling) p.training.lrScaling = ml::lrRuleSetting(*lrScaling, "command line");
  if (warmupEpochs) p.training.warmupEpochs = *warmupEpochs;
  if (!lrDecayEpochs.empty()) p.training.lrDecayEpochs = lrDecayEpochs;
  if (lrDecayFactor) p.training.lrDecayFactor = *lrDecayFactor;
  if (accumulate) p.training.accumulate = *accumulate;
  if (precision) p.training.precision = ml::precisionSetting(*precision, "command line");
  if (lossScale && *lossScale == "none") {
    p.training.lossScaling = false;
  } else if (lossScale) {
    char* end = nullptr;
    const double v = std::strtod(lossScale->c_str(), &end);
    if (lossScale->empty() || *end != '\0' || !(v > 0) || !std::isfinite(v))
      throw ml::UserError("--loss-scale must be a positive number (the initial scale, 32768 by default) or none, got '" +
                          *lossScale + "'");
    p.training.lossScaling = true;
    p.training.lossScale = v;
  }
  if (lossScaleGrowthSteps) p.training.lossScaleGrowthSteps = *lossScaleGrowthSteps;
  if (allreduce) p.distribute.allreduce = ml::allReduceSetting(*allreduce, "command line");
  if (allreduceDtype) p.distribute.allreduceDtype = ml::allReduceDtypeSetting(*allreduceDtype, "command line");
  if (bucketKb) {
    if (*bucketKb < 1 || *bucketKb > (int64_t{1} << 22))
      throw ml::UserError("--bucket-kb must be from 1 to 4194304 (4 GiB), got " + std::to_string(*bucketKb));
    p.distribute.bucketBytes = *bucketKb * 1024;
  }
  if (threadsPerDevice) p.distribute.threadsPerDevice = *threadsPerDevice;
  if (shardOptimizer) p.distribute.shardOptimizer = true;
  if (tf32) p.distribute.tf32 = true;
  if (dataPath) p.data.path = *dataPath;
  if (checkpointEvery) ml::parseCheckpointEvery(*checkpointEvery, p.training.checkpointEvery, p.training.checkpointInSteps);
  if (checkpointKeep) p.training.checkpointKeep = *checkpointKeep;
  if (hangSeconds) p.distribute.hangSeconds = *hangSeconds;
  if (stragglerFactor) p.distribute.stragglerFactor = *stragglerFactor;
  for (const auto& f : inject) p.distribute.faults.push_back(ml::faultSetting(f, "command line"));
  ml::validate(p, "command line");
}

}  // namespace mlcli
