// The PyTorch program: one process per replica (torchrun's env:// variables, else mp.spawn),
// gloo on the CPU or NCCL on GPUs, DistributedSampler shards, DistributedDataParallel averaging
// the gradients during backward, Keras' initialisers and Adam epsilon, the learning-rate rule
// with warm-up, and --steps N to stop early.
#include "learn/CodeGen.h"
#include "project/LrScaling.h"
#include "learn/CodeGenParts.h"

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

std::string torchOptimizer(const OptimizerSpec& o) {
  if (o.name == "sgd")
    return "torch.optim.SGD(params, lr=learning_rate, momentum=" + pyNum(o.momentum) + ", nesterov=" + pyBool(o.nesterov) + ")";
  if (o.name == "rmsprop")  // Keras adds epsilon inside the square root, PyTorch outside: close, not equal
    return "torch.optim.RMSprop(params, lr=learning_rate, alpha=" + pyNum(o.rho) + ", eps=" + pyNum(o.epsilon) +
           ", momentum=" + pyNum(o.momentum) + ")";
  return "torch.optim.Adam(params, lr=learning_rate, betas=(" + pyNum(o.beta1) + ", " + pyNum(o.beta2) + "), eps=" + pyNum(o.epsilon) +
         ")  # Keras' epsilon (PyTorch's default is 1e-8)";
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
        out += "        dense(" + pyInt(l.inFeatures) + ", " + pyInt(l.units) + ", " + pyStr(l.kernelInit) + ", " + pyStr(l.biasInit) +
               ", " + pyBool(l.useBias) + ")," + tag;
      if (last && foldSoftmax && l.activation == "softmax")
        out += "        # softmax: folded into the loss (F.cross_entropy takes the logits)\n";
      else if (const std::string a = torchActivation(l.activation); !a.empty())
        out += "        " + a + "," + (l.type == "Activation" ? tag : "\n");
    }
  }
  return out;
}

constexpr const char* kInit = R"PY(

def init_weights(tensor, name, fan_in, fan_out):
    """Keras' initialisers, with Keras' fans (a kernel is (in, out); PyTorch stores it as (out, in))."""
    with torch.no_grad():
        if name == "zeros":
            nn.init.zeros_(tensor)
        elif name == "ones":
            nn.init.ones_(tensor)
        elif name == "glorot_uniform" and tensor.dim() == 2:
            nn.init.xavier_uniform_(tensor)
        elif name == "he_uniform" and tensor.dim() == 2:
            nn.init.kaiming_uniform_(tensor, nonlinearity="relu")  # bound sqrt(6 / fan_in), as Keras
        elif name in ("glorot_uniform", "he_uniform"):
            limit = math.sqrt(6.0 / (fan_in + fan_out) if name == "glorot_uniform" else 6.0 / fan_in)
            tensor.uniform_(-limit, limit)
        elif name in ("glorot_normal", "he_normal"):
            # Keras draws from a normal truncated at 2 std, scaled so the kept values have the intended std.
            std = math.sqrt(2.0 / (fan_in + fan_out) if name == "glorot_normal" else 2.0 / fan_in) / 0.87962566103423978
            nn.init.trunc_normal_(tensor, std=std, a=-2 * std, b=2 * std)
        else:
            raise ValueError("unknown initializer " + name)


def dense(in_features, units, kernel_init, bias_init, use_bias):
    layer = nn.Linear(in_features, units, bias=use_bias)
    init_weights(layer.weight, kernel_init, in_features, units)
    if use_bias:
        init_weights(layer.bias, bias_init, units, units)
    return layer
)PY";

constexpr const char* kTrain = R"PY(

def evaluate(model, x, y, device, batch):
    model.eval()
    totals = torch.zeros(3, dtype=torch.float64)
    with torch.no_grad():
        for i in range(0, len(x), batch):
            xb = torch.from_numpy(x[i:i + batch]).to(device)
            yb = torch.from_numpy(y[i:i + batch]).to(device)
            out = model(xb)
            totals += torch.tensor([loss_fn(out, yb).item() * len(xb), metric_sum(out, yb), len(xb)], dtype=torch.float64)
    return totals[0].item() / totals[2].item(), totals[1].item() / totals[2].item()


def train(rank, world_size, local_rank, args):
    use_cuda = torch.cuda.is_available() and not args.cpu
    # env:// rendezvous: MASTER_ADDR and MASTER_PORT come from torchrun or from main().
    dist.init_process_group("nccl" if use_cuda else "gloo", rank=rank, world_size=world_size)
    if use_cuda:
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world_size))
    torch.manual_seed(SEED)  # the same initial weights everywhere (DDP also broadcasts rank 0's)

    x_train, y_train, x_val, y_val, num_classes = load_data(args.data)
)PY";

