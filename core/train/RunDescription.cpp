// What a run says about itself before its first step: the effective configuration stored with it
// and the lines the CLI prints (devices and workers, batches, learning rate, precision, all-reduce).
#include <algorithm>
#include <cstdio>

#include "Format.h"
#include "distribute/Workers.h"
#include "nn/Bf16Gemm.h"
#include "nn/OneDnnConv.h"
#include "nn/Sgemm.h"
#include "train/Trainer.h"

namespace ml {

namespace {
// "precision mixed_float16: Dense and Conv2D layers compute in float16 (...)": a run not in float32.
std::string precisionLine(const MirroredStrategy& s, const Project& project) {
  const bool half = s.precision() == Precision::MixedFloat16;
  const std::string format = half ? "float16" : "bfloat16";
  const std::string products = s.options().devices.kind != DeviceKind::Cpu
                                   ? "on " + format + " tensor cores with cublasGemmEx, Conv2D's over its windows (im2col)"
                               : half ? "in float32 on " + sgemm::kernelDescription()
                                      : "on " + bf16::kernelDescription();
  std::string p = std::string("precision ") + toString(s.precision()) + ": Dense and Conv2D layers compute in " + format +
                  " (inputs, weights and outputs rounded, float32 accumulation; products " + products +
                  "); weights, optimizer, softmax and loss stay float32" +
                  (s.options().allreduceDtype == AllReduceDtype::Float32 ? ", and so does the all-reduce; " : "; ");
  if (!half)
    p += "no loss scaling (bfloat16 has float32's range)";
  else if (s.lossScale() > 0)
    p += "dynamic loss scale from " + shortNumber(s.lossScale()) +
         ", halved with the update skipped on an inf/NaN gradient, doubled after " +
         std::to_string(project.training.lossScaleGrowthSteps) + " finite steps";
  else
    p += "no loss scaling (gradients below 2^-24 become 0)";
  return p;
}

// How the replicas' gradients are summed: the path, the buckets, the wire format, the sharded update.
void allReduceLines(const MirroredStrategy& s, const Project& project, std::vector<std::string>& lines) {
  if (s.globalReplicas() > 1) {
    char b[96];
    std::snprintf(b, sizeof b, "; %d bucket%s of up to %.2f MiB, %s", s.bucketCount(), s.bucketCount() == 1 ? "" : "s",
                  static_cast<double>(project.distribute.bucketBytes) / (1 << 20),
                  s.fusedExchange() ? "reduce-scattered by the sharded update itself" : "started during backward");
    lines.push_back("all-reduce: " + s.allReducePath() + b);
    if (s.options().allreduceDtype == AllReduceDtype::Bfloat16)
      lines.push_back(
          "gradients cross between replicas as bfloat16: half the bytes of float32, and the results change (every value "
          "sent is rounded to 8 significant bits; the replicas stay identical)");
    if (s.shardedOptimizer())
      lines.push_back("optimizer sharded (ZeRO stage 1): each replica updates 1/" + std::to_string(s.replicas()) +
                      " of the parameters with 1/" + std::to_string(s.replicas()) +
                      " of the optimizer state, then the updated parameters are all-gathered" +
                      (s.fusedExchange()
                           ? std::string(" (fused: each replica sums its chunks in the ring's order, updates them and "
                                         "writes them into the others, tile by tile, in one pass after backward)")
                           : std::string()));
  } else {
    lines.push_back(s.options().allreduceDtype == AllReduceDtype::Bfloat16
                        ? "all-reduce: none (one replica: bfloat16 on the wire changes nothing, as nothing is sent)"
                        : "all-reduce: none (one replica)");
  }
}

}  // namespace

nlohmann::json Trainer::effectiveConfig() const {
  const auto& t = project_.training;
  const auto& s = *strategy_;
  nlohmann::json names = nlohmann::json::array();
  for (int g = 0; g < s.globalReplicas(); ++g) names.push_back(s.replicaLabel(g));
  const auto pj = project_.toJson();
  nlohmann::json hosts = nlohmann::json::array();
  if (s.workers())
    for (const auto& h : s.workers()->hosts()) hosts.push_back(h);
  nlohmann::json config = {{"devices", project_.distribute.devices.spec},
                           {"workers", s.workerCount()},
                           {"hosts", hosts},
                           {"device_names", names},
                           {"replicas", plan_.replicas},
                           {"global_batch", plan_.globalBatch},
                           {"per_replica_batch", plan_.perReplicaBatch},
                           {"base_lr", plan_.baseLr},
                           {"lr", plan_.lr},
                           {"lr_scaling", toString(plan_.lrRule)},
                           {"lr_reference_batch", plan_.scaling.referenceBatch},
                           {"warmup_epochs", plan_.warmupEpochs},
                           {"optimizer", pj["training"]["optimizer"]},
                           {"accumulate", t.accumulate},
                           {"allreduce", s.globalReplicas() > 1 ? s.allReduceName() : "none"},
                           {"bucket_bytes", project_.distribute.bucketBytes},
                           {"buckets", s.bucketCount()},
                           {"shard_optimizer", s.shardedOptimizer()},
                           {"allreduce_dtype", toString(s.options().allreduceDtype)},
                           {"precision", toString(s.precision())},
                           {"loss_scale", s.lossScale() > 0 ? nlohmann::json(s.lossScale()) : nlohmann::json("none")},
                           {"seed", t.seed},
                           {"epochs", t.epochs},
                           {"max_steps", options_.maxSteps},
                           {"threads_per_device", s.blasThreads()},
                           {"loss", lossText(t)},
                           {"dataset", data_->train.name},
                           {"train_samples", data_->train.size},
                           {"parameters", s.model(0).paramCount()}};
  if (!t.lrDecayEpochs.empty()) {
    config["lr_decay_epochs"] = t.lrDecayEpochs;
    config["lr_decay_factor"] = t.lrDecayFactor;
  }
  return config;
}

std::vector<std::string> Trainer::startLines() const {
  const auto& s = *strategy_;
  std::vector<std::string> lines;
  if (const WorkerGroup* w = s.workers()) {
    // "worker 1 of 2 on host vm, 2 local replicas; 4 replicas in all on 1 host (Open MPI v4.1.4)"
    auto hosts = w->hosts();
    std::sort(hosts.begin(), hosts.end());
    const auto distinct = std::unique(hosts.begin(), hosts.end()) - hosts.begin();
    lines.push_back(workerName(w->rank(), w->size()) + " on host " + w->host() + ", " + std::to_string(s.replicas()) +
                    " local replica" + (s.replicas() == 1 ? "" : "s") + "; " + std::to_string(s.globalReplicas()) +
                    " replicas in all on " + std::to_string(distinct) + " host" + (distinct == 1 ? "" : "s") + " (" +
                    w->engine() + ")");
  }
  lines.push_back(s.options().devices.describe() + " (" + s.threadPolicy() + (teamNote_.empty() ? "" : "; " + teamNote_) + ")");
  std::string batch = "global batch " + std::to_string(plan_.globalBatch);
  if (plan_.replicas > 1 || plan_.accumulate > 1) {
    batch += ", per-replica batch " + (plan_.smallestShard == plan_.perReplicaBatch
                                           ? std::to_string(plan_.perReplicaBatch)
                                           : std::to_string(plan_.smallestShard) + "-" + std::to_string(plan_.perReplicaBatch));
    if (plan_.accumulate > 1)
      batch += ", " + std::to_string(plan_.accumulate) + " micro-batches of " + std::to_string(plan_.microBatch);
  }
  batch += "; " + std::to_string(plan_.stepsPerEpoch) + " steps per epoch";
  lines.push_back(batch);
  std::string lr = "learning rate " + plan_.scaling.explain();
  if (plan_.warmupEpochs > 0)
    lr += ", warm-up from " + shortNumber(plan_.baseLr) + " over " + shortNumber(plan_.warmupEpochs) + " epoch(s)";
  if (!plan_.lrDecayEpochs.empty()) lr += "; " + plan_.decayPhrase();
  lines.push_back(lr);
  if (s.precision() != Precision::Float32) lines.push_back(precisionLine(s, project_));
  const bool cpu = s.options().devices.kind == DeviceKind::Cpu;
  const bool dense = std::any_of(project_.model.layers.begin(), project_.model.layers.end(),
                                 [](const LayerSpec& l) { return l.as<DenseSpec>() != nullptr; });
  if (dense && cpu && s.precision() == Precision::Float32) lines.push_back("Dense products on " + sgemm::kernelDescription());
  if (!cpu)
    lines.push_back(
        project_.distribute.tf32
            ? "float32 products on TF32 tensor cores (--tf32: inputs rounded to 10 mantissa bits, float32 sums; "
              "results differ from float32)"
            : "float32 products in float32 (TF32 off; --tf32 turns it on, as TensorFlow does on Ampere and later GPUs)");
  else if (project_.distribute.tf32)
    lines.push_back("TF32 is for GPUs: CPU devices compute their float32 products in float32");
  const bool convolutional = std::any_of(project_.model.layers.begin(), project_.model.layers.end(),
                                         [](const LayerSpec& l) { return l.as<Conv2DSpec>() != nullptr; });
  if (convolutional && cpu && s.precision() == Precision::Float32) lines.push_back("convolutions on " + dnnconv::description());
  if (convolutional && cpu && s.precision() == Precision::MixedBfloat16)
    lines.push_back("convolutions on " + dnnconv::descriptionBf16());
  allReduceLines(s, project_, lines);
  if (!telemetryLine_.empty()) lines.push_back(telemetryLine_);  // GPU runs: NVML, or why not
  for (const auto& w : plan_.warnings) lines.push_back("warning: " + w);
  return lines;
}

}  // namespace ml
