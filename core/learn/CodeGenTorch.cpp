// The PyTorch program: one process per replica (torchrun's env:// variables, else mp.spawn), gloo
// on the CPU or NCCL on GPUs, and Mirrorlab's step exactly: the same shuffle, each global batch cut
// into micro-batches and shards whose sizes differ by at most one, the summed loss scaled so that
// DDP's average is the global-batch mean, ddp.no_sync() while accumulating, and Keras' optimizer
// formulas written out where PyTorch's differ. --weights FILE.npz starts from Mirrorlab's weights.
#include "learn/CodeGen.h"
#include "learn/CodeGenParts.h"
#include "learn/CodeGenTorchParts.h"
#include "nn/Loss.h"
#include "project/LrScaling.h"

namespace ml {

using namespace codegen;

namespace {

// Mirrorlab's softmax spans the whole sample: over a multi-dimensional output (an image's) the
// sample is flattened, softmaxed and put back in shape.
std::string torchActivation(Act a, const Shape& shape) {
  if (a == Act::Relu) return "nn.ReLU()";
  if (a == Act::Sigmoid) return "nn.Sigmoid()";
  if (a == Act::Tanh) return "nn.Tanh()";
  if (a == Act::Softmax && shape.size() > 1) {
    std::string dims;
    for (int64_t d : shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
    return "nn.Flatten(), nn.Softmax(dim=1), nn.Unflatten(1, (" + dims + "))";
  }
  if (a == Act::Softmax) return "nn.Softmax(dim=1)";
  return "";
}

// The model's layers as Python list items, each written by its kind's hook and followed by its
// activation; a trailing softmax (sigmoid) is left out when the loss takes it over (cross-entropy
// on logits is the same loss as Keras' softmax + crossentropy, and stabler): `fold` names it, or
// is empty.
std::string torchLayers(const ModelPlan& m, const std::string& fold) {
  std::string out;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const auto& l = m.layers[i];
    if (!l.kind->torch) refuseLayer(l, "the PyTorch program");
    const bool last = i + 1 == m.layers.size();
    const std::string tag = "  # " + l.name + "\n";
    const std::string module = l.kind->torch(l.args, *l.layer);
    if (!module.empty()) out += "        " + module + "," + tag;
    if (!l.ownsActivation) continue;
    if (last && !fold.empty() && toString(l.activation) == fold)
      out += "        # " + fold + ": folded into the loss (" +
             (fold == "softmax" ? "F.cross_entropy" : "F.binary_cross_entropy_with_logits") + " takes the logits)\n";
    else if (const std::string a = torchActivation(l.activation, l.layer->outputShape); !a.empty())
      out += "        " + a + "," + (module.empty() ? tag : "\n");
  }
  return out;
}

// Python helpers (kSpatialPython, kBatchNormPython) some kinds' modules need.
bool needsHelpers(const ModelPlan& m, unsigned helper) {
  for (const auto& l : m.layers)
    if (l.kind->torchHelpers & helper) return true;
  return false;
}

const char* kSpatialPython = R"PY(


class ChannelsLast(nn.Module):
    """A channels-first PyTorch layer on Keras' channels-last tensors (N, H, W, C), with TensorFlow's
    "same" padding (out = ceil(in / stride), the odd row/column at the bottom/right) when pad is given."""

    def __init__(self, layer, pad=None, pad_value=0.0):
        super().__init__()
        self.layer, self.pad, self.pad_value = layer, pad, pad_value