constexpr const char* kLoop = R"PY(    train_set = TensorDataset(torch.from_numpy(x_train), torch.from_numpy(y_train))
    # Each replica reads its own 1/world_size of every epoch's shuffled order (the same seed everywhere).
    sampler = DistributedSampler(train_set, num_replicas=world_size, rank=rank, shuffle=True, seed=SEED)
    loader = DataLoader(train_set, batch_size=per_replica, sampler=sampler)
    steps_per_epoch = len(loader)

    model = build_model().to(device)
    ddp = DDP(model, device_ids=[device.index] if use_cuda else None)
    lr_factor = @LR_FACTOR@
    learning_rate = BASE_LEARNING_RATE * lr_factor
    optimizer = make_optimizer(ddp.parameters(), learning_rate)
    warmup_steps = WARMUP_EPOCHS * steps_per_epoch

    def lr_at(step):  # linear warm-up from the base rate to the scaled rate, as Mirrorlab's trainer
        if step < warmup_steps:
            return BASE_LEARNING_RATE + (learning_rate - BASE_LEARNING_RATE) * step / warmup_steps
        return learning_rate

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_at(step) / learning_rate)
    if rank == 0:
        print(f"{world_size} replica(s) on {device.type} ({dist.get_backend()}): {world_size} x {per_replica} = "
              f"{global_batch} samples per step; learning rate {BASE_LEARNING_RATE} x {lr_factor:g} = {learning_rate:g} "
              f"({LR_SCALING} scaling)", flush=True)

    step = 0
    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)
        ddp.train()
        totals = torch.zeros(3, dtype=torch.float64)  # loss sum, metric sum, samples over this replica's shards
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            lr = optimizer.param_groups[0]["lr"]
            out = ddp(x)
            loss = loss_fn(out, y)  # the mean over this replica's shard
            optimizer.zero_grad(set_to_none=True)
            loss.backward()  # DDP all-reduces gradient buckets as they are ready and divides by world_size
            optimizer.step()  # the same averaged gradient on every replica: the same update
            scheduler.step()
            step += 1
            totals += torch.tensor([loss.item() * len(x), metric_sum(out.detach(), y), len(x)], dtype=torch.float64)
            if args.steps and step >= args.steps:
                break
        totals = totals.to(device)
        dist.all_reduce(totals)  # sums over the replicas (NCCL wants the tensor on the GPU)
        totals = totals.cpu()
        if rank == 0:
            line = (f"epoch {epoch}/{args.epochs}: loss {totals[0].item() / totals[2].item():.6f} "
                    f"{METRIC} {totals[1].item() / totals[2].item():.4f} lr {lr:.6g} ({step} steps)")
            if x_val is not None:
                val_loss, val_metric = evaluate(model, x_val, y_val, device, global_batch)
                line += f" val_loss {val_loss:.6f} val_{METRIC} {val_metric:.4f}"
            print(line, flush=True)
        dist.barrier()
        if args.steps and step >= args.steps:
            break
    if rank == 0:
        print(f"done: {step} steps on {world_size} replica(s)", flush=True)
    dist.destroy_process_group()


