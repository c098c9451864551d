// The PyTorch program: one process per replica (torchrun's env:// variables, else mp.spawn), gloo
// on the CPU or NCCL on GPUs, and Mirrorlab's step exactly: the same shuffle, each global batch cut
// into micro-batches and shards whose sizes differ by at most one, the summed loss scaled so that
// DDP's average is the global-batch mean, ddp.no_sync() while accumulating, and Keras' optimizer
// formulas written out where PyTorch's differ. --weights FILE.npz starts from Mirrorlab's weights.
#include "learn/CodeGen.h"
#include "learn/CodeGenParts.h"
#include "learn/CodeGenTorchParts.h"
#include "project/LrScaling.h"

namespace ml {

using namespace codegen;

namespace {

std::string torchActivation(const std::string& a) {
  if (a == "relu") return "nn.ReLU()";
  if (a == "sigmoid") return "nn.Sigmoid()";
  if (a == "tanh") return "nn.Tanh()";
  if (a == "softmax") return "nn.Softmax(dim=1)";
  return "";
}

// The model's layers as Python list items; a trailing softmax is left out when the loss takes it
// over (cross-entropy on logits is the same loss as Keras' softmax + crossentropy, and stabler).
std::string torchLayers(const ModelPlan& m, bool foldSoftmax) {
  std::string out;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const auto& l = m.layers[i];
    const bool last = i + 1 == m.layers.size();
    const std::string tag = "  # " + l.name + "\n";
    if (l.type == "Flatten") {
      out += "        nn.Flatten()," + tag;
    } else if (l.type == "Dropout") {
      out += "        nn.Dropout(p=" + pyNum(l.rate) + ")," + tag;
    } else {
      if (l.type == "Dense")
        out += "        dense(" + pyStr(l.name) + ", " + pyInt(l.inFeatures) + ", " + pyInt(l.units) + ", " + pyStr(l.kernelInit) + ", " +
               pyStr(l.biasInit) + ", " + pyBool(l.useBias) + ")," + tag;
      if (last && foldSoftmax && l.activation == "softmax")
        out += "        # softmax: folded into the loss (F.cross_entropy takes the logits)\n";
      else if (const std::string a = torchActivation(l.activation); !a.empty())
        out += "        " + a + "," + (l.type == "Activation" ? tag : "\n");
    }
  }
  return out;
}

bool hasDropout(const ModelPlan& m) {
  for (const auto& l : m.layers)
    if (l.type == "Dropout" && l.rate > 0) return true;
  return false;
}

}  // namespace