    def forward(self, x):
        x = x.permute(0, 3, 1, 2)
        if self.pad is not None:
            x = F.pad(x, tf_same_padding(x.shape[2], x.shape[3], *self.pad), value=self.pad_value)
        return self.layer(x).permute(0, 2, 3, 1)


def tf_same_padding(h, w, kh, kw, sh, sw):
    ph = max((-(-h // sh) - 1) * sh + kh - h, 0)
    pw = max((-(-w // sw) - 1) * sw + kw - w, 0)
    return (pw // 2, pw - pw // 2, ph // 2, ph - ph // 2)


def conv2d(name, in_channels, filters, kernel, strides, same, kernel_init, bias_init, use_bias):
    layer = nn.Conv2d(in_channels, filters, kernel, stride=strides, bias=use_bias)
    layer.keras_name = name  # NAME/kernel (kh, kw, in, filters) in a weights file; PyTorch's weight is (filters, in, kh, kw)
    field = kernel[0] * kernel[1]
    init_weights(layer.weight, kernel_init, field * in_channels, field * filters)
    if use_bias:
        init_weights(layer.bias, bias_init, filters, filters)
    return ChannelsLast(layer, (kernel[0], kernel[1], strides[0], strides[1]) if same else None)


class AvgPoolSame(nn.Module):
    """Average pooling with TensorFlow's "same" padding: each window averages the positions inside the image."""

    def __init__(self, kernel, strides):
        super().__init__()
        self.kernel, self.strides = kernel, strides

    def forward(self, x):
        pad = tf_same_padding(x.shape[2], x.shape[3], self.kernel[0], self.kernel[1], self.strides[0], self.strides[1])
        total = F.avg_pool2d(F.pad(x, pad), self.kernel, self.strides)
        inside = F.avg_pool2d(F.pad(torch.ones_like(x[:, :1]), pad), self.kernel, self.strides)
        return total / inside


def pool2d(is_max, kernel, strides, same):
    if is_max:
        return ChannelsLast(nn.MaxPool2d(kernel, strides), (kernel[0], kernel[1], strides[0], strides[1]) if same else None, -math.inf)
    return ChannelsLast(AvgPoolSame(kernel, strides) if same else nn.AvgPool2d(kernel, strides))


class GlobalAveragePooling2D(nn.Module):
    def forward(self, x):
        return x.mean(dim=(1, 2))


class Reshape(nn.Module):
    def __init__(self, shape):
        super().__init__()
        self.shape = shape

    def forward(self, x):
        return x.reshape((x.shape[0],) + self.shape)
)PY";

// Keras' BatchNormalization written out: PyTorch's BatchNorm1d/2d take the channel axis second (a
// rank-2 sample such as (14, 56) would be normalised over 14 "channels"), keep an unbiased running
// variance, and under DDP keep rank 0's running statistics; SyncBatchNorm runs on GPUs only.
const char* kBatchNormPython = R"PY(


class KerasBatchNorm(nn.Module):
    """Keras' BatchNormalization over the last axis, for samples of any rank ((C,), (H, W, C), (14, 56)...):
    the statistics are taken per channel over every other axis, in float64, as Mirrorlab takes them.
    Training normalises with the shard's statistics, or with the global batch's when synchronized (an
    all-reduce that autograd follows, on CPUs and GPUs); the moving mean and the biased moving variance
    follow the global batch's statistics in both cases (one more all-reduce), as Mirrorlab's do, so
    every replica keeps the same. Evaluation normalises with them."""

    def __init__(self, name, channels, momentum, epsilon, center, scale, synchronized):
        super().__init__()
        self.keras_name = name  # NAME/gamma, NAME/beta, NAME/moving_mean, NAME/moving_variance in a weights file
        self.momentum, self.epsilon, self.synchronized = momentum, epsilon, synchronized
        self.weight = nn.Parameter(torch.ones(channels)) if scale else None
        self.bias = nn.Parameter(torch.zeros(channels)) if center else None
        self.register_buffer("running_mean", torch.zeros(channels))
        self.register_buffer("running_var", torch.ones(channels))

    def forward(self, x):
        shape, channels = x.shape, x.shape[-1]
        rows = x.reshape(-1, channels)
        if self.training:
            wide = rows.double()
            sums = torch.cat([wide.sum(0), (wide * wide).sum(0), wide.new_full((1,), float(len(rows)))])
            total = sums.detach().clone()
            if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
                dist.all_reduce(total)  # the global batch's sums, for the moving statistics
                if self.synchronized:  # normalise by them too; backward then sums the replicas' gradients
                    from torch.distributed.nn.functional import all_reduce
                    sums = all_reduce(sums)
            mean, var = channel_moments(sums, channels)
            global_mean, global_var = channel_moments(total, channels)
            with torch.no_grad():
                self.running_mean.copy_(self.running_mean.double() * self.momentum + global_mean * (1 - self.momentum))
                self.running_var.copy_(self.running_var.double() * self.momentum + global_var * (1 - self.momentum))
        else:
            mean, var = self.running_mean.double(), self.running_var.double()
        y = (rows - mean.float()) * (1 / (var + self.epsilon).sqrt()).float()
        if self.weight is not None:
            y = y * self.weight
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(shape)


def channel_moments(sums, channels):
    """Per channel mean and biased variance from [sum x (C), sum x^2 (C), count], as Mirrorlab computes them."""
    count = sums[-1].clamp(min=1)
    mean = sums[:channels] / count
    return mean, (sums[channels:2 * channels] / count - mean * mean).clamp(min=0)
)PY";

bool hasDropout(const ModelPlan& m) {
  for (const auto& l : m.layers)
    if (l.as<DropoutSpec>() && l.as<DropoutSpec>()->rate > 0) return true;
  return false;
}

// loss_sum(out, y) and metric_sum(out, y): sums over the samples, as Keras defines them per sample.
std::string torchLossPython(const TrainingSpec& t, const std::string& fold, bool accuracy) {
  const LossKind kind = Loss::make(t.loss, t.fromLogits).kind();
  const bool logits = t.fromLogits || !fold.empty();
  std::string out =
      "\n\ndef loss_sum(out, y):\n    \"\"\"The loss summed over the samples (the caller divides by the global batch).\"\"\"\n";
  const std::string clipped =
      fold.empty() ? "from_logits"
                   : fold + " + crossentropy, on the logits (Mirrorlab reports it with p clipped to [1e-7, 1 - 1e-7])";
  if (kind == LossKind::BinaryCrossentropy && logits)
    out +=
        "    targets = y.float().reshape(out.shape)  # 0/1 per output\n"
        "    return F.binary_cross_entropy_with_logits(out, targets, reduction=\"sum\") / out.shape[1]  # " +
        clipped + "; per sample the mean over the outputs, as Keras\n";
  else if (kind == LossKind::BinaryCrossentropy)
    out +=
        "    targets = y.float().reshape(out.shape)  # 0/1 per output\n"
        "    return F.binary_cross_entropy(out.clamp(1e-7, 1 - 1e-7), targets, reduction=\"sum\") / out.shape[1]  # clipped as "
        "Keras\n";
  else if (kind != LossKind::MeanSquaredError && logits)
    out += "    return F.cross_entropy(out, y, reduction=\"sum\")  # " + clipped + "\n";
  else if (kind != LossKind::MeanSquaredError)
    out +=
        "    return F.nll_loss(torch.log(out.clamp(1e-7, 1 - 1e-7)), y, reduction=\"sum\")  # crossentropy on probabilities, "
        "clipped as Keras\n";
  else
    out += "    return F.mse_loss(out, y, reduction=\"sum\") / out.shape[1]  # per sample: the mean over the outputs, as Keras\n";
  if (kind == LossKind::CategoricalCrossentropy)
    out += "# categorical_crossentropy on one-hot targets is the same loss on class indices, which this program keeps.\n";
  out += "\n\ndef metric_sum(out, y):\n";
  if (accuracy && kind == LossKind::BinaryCrossentropy)
    out += std::string("    decided = out > ") + (logits ? "0" : "0.5") +
           "  # binary accuracy: the probability above one half\n"
           "    return (decided.float() == y.float().reshape(out.shape)).float().mean(dim=1).sum().item()\n";
  else if (accuracy)
    out += "    return (out.argmax(dim=1) == y).sum().item()\n";
  else
    out += "    return (out - y.reshape(out.shape)).abs().mean(dim=1).sum().item()\n";
  return out;
}

// The opening comment's lines: the mirrored mapping and what differs from Mirrorlab.
std::vector<std::string> torchMapping(const Project& p, const ModelPlan& model) {
  const TrainingSpec& t = p.training;
  const std::string batchWords =
      t.perDeviceBatch ? std::to_string(t.batchSize) + " per replica per micro-batch" : std::to_string(t.batchSize) + " in all";
  std::vector<std::string> mapping = {
      "Mirrored training: one process per device (a replica), each holding a full copy of the model.",
      "Every process computes the same permutation of the training set (Mirrorlab's shuffle); each global",
      "batch (" + batchWords + ") is cut into ACCUMULATE micro-batches and each micro-batch into world_size",
      "shards whose sizes differ by at most one. Each replica sums its shard's losses and scales the sum by",
      "world_size / B (B: samples in the global batch); during backward DDP all-reduces the gradients and",
      "divides by world_size, so every replica holds the gradient of the mean loss over the global batch and",
      "applies the same update. Micro-batches before the last run under ddp.no_sync() and all-reduce once."};
  if (needsHelpers(model, kTorchBatchNorm)) {
    mapping.push_back("BatchNormalization: Keras' layer written out (KerasBatchNorm): the last axis of any sample shape, each");
    mapping.push_back("shard's statistics (the global batch's when synchronized, on CPUs too), and moving statistics that");
    mapping.push_back("follow the global batch on every replica, as Mirrorlab's (PyTorch's BatchNorm would keep rank 0's).");
  }
  if (t.precision != Precision::Float32) {
    mapping.push_back(std::string("Mixed precision (") + toString(t.precision) +
                      "): torch.autocast computes the layers in the low format over");
    mapping.push_back("float32 master weights" +
                      std::string(t.precision == Precision::MixedFloat16
                                      ? ", with a GradScaler as Keras' dynamic loss scaling (CUDA only: PyTorch's"
                                      : "."));
    if (t.precision == Precision::MixedFloat16)
      mapping.push_back("CPU autocast has no float16, so a CPU run computes in float32).");
    mapping.push_back("Differs from Mirrorlab: autocast rounds where PyTorch's kernels do (Mirrorlab rounds each layer's");
    mapping.push_back("input, kernel, output and gradients), so the runs agree to the low format's precision only.");
  }
  if (hasDropout(model)) {
    mapping.push_back("Differs from Mirrorlab: dropout masks are PyTorch's draws (a generator seeded per rank), not");
    mapping.push_back("Mirrorlab's masks keyed by step and sample, so with dropout the runs agree in distribution only.");
  }
  return mapping;
}

// The project's settings as the program's constants.
std::string torchConstants(const Project& p, bool accuracy) {
  const TrainingSpec& t = p.training;
  std::string out;
  out += "EPOCHS = " + pyInt(t.epochs) + "\nSEED = " + std::to_string(t.seed) + "\n";
  out += "DEFAULT_WORLD_SIZE = " + std::to_string(projectReplicas(p) * projectWorkers(p)) +
         "  # the project's replicas: " + pyDocText(p.distribute.devices.spec) +
         (projectWorkers(p) > 1 ? " on each of " + std::to_string(projectWorkers(p)) + " workers" : "") + "\n";
  out += globalBatchPython(p);
  out += "ACCUMULATE = " + std::to_string(t.accumulate) + "  # micro-batches per update, all-reduced once\n";
  out += "BASE_LEARNING_RATE = " + pyNum(t.optimizer.learningRate) + "  # set for a global batch of REFERENCE_BATCH\n";
  out += "REFERENCE_BATCH = " + pyInt(lrReferenceBatch(t)) + "  # the global batch BASE_LEARNING_RATE was set for\n";
  out += "LR_SCALING = " + pyStr(toString(t.lrScaling)) +
         "  # none | linear | sqrt: the rate follows global_batch / REFERENCE_BATCH\n";
  out += "WARMUP_EPOCHS = " + pyNum(t.warmupEpochs) + "\n";
  {
    std::string epochs;
    for (const int64_t e : t.lrDecayEpochs) epochs += (epochs.empty() ? "" : ", ") + std::to_string(e);
    out += "LR_DECAY_EPOCHS = [" + epochs + "]  # after this many finished epochs the rate is multiplied by LR_DECAY_FACTOR\n";
    out += "LR_DECAY_FACTOR = " + pyNum(t.lrDecayFactor) + "\n";
  }
  out += "METRIC = " + pyStr(accuracy ? "accuracy" : "mae") + "\n";
  const bool half = t.precision == Precision::MixedFloat16, bf = t.precision == Precision::MixedBfloat16;
  out += "PRECISION = " + pyStr(toString(t.precision)) + "  # Keras' policy name\n";
  out += std::string("TF32 = ") + (p.distribute.tf32 ? "True" : "False") +
         "  # GPUs: float32 products on TF32 tensor cores (distribute.tf32)\n";
  out += std::string("AMP_DTYPE = ") +
         (half ? "torch.float16"
          : bf ? "torch.bfloat16"
               : "None") +
         "  # torch.autocast's dtype (None: float32)\n";
  out += "LOSS_SCALE = " + (half && t.lossScaling ? pyNum(t.lossScale) : std::string("None")) +
         "  # the initial dynamic loss scale of float16 (None: no loss scaling)\n";
  out += "LOSS_SCALE_GROWTH_STEPS = " + std::to_string(t.lossScaleGrowthSteps) + "  # finite steps that double it\n";
  out += "ALLREDUCE_DTYPE = " + pyStr(toString(p.distribute.allreduceDtype)) +
         "  # the gradients between replicas: float32 | bfloat16 (DDP's bf16_compress_hook: half the bytes)\n";
  return out;
}

}  // namespace

std::string generatePyTorchProgram(const Project& p) {
  const ModelPlan model = planModel(p);
  const TrainingSpec& t = p.training;
  const LossKind kind = Loss::make(t.loss, t.fromLogits).kind();
  const bool classes = kind != LossKind::MeanSquaredError;
  const std::string foldable = kind == LossKind::BinaryCrossentropy ? "sigmoid" : classes ? "softmax" : "";
  const std::string fold =
      !foldable.empty() && !t.fromLogits && !model.layers.empty() && toString(model.layers.back().activation) == foldable
          ? foldable
          : "";
  const std::string metric = t.metrics.empty() ? (classes ? "accuracy" : "mae") : t.metrics.front();
  const bool accuracy = metric == "accuracy" || metric == "acc" || metric == "binary_accuracy";
  const std::string file = suggestedFileName(p, Framework::PyTorch);
  std::string out = headerComment(p, "PyTorch DistributedDataParallel", torchMapping(p, model));
  out += "\"\"\"Run on this machine:  python3 " + file +
         " [--world-size N] [--steps N] [--cpu] [--weights FILE.npz]\n"
         "or with torchrun:      torchrun --nproc_per_node=N " +
         file +
         "\n"
         "Check saved weights:   python3 " +
         file +
         " --weights FILE.npz --predict-only\n\n"
         "Needs PyTorch and numpy. NCCL with one GPU per process when CUDA is available, else gloo on the CPU.\n"
         "Start from Mirrorlab's weights to train step for step as Mirrorlab does:\n"
         "    mirrorlab-cli train PROJECT --steps 1 --save-initial-weights init.npz --no-record\n"
         "Without --weights, the initial weights are PyTorch's draws from Keras' distributions.\n"
         "Project: " +
         pyDocText(p.description) + "\n\"\"\"\n";
  out +=
      "import argparse\nimport contextlib\nimport gzip\nimport math\nimport os\nimport socket\nimport sys\n\nimport numpy as "
      "np\nimport torch\n"
      "import torch.distributed as dist\nimport torch.multiprocessing as mp\nimport torch.nn as nn\nimport torch.nn.functional "
      "as F\n"
      "from torch.nn.parallel import DistributedDataParallel as DDP\n\n";
  out += torchConstants(p, accuracy);
  out += dataLoaderPython(p);
  out += "\n\n# ---- model: " + std::to_string(model.params) + " parameters ----";
  out += torchInitPython();
  if (needsHelpers(model, kTorchSpatial)) out += kSpatialPython;
  if (needsHelpers(model, kTorchBatchNorm)) out += kBatchNormPython;
  out += "\n\ndef build_model():\n    return nn.Sequential(\n" + torchLayers(model, fold) + "    )\n";
  out += torchOptimizerPython(t.optimizer);
  out += torchLossPython(t, fold, accuracy);
  out += torchTrainPython();
  return out;
}

}  // namespace ml