def spawned(rank, world_size, args):
    train(rank, world_size, rank, args)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--steps", type=int, default=0, help="stop after this many updates (0: every epoch)")
    parser.add_argument("--world-size", type=int, default=0, help="processes to start without torchrun")
    parser.add_argument("--cpu", action="store_true", help="train on the CPU (gloo) even when CUDA is available")
    parser.add_argument("--data", default=None, help="folder holding the data files")
    args = parser.parse_args()
    if "RANK" in os.environ and "LOCAL_RANK" in os.environ:  # started by torchrun: one process per replica
        train(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"]), args)
        return
    world_size = args.world_size or int(os.environ.get("WORLD_SIZE", "0")) or DEFAULT_WORLD_SIZE
    if torch.cuda.is_available() and not args.cpu and world_size > torch.cuda.device_count():
        print(f"note: {world_size} replicas asked for but {torch.cuda.device_count()} GPU(s) visible: NCCL needs "
              f"one GPU per process", file=sys.stderr)
        world_size = torch.cuda.device_count()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    if world_size == 1:
        train(0, 1, 0, args)
    else:
        mp.spawn(spawned, args=(world_size, args), nprocs=world_size, join=True)


if __name__ == "__main__":
    main()
)PY";

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
  const std::string batchWords = t.perDeviceBatch ? std::to_string(t.batchSize) + " per replica" : std::to_string(t.batchSize) + " in all";
  std::string out = headerComment(
      p, "PyTorch DistributedDataParallel",
      {"Mirrored training: one process per device (a replica), each holding a full copy of the model;",
       "DistributedSampler splits every global batch (" + batchWords + ") into world_size shards, one per replica;",
       "during backward DDP all-reduces the gradients and divides by world_size (the mean over the global batch),",
       "so every replica applies the same update and the copies stay identical."});
  out += "\"\"\"Run on this machine:  python3 " + file + " [--world-size N] [--steps N] [--cpu]\n"
         "or with torchrun:      torchrun --nproc_per_node=N " + file + "\n\n"
         "Needs PyTorch and numpy. NCCL with one GPU per process when CUDA is available, else gloo on the CPU.\n"
         "Project: " + pyDocText(p.description) + "\n\"\"\"\n";
  out += "import argparse\nimport gzip\nimport math\nimport os\nimport socket\nimport sys\n\nimport numpy as np\nimport torch\n"
         "import torch.distributed as dist\nimport torch.multiprocessing as mp\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
         "from torch.nn.parallel import DistributedDataParallel as DDP\nfrom torch.utils.data import DataLoader, TensorDataset\n"
         "from torch.utils.data.distributed import DistributedSampler\n\n";
  out += "EPOCHS = " + pyInt(t.epochs) + "\nSEED = " + std::to_string(t.seed) + "\n";
  out += "DEFAULT_WORLD_SIZE = " + std::to_string(projectReplicas(p)) + "  # the project's devices: " + pyDocText(p.distribute.devices) + "\n";
  if (t.perDeviceBatch)
    out += "PER_REPLICA_BATCH = " + pyInt(t.batchSize) + "  # the project's batch per device: global = this x world_size\n";
  else
    out += "GLOBAL_BATCH = " + pyInt(t.batchSize) + "  # the project's global batch: each replica gets GLOBAL_BATCH / world_size\n";
  out += "BASE_LEARNING_RATE = " + pyNum(t.optimizer.learningRate) + "  # set for a global batch of REFERENCE_BATCH\n";
  out += "REFERENCE_BATCH = " + pyInt(lrReferenceBatch(t)) + "\n";
  out += "LR_SCALING = " + pyStr(t.lrScaling) + "  # none | linear | sqrt: the rate follows global_batch / REFERENCE_BATCH\n";
  out += "WARMUP_EPOCHS = " + pyNum(t.warmupEpochs) + "\n";
  out += "METRIC = " + pyStr(accuracy ? "accuracy" : "mae") + "\n";
  if (t.accumulate > 1)
    out += "# The project accumulates " + std::to_string(t.accumulate) +
           " micro-batches per update; the update (one global batch) is the same without it, so this program does not.\n";
  out += dataLoaderPython(p);
  out += "\n\n# ---- model: " + std::to_string(model.params) + " parameters ----";
  out += kInit;
  out += "\n\ndef build_model():\n    return nn.Sequential(\n" + torchLayers(model, foldSoftmax) + "    )\n";
  out += "\n\ndef make_optimizer(params, learning_rate):\n    return " + torchOptimizer(t.optimizer) + "\n";
  out += "\n\ndef loss_fn(out, y):\n";
  if (logits)
    out += "    return F.cross_entropy(out, y)  # " + std::string(foldSoftmax ? "softmax + crossentropy, on the logits" : "from_logits") + "\n";
  else if (ce)
    out += "    return F.nll_loss(torch.log(out.clamp(1e-7, 1 - 1e-7)), y)  # crossentropy on probabilities, clipped as Keras\n";
  else
    out += "    return F.mse_loss(out, y)\n";
  if (t.loss == "categorical_crossentropy")
    out += "# categorical_crossentropy on one-hot targets is the same loss on class indices, which this program keeps.\n";
  out += "\n\ndef metric_sum(out, y):\n";
  if (accuracy)
    out += "    return (out.argmax(dim=1) == y).sum().item()\n";
  else
    out += "    return (out - y.reshape(out.shape)).abs().mean(dim=1).sum().item()\n";
  out += kTrain;
  if (t.perDeviceBatch)
    out += "    per_replica = PER_REPLICA_BATCH\n    global_batch = per_replica * world_size\n";
  else
    out += "    global_batch = GLOBAL_BATCH\n    per_replica = math.ceil(global_batch / world_size)  # DistributedSampler pads to equal shards\n";
  std::string loop = kLoop;
  loop.replace(loop.find("@LR_FACTOR@"), 11, lrScalingPython());
  out += loop;
  return out;
}

}  // namespace ml
