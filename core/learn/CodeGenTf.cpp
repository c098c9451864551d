// The TensorFlow/Keras program: tf.distribute.MirroredStrategy over every GPU, or over the
// project's N devices as N logical CPU devices when there is none; the model built and compiled in
// strategy.scope(); Mirrorlab's shuffle and shards fed to the replicas (CodeGenTfParts.cpp); Keras'
// optimizers (Mirrorlab uses their formulas and constants); Mirrorlab's learning-rate rule.
#include "learn/CodeGen.h"
#include "learn/CodeGenParts.h"
#include "learn/CodeGenTfParts.h"
#include "nn/Loss.h"
#include "project/LrScaling.h"

namespace ml {

using namespace codegen;

namespace {

// Keras refuses some characters in layer names; keep a project's name only when it is plain.
std::string nameArg(const std::string& name) {
  // [A-Za-z_][A-Za-z0-9_.-]*, scanned by hand: std::regex recurses per character on long names.
  auto alpha = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  bool plain = !name.empty() && alpha(name[0]);
  for (char c : name) plain = plain && (alpha(c) || (c >= '0' && c <= '9') || c == '.' || c == '-');
  return plain ? ", name=" + pyStr(name) : "";
}

// The layer's tf.keras line, written by its kind's hook (args may be a changed copy of its own).
std::string kerasLayer(const LayerPlan& l, const LayerArgs& args, size_t index, const std::string& dtypeArg) {
  if (!l.kind->tf) refuseLayer(l, "the TensorFlow program");
  return l.kind->tf(args, *l.layer, TfContext{index, dtypeArg, nameArg(l.name)});
}

std::string kerasOptimizer(const OptimizerSpec& o) {
  if (o.kind == OptimizerKind::Sgd)
    return "tf.keras.optimizers.SGD(learning_rate=learning_rate, momentum=" + pyNum(o.momentum) +
           ", nesterov=" + pyBool(o.nesterov) + ")";
  if (o.kind == OptimizerKind::RmsProp)
    return "tf.keras.optimizers.RMSprop(learning_rate=learning_rate, rho=" + pyNum(o.rho) + ", momentum=" + pyNum(o.momentum) +
           ", epsilon=" + pyNum(o.epsilon) + ")";
  return "tf.keras.optimizers.Adam(learning_rate=learning_rate, beta_1=" + pyNum(o.beta1) + ", beta_2=" + pyNum(o.beta2) +
         ", epsilon=" + pyNum(o.epsilon) + ")";
}

std::string kerasLoss(const TrainingSpec& t) {
  const std::string logits = "(from_logits=" + pyBool(t.fromLogits) + ", reduction=reduction)";
  switch (Loss::make(t.loss, t.fromLogits).kind()) {
    case LossKind::SparseCategoricalCrossentropy: return "tf.keras.losses.SparseCategoricalCrossentropy" + logits;
    case LossKind::CategoricalCrossentropy: return "tf.keras.losses.CategoricalCrossentropy" + logits;
    case LossKind::BinaryCrossentropy: return "tf.keras.losses.BinaryCrossentropy" + logits;
    case LossKind::MeanSquaredError: break;
  }
  return "tf.keras.losses.MeanSquaredError(reduction=reduction)";
}

// make_metric(): the project's first metric (accuracy or mae; the loss's own when none is named),
// as the Keras metric object for its loss; METRIC names it in the output.
std::string kerasMetric(const TrainingSpec& t) {
  const Loss loss = Loss::make(t.loss, t.fromLogits);
  const std::string name = t.metrics.empty() ? "" : t.metrics.front();
  const MetricKind m = metricFor(name, loss);
  std::string make;
  switch (m) {
    case MetricKind::BinaryAccuracy: make = "tf.keras.metrics.BinaryAccuracy()"; break;
    case MetricKind::BinaryAccuracyLogits: make = "tf.keras.metrics.BinaryAccuracy(threshold=0.0)  # on logits"; break;
    case MetricKind::MeanAbsoluteError:
    case MetricKind::None: make = "tf.keras.metrics.MeanAbsoluteError()"; break;
    case MetricKind::Accuracy:
      make = loss.kind() == LossKind::SparseCategoricalCrossentropy ? "tf.keras.metrics.SparseCategoricalAccuracy()"
                                                                    : "tf.keras.metrics.CategoricalAccuracy()";
      break;
  }
  const bool mae = m == MetricKind::MeanAbsoluteError || m == MetricKind::None;
  return "METRIC = " + pyStr(mae ? "mae" : "accuracy") + "\n\n\ndef make_metric():\n    return " + make + "\n";
}

// The lines that name what this program does not do exactly as Mirrorlab (none when it does).
std::vector<std::string> tfDifferences(const Project& p, const ModelPlan& m) {
  std::vector<std::string> out;
  const int replicas = projectReplicas(p) * std::max(1, p.distribute.workers);
  bool dropout = false, perReplicaNorm = false;
  for (const auto& l : m.layers) {
    dropout = dropout || (l.as<DropoutSpec>() && l.as<DropoutSpec>()->rate > 0);
    perReplicaNorm = perReplicaNorm || (l.as<BatchNormalizationSpec>() && !l.as<BatchNormalizationSpec>()->synchronized);
  }
  if (dropout) {
    out.push_back("Differs from Mirrorlab: dropout masks are TensorFlow's draws (ReplicaDropout: a seed per layer, folded with");
    out.push_back("the replica's index), not Mirrorlab's masks keyed by step and sample: the runs agree in distribution only.");
  }
  if (perReplicaNorm && replicas > 1) {
    out.push_back("Differs from Mirrorlab: BatchNormalization (not synchronized) normalises each replica's shard with its own");
    out.push_back("statistics in both, but TensorFlow moves each replica's moving mean and variance by its own shard and reads");
    out.push_back("(and saves) replica 0's, where Mirrorlab moves them by the global batch's: training agrees, the moving");
    out.push_back("statistics after it (and so evaluation and prediction) differ.");
  }
  if (p.training.precision != Precision::Float32) {
    const bool scaled = p.training.precision == Precision::MixedFloat16 && p.training.lossScaling;
    out.push_back(std::string("Mixed precision: Keras' ") + toString(p.training.precision) + " policy (set_global_policy)" +
                  (scaled                                            ? ", with a LossScaleOptimizer"
                   : p.training.precision == Precision::MixedFloat16 ? ", without loss scaling (loss_scale none)"
                                                                     : "") +
                  "; the last activation in float32 (Keras'");
    out.push_back("advice; Mirrorlab's softmax is float32 too). Differs from Mirrorlab: TensorFlow rounds where its kernels");
    out.push_back("do (Mirrorlab rounds each layer's input, kernel, output and gradients): the runs agree to the low format's");
    out.push_back("precision only.");
  }
  return out;
}

// Each layer with weights and its arrays in a weights .npz, in Keras' get_weights() order.
std::string weightArrays(const ModelPlan& model) {
  std::string arrays;
  for (const auto& l : model.layers) {
    if (!l.kind->weights) continue;
    std::string list;
    for (const auto& w : l.kind->weights(*l.layer)) list += (list.empty() ? "" : ", ") + pyStr(l.name + "/" + w.name);
    arrays += (arrays.empty() ? "" : ", ") + pyStr(l.name) + ": [" + list + "]";
  }
  return "WEIGHT_ARRAYS = {" + arrays + "}  # each layer's arrays in a weights .npz, in Keras' order\n";
}

// build_model(). Under a mixed policy the last activation runs in float32, as Keras advises: a
// last Dense/Conv2D with an activation is followed by that activation as a float32 layer.
std::string kerasModel(const Project& p, const ModelPlan& model) {
  const bool mixed = p.training.precision != Precision::Float32;
  std::string out =
      "def build_model():\n    return tf.keras.Sequential([\n        tf.keras.Input(shape=" + pyShape(model.input) + "),\n";
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const LayerPlan& l = model.layers[i];
    LayerArgs args = l.args;
    const bool last = i + 1 == model.layers.size();
    const bool activationLayer = l.as<ActivationSpec>() != nullptr;
    std::string tail;
    if (mixed && last && l.ownsActivation && !activationLayer && l.activation != Act::Linear) {
      // The activation moves to a float32 Activation layer of its own after this one.
      LayerPlan act = l;
      act.name.clear();  // Keras names it
      act.kind = &ActivationSpec::kind();
      act.args = ActivationSpec{l.activation};
      tail = "        " + kerasLayer(act, act.args, i, ", dtype=\"float32\"") + ",  # the output in float32\n";
      forEachArg(args, [](std::string_view key, auto& v, Need) {
        if constexpr (std::is_same_v<std::decay_t<decltype(v)>, Act>)
          if (key == "activation") v = Act::Linear;
      });
    }
    out += "        " + kerasLayer(l, args, i, mixed && last && activationLayer ? ", dtype=\"float32\"" : "") + ",\n" + tail;
  }
  return out + "    ])\n";
}

// The opening comment's lines: the mirrored mapping, the versions verified, what differs.
std::vector<std::string> tfMapping(const Project& p, const ModelPlan& model) {
  std::vector<std::string> mapping = {
      "Mirrored training: tf.distribute.MirroredStrategy makes one replica (a full copy of the model) per device:",
      "every visible GPU or, without one, the project's device count as logical CPU devices. Each global batch of B",
      "samples is cut as Mirrorlab cuts it (ACCUMULATE micro-batches, each into shards whose sizes differ by at most",
      "one) and each replica is fed its part (distribute_datasets_from_function; TensorFlow's own split of a batched",
      "dataset gives the first replicas the larger shards: 13 over 3 as 5, 5, 3). In mirrored_steps each replica",
      "sums its shard's losses, divides by B and takes the gradients; the all-reduce sums them and every replica",
      "applies the same update, so the copies stay identical and the update is the global-batch mean's, as in",
      "Mirrorlab. (model.fit would divide each replica's mean by the replicas instead: not the same when uneven.)",
      std::string("Verified step for step against Mirrorlab with TensorFlow ") + kTfVerified + " and Keras " + kKerasVerified +
          "; needs TensorFlow 2.16 or newer (Keras 3)."};
  if (p.distribute.workers > 1) {
    mapping.push_back("Several workers: the project trains as " + std::to_string(p.distribute.workers) +
                      " processes (distribute.workers); here tf.distribute.MultiWorkerMirroredStrategy,");
    mapping.push_back("one process per worker configured by TF_CONFIG, replaces MirroredStrategy (see make_strategy).");
  }
  for (const auto& d : tfDifferences(p, model)) mapping.push_back(d);
  return mapping;
}

// The project's settings as the program's constants.
std::string tfConstants(const Project& p) {
  const TrainingSpec& t = p.training;
  std::string out;
  out += "EPOCHS = " + pyInt(t.epochs) + "\nSEED = " + std::to_string(t.seed) + "\n";
  out += "PRECISION = " + pyStr(toString(t.precision)) + "  # Keras' dtype policy: float32 | mixed_bfloat16 | mixed_float16\n";
  out += std::string("TF32 = ") + (p.distribute.tf32 ? "True" : "False") +
         "  # GPUs: float32 products on TF32 tensor cores (distribute.tf32; TensorFlow's own default is on)\n";
  if (p.distribute.allreduceDtype != AllReduceDtype::Float32)
    out += std::string("# The project sends its gradients between replicas as ") + toString(p.distribute.allreduceDtype) +
           " (distribute.allreduce_dtype). MirroredStrategy has no\n"
           "# such option: this program all-reduces float32, so its weights follow Mirrorlab's float32 all-reduce.\n";
  out += "DEVICES = " + std::to_string(projectReplicas(p)) +
         "  # the project's devices: " + pyDocText(p.distribute.devices.spec) + " (logical CPU devices when there is no GPU)\n";
  if (p.distribute.workers > 1)
    out += "WORKERS = " + std::to_string(p.distribute.workers) +
           "  # the project's workers (processes): tf.distribute.MultiWorkerMirroredStrategy, see make_strategy\n";
  out += globalBatchPython(p);
  out += "ACCUMULATE = " + std::to_string(t.accumulate) + "  # Mirrorlab's micro-batches per update\n";
  if (t.accumulate > 1)
    out += "# Each replica runs its shard of every micro-batch and adds the gradients up before the one all-reduce.\n";
  out += "BASE_LEARNING_RATE = " + pyNum(t.optimizer.learningRate) + "  # set for a global batch of REFERENCE_BATCH\n";
  out += "REFERENCE_BATCH = " + pyInt(lrReferenceBatch(t)) + "  # the global batch BASE_LEARNING_RATE was set for\n";
  out += "LR_SCALING = " + pyStr(toString(t.lrScaling)) +
         "  # none | linear | sqrt: the rate follows GLOBAL_BATCH / REFERENCE_BATCH\n";
  out += "WARMUP_EPOCHS = " + pyNum(t.warmupEpochs) + "\n";
  {
    std::string epochs;
    for (const int64_t e : t.lrDecayEpochs) epochs += (epochs.empty() ? "" : ", ") + std::to_string(e);
    out += "LR_DECAY_EPOCHS = [" + epochs + "]  # after this many finished epochs the rate is multiplied by LR_DECAY_FACTOR\n";
    out += "LR_DECAY_FACTOR = " + pyNum(t.lrDecayFactor) + "\n";
  }
  return out;
}

}  // namespace

