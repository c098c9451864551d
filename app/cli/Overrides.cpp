#include "Overrides.h"

#include "Error.h"

namespace mlcli {

void Overrides::addTo(CLI::App* c, bool training) {
  c->add_option("--devices", devices, "Devices: cpu:N (N simulated CPU devices), gpu:0,1 or gpu:0x4 (4 logical GPUs on GPU 0)");
  c->add_option("--data-path", dataPath, "Folder or file of the data set (overrides data.path)");
  c->add_option("--threads-per-device", threadsPerDevice, "BLAS threads for a single simulated device (default: all cores)");
  if (!training) return;
  c->add_option("--epochs", epochs, "Number of epochs")->check(CLI::PositiveNumber);
  c->add_option("--batch-size", batchSize, "Global batch per optimizer update, split across the replicas")->check(CLI::PositiveNumber);
  c->add_option("--per-device-batch", perDeviceBatch, "Batch per replica and micro-batch instead (global = this x replicas x accumulate)")->check(CLI::PositiveNumber);
  c->add_option("--lr", lr, "Base learning rate, set for the reference batch (see --lr-reference-batch)")->check(CLI::PositiveNumber);
  c->add_option("--optimizer", optimizer, "Optimizer: sgd, adam or rmsprop (Keras defaults for its other arguments)")
      ->check(CLI::IsMember({"sgd", "adam", "rmsprop"}));
  c->add_option("--seed", seed, "Seed for initial weights, shuffling and dropout");
  c->add_option("--lr-scaling", lrScaling, "Scale the learning rate with the replicas: none, linear or sqrt")
      ->check(CLI::IsMember({"none", "linear", "sqrt"}));
  c->add_option("--warmup-epochs", warmupEpochs, "Ramp the learning rate from the base rate to the scaled one over E epochs");
  c->add_option("--accumulate", accumulate, "Micro-batches per update (gradient accumulation)")->check(CLI::PositiveNumber);
  c->add_option("--allreduce", allreduce, "All-reduce algorithm: ring or reduce-to-one")->check(CLI::IsMember({"ring", "reduce-to-one", "nccl"}));
  c->add_option("--bucket-kb", bucketKb, "All-reduce bucket size in KiB")->check(CLI::PositiveNumber);
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
  if (optimizer && *optimizer != p.training.optimizer.name) {
    ml::OptimizerSpec fresh;
    fresh.name = *optimizer;
    fresh.learningRate = *optimizer == "sgd" ? 0.01 : 0.001;
    p.training.optimizer = fresh;
  }
  if (lr) p.training.optimizer.learningRate = *lr;
  if (seed) p.training.seed = *seed;
  if (devices) p.distribute.devices = *devices;
  if (lrScaling) p.training.lrScaling = *lrScaling;
  if (warmupEpochs) p.training.warmupEpochs = *warmupEpochs;
  if (accumulate) p.training.accumulate = *accumulate;
  if (allreduce) p.distribute.allreduce = *allreduce;
  if (bucketKb) p.distribute.bucketBytes = *bucketKb * 1024;
  if (threadsPerDevice) p.distribute.threadsPerDevice = *threadsPerDevice;
  if (dataPath) p.data.path = *dataPath;
  ml::validate(p, "command line");
}

}  // namespace mlcli