std::string generatePyTorchProgram(const Project& p) {
  const ModelPlan model = planModel(p);
  const TrainingSpec& t = p.training;
  const bool ce = t.loss == "sparse_categorical_crossentropy" || t.loss == "categorical_crossentropy";
  const bool foldSoftmax = ce && !t.fromLogits && !model.layers.empty() && model.layers.back().activation == "softmax";
  const bool logits = ce && (t.fromLogits || foldSoftmax);
  const std::string metric = t.metrics.empty() ? (ce ? "accuracy" : "mae") : t.metrics.front();
  const bool accuracy = metric == "accuracy" || metric == "acc";
  const std::string file = suggestedFileName(p, Framework::PyTorch);
  const std::string batchWords = t.perDeviceBatch ? std::to_string(t.batchSize) + " per replica per micro-batch"
                                                  : std::to_string(t.batchSize) + " in all";
  std::vector<std::string> mapping = {
      "Mirrored training: one process per device (a replica), each holding a full copy of the model.",
      "Every process computes the same permutation of the training set (Mirrorlab's shuffle); each global",
      "batch (" + batchWords + ") is cut into ACCUMULATE micro-batches and each micro-batch into world_size",
      "shards whose sizes differ by at most one. Each replica sums its shard's losses and scales the sum by",
      "world_size / B (B: samples in the global batch); during backward DDP all-reduces the gradients and",
      "divides by world_size, so every replica holds the gradient of the mean loss over the global batch and",
      "applies the same update. Micro-batches before the last run under ddp.no_sync() and all-reduce once."};
  if (hasDropout(model)) {
    mapping.push_back("Differs from Mirrorlab: dropout masks are PyTorch's draws (a generator seeded per rank), not");
    mapping.push_back("Mirrorlab's masks keyed by step and sample, so with dropout the runs agree in distribution only.");
  }
  std::string out = headerComment(p, "PyTorch DistributedDataParallel", mapping);
  out += "\"\"\"Run on this machine:  python3 " + file + " [--world-size N] [--steps N] [--cpu] [--weights FILE.npz]\n"
         "or with torchrun:      torchrun --nproc_per_node=N " + file + "\n"
         "Check saved weights:   python3 " + file + " --weights FILE.npz --predict-only\n\n"
         "Needs PyTorch and numpy. NCCL with one GPU per process when CUDA is available, else gloo on the CPU.\n"
         "Start from Mirrorlab's weights to train step for step as Mirrorlab does:\n"
         "    mirrorlab-cli train PROJECT --steps 1 --save-initial-weights init.npz --no-record\n"
         "Without --weights, the initial weights are PyTorch's draws from Keras' distributions.\n"
         "Project: " + pyDocText(p.description) + "\n\"\"\"\n";
  out += "import argparse\nimport contextlib\nimport gzip\nimport math\nimport os\nimport socket\nimport sys\n\nimport numpy as np\nimport torch\n"
         "import torch.distributed as dist\nimport torch.multiprocessing as mp\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
         "from torch.nn.parallel import DistributedDataParallel as DDP\n\n";
  out += "EPOCHS = " + pyInt(t.epochs) + "\nSEED = " + std::to_string(t.seed) + "\n";
  out += "DEFAULT_WORLD_SIZE = " + std::to_string(projectReplicas(p)) + "  # the project's devices: " + pyDocText(p.distribute.devices) + "\n";
  if (t.perDeviceBatch)
    out += "PER_REPLICA_BATCH = " + pyInt(t.batchSize) +
           "  # the project's batch per device and micro-batch: global = this x world_size x ACCUMULATE\n";
  else
    out += "GLOBAL_BATCH = " + pyInt(t.batchSize) + "  # the project's global batch: samples per optimizer update\n";
  out += "ACCUMULATE = " + std::to_string(t.accumulate) + "  # micro-batches per update, all-reduced once\n";
  out += "BASE_LEARNING_RATE = " + pyNum(t.optimizer.learningRate) + "  # set for a global batch of REFERENCE_BATCH\n";
  out += "REFERENCE_BATCH = " + pyInt(lrReferenceBatch(t)) + "  # the global batch BASE_LEARNING_RATE was set for\n";
  out += "LR_SCALING = " + pyStr(t.lrScaling) + "  # none | linear | sqrt: the rate follows global_batch / REFERENCE_BATCH\n";
  out += "WARMUP_EPOCHS = " + pyNum(t.warmupEpochs) + "\n";
  out += "METRIC = " + pyStr(accuracy ? "accuracy" : "mae") + "\n";
  out += dataLoaderPython(p);
  out += "\n\n# ---- model: " + std::to_string(model.params) + " parameters ----";
  out += torchInitPython();
  out += "\n\ndef build_model():\n    return nn.Sequential(\n" + torchLayers(model, foldSoftmax) + "    )\n";
  out += torchOptimizerPython(t.optimizer);
  out += "\n\ndef loss_sum(out, y):\n    \"\"\"The loss summed over the samples (the caller divides by the global batch).\"\"\"\n";
  if (logits)
    out += "    return F.cross_entropy(out, y, reduction=\"sum\")  # " +
           std::string(foldSoftmax ? "softmax + crossentropy, on the logits (Mirrorlab reports it with p clipped to [1e-7, 1 - 1e-7])"
                                   : "from_logits") + "\n";
  else if (ce)
    out += "    return F.nll_loss(torch.log(out.clamp(1e-7, 1 - 1e-7)), y, reduction=\"sum\")  # crossentropy on probabilities, clipped as Keras\n";
  else
    out += "    return F.mse_loss(out, y, reduction=\"sum\") / out.shape[1]  # per sample: the mean over the outputs, as Keras\n";
  if (t.loss == "categorical_crossentropy")
    out += "# categorical_crossentropy on one-hot targets is the same loss on class indices, which this program keeps.\n";
  out += "\n\ndef metric_sum(out, y):\n";
  if (accuracy)
    out += "    return (out.argmax(dim=1) == y).sum().item()\n";
  else
    out += "    return (out - y.reshape(out.shape)).abs().mean(dim=1).sum().item()\n";
  out += torchTrainPython(t.perDeviceBatch);
  return out;
}

}  // namespace ml