std::string generateTensorFlowProgram(const Project& p) {
  const ModelPlan model = planModel(p);
  const TrainingSpec& t = p.training;
  const std::string file = suggestedFileName(p, Framework::TensorFlow);
  std::string out = headerComment(p, "TensorFlow/Keras", tfMapping(p, model));
  out += "\"\"\"Run: python3 " + file +
         " [--epochs N] [--steps N] [--data FOLDER] [--weights FILE.npz] [--save-weights FILE.npz]\n"
         "           [--print-steps] [--predict-only]\n\n"
         "Needs TensorFlow 2.16 or newer (Keras 3, other than 3.7.0) and numpy. MirroredStrategy uses every visible\n"
         "GPU (one replica each); on a machine without one it splits the CPU into the project's number of logical\n"
         "devices. Train step for step as Mirrorlab does, from Mirrorlab's weights:\n"
         "    mirrorlab-cli train PROJECT --steps 20 --save-initial-weights init.npz --report report.json --no-record\n"
         "    python3 " +
         file +
         " --weights init.npz --steps 20 --print-steps     # report.json's step_loss\n"
         "Project: " +
         pyDocText(p.description) + "\n\"\"\"\n";
  out += "import argparse\nimport gzip\nimport math\nimport os\nimport sys\n\nimport numpy as np\nimport tensorflow as tf\n\n";
  out += tfConstants(p);
  out += weightArrays(model);
  out += dataLoaderPython(p);
  out += "\n\n# ---- model: " + std::to_string(model.params) + " parameters ----\n";
  out += kerasModel(p, model);
  out += "\n\ndef make_loss(reduction=\"sum_over_batch_size\"):\n    return " + kerasLoss(t) + "\n\n\n" + kerasMetric(t);
  out += "\n\ndef make_optimizer(learning_rate):\n";
  if (t.precision == Precision::MixedFloat16 && t.lossScaling) {
    // Keras' dynamic loss scaling with the project's scale and interval (compile() would wrap the
    // optimizer itself, but with its defaults).
    out += "    optimizer = " + kerasOptimizer(t.optimizer) + "\n";
    out += "    return tf.keras.mixed_precision.LossScaleOptimizer(optimizer, initial_scale=" + pyNum(t.lossScale) +
           ", dynamic_growth_steps=" + std::to_string(t.lossScaleGrowthSteps) + ")\n";
  } else {
    out += "    return " + kerasOptimizer(t.optimizer) + "\n";
  }
  bool dropout = false;
  for (const auto& l : model.layers) dropout = dropout || l.as<DropoutSpec>();
  out += tfHelpersPython(p.distribute.workers > 1, dropout);
  const LossKind kind = Loss::make(t.loss, t.fromLogits).kind();
  out += tfMainPython(kind == LossKind::CategoricalCrossentropy, kind == LossKind::BinaryCrossentropy);
  return out;
}

}  // namespace ml
