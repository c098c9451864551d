// Python text of the PyTorch program that does not depend on the model: Keras' initialisers and
// the .npz weights reader, Keras' optimizer steps, and the mirrored training loop.
#include "learn/CodeGenTorchParts.h"

#include "learn/CodeGenParts.h"
#include "project/LrScaling.h"

namespace ml::codegen {

// Long: one raw string, the Python of Keras' initialisers and the .npz reader, kept whole so that
// it reads as the program it writes.
std::string torchInitPython() {
  return R"PY(

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
        elif name == "random_normal":  # Keras' RandomNormal(): stddev 0.05
            nn.init.normal_(tensor, std=0.05)
        elif name == "random_uniform":  # Keras' RandomUniform(): -0.05 to 0.05
            nn.init.uniform_(tensor, -0.05, 0.05)
        else:
            raise ValueError("unknown initializer " + name)


def dense(name, in_features, units, kernel_init, bias_init, use_bias):
    layer = nn.Linear(in_features, units, bias=use_bias)
    layer.keras_name = name  # its arrays in a weights file: NAME/kernel (in, out) and NAME/bias
    init_weights(layer.weight, kernel_init, in_features, units)
    if use_bias:
        init_weights(layer.bias, bias_init, units, units)
    return layer


def weight_arrays(layer, name):
    """(tensor, key in a weights file, layout) of a layer: Keras' Dense kernel is (in, out), nn.Linear's weight
    (out, in); a Conv2D kernel (kh, kw, in, filters), nn.Conv2d's (filters, in, kh, kw)."""
    if isinstance(layer, (nn.Linear, nn.Conv2d)):
        arrays = [(layer.weight, name + "/kernel", "T" if isinstance(layer, nn.Linear) else "HWIO"), (layer.bias, name + "/bias", None)]
    else:  # KerasBatchNorm: gamma and beta when it has them, then the moving statistics
        arrays = [(layer.weight, name + "/gamma", None), (layer.bias, name + "/beta", None),
                  (layer.running_mean, name + "/moving_mean", None), (layer.running_var, name + "/moving_variance", None)]
    return [a for a in arrays if a[0] is not None]


def load_weights(model, path):
    """Weights saved by Mirrorlab (mirrorlab-cli train --save-initial-weights / --save-weights FILE.npz)."""
    with np.load(path) as z:
        for layer in model.modules():
            name = getattr(layer, "keras_name", None)
            for param, key, layout in weight_arrays(layer, name) if name is not None else []:
                if key not in z.files:
                    sys.exit(f"{path}: no array {key!r} (it holds {', '.join(z.files)}): save it from this project")
                value = torch.from_numpy(np.ascontiguousarray(z[key], dtype=np.float32))
                value = value.T if layout == "T" else value.permute(3, 2, 0, 1) if layout == "HWIO" else value
                if tuple(value.shape) != tuple(param.shape):
                    sys.exit(f"{path}: array {key!r} has shape {tuple(z[key].shape)}, this model needs another: save it from this project")
                with torch.no_grad():
                    param.copy_(value)


def save_weights(model, path):
    """The weights in Mirrorlab's names and layouts (mirrorlab-cli evaluate PROJECT --weights FILE.npz reads them)."""
    arrays = {}
    for layer in model.modules():
        name = getattr(layer, "keras_name", None)
        for param, key, layout in weight_arrays(layer, name) if name is not None else []:
            value = param.detach().cpu()
            arrays[key] = (value.T if layout == "T" else value.permute(2, 3, 1, 0) if layout == "HWIO" else value).numpy()
    np.savez(path, **arrays)
)PY";
}

// Long: mostly the Python text of each optimizer (Keras' update rules written for PyTorch),
// one raw string per optimizer kind.
std::string torchOptimizerPython(const OptimizerSpec& o) {
  if (o.kind == OptimizerKind::Sgd && o.momentum == 0.0)
    return "\n\ndef make_optimizer(params, learning_rate):\n"
           "    return torch.optim.SGD(params, lr=learning_rate)  # p -= lr * g: the same formula as Keras\n";
  if (o.kind == OptimizerKind::Sgd)
    return R"PY(

class KerasSGD(torch.optim.Optimizer):
    """Keras' SGD with momentum: v = momentum * v - lr * g, then p += v (or, with Nesterov,
    p += momentum * v - lr * g). PyTorch's SGD keeps v without the rate and multiplies by the rate
    afterwards, which is the same update only while the rate is constant (not during a warm-up)."""

    def __init__(self, params, lr, momentum, nesterov):
        super().__init__(params, dict(lr=lr, momentum=momentum, nesterov=nesterov))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, momentum = group["lr"], group["momentum"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["velocity"] = torch.zeros_like(p)
                v = state["velocity"]
                v.mul_(momentum).sub_(p.grad, alpha=lr)
                if group["nesterov"]:
                    p.add_(v * momentum - lr * p.grad)
                else:
                    p.add_(v)


def make_optimizer(params, learning_rate):
    return KerasSGD(params, lr=learning_rate, momentum=)PY" +
           pyNum(o.momentum) + ", nesterov=" + pyBool(o.nesterov) + ")\n";
  if (o.kind == OptimizerKind::RmsProp)
    return R"PY(

class KerasRMSprop(torch.optim.Optimizer):
    """Keras' RMSprop (not centered): v = rho * v + (1 - rho) * g^2, step = lr * g / sqrt(v + epsilon),
    then p -= step, or with momentum mom = momentum * mom + step and p -= mom. PyTorch's RMSprop
    divides by sqrt(v) + eps and applies the rate after the momentum, so this class writes Keras' out."""

    def __init__(self, params, lr, rho, momentum, epsilon):
        super().__init__(params, dict(lr=lr, rho=rho, momentum=momentum, epsilon=epsilon))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, rho, momentum, eps = group["lr"], group["rho"], group["momentum"], group["epsilon"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["v"] = torch.zeros_like(p)
                    state["momentum"] = torch.zeros_like(p)
                v, g = state["v"], p.grad
                v.mul_(rho).addcmul_(g, g, value=1 - rho)
                increment = lr * g / (v + eps).sqrt()
                if momentum > 0:
                    state["momentum"].mul_(momentum).add_(increment)
                    increment = state["momentum"]
                p.sub_(increment)


def make_optimizer(params, learning_rate):
    return KerasRMSprop(params, lr=learning_rate, rho=)PY" +
           pyNum(o.rho) + ", momentum=" + pyNum(o.momentum) + ", epsilon=" + pyNum(o.epsilon) + ")\n";
  return R"PY(

class KerasAdam(torch.optim.Optimizer):
    """Keras' Adam: m = b1 * m + (1 - b1) * g, v = b2 * v + (1 - b2) * g^2,
    alpha = lr * sqrt(1 - b2^t) / (1 - b1^t), p -= alpha * m / (sqrt(v) + epsilon). PyTorch's Adam
    adds epsilon after dividing sqrt(v) by sqrt(1 - b2^t), a different step while v is small. As in
    Keras, 1 - b1 and 1 - b2 are taken in double and alpha in float32 (1 - 0.999f = 0.00099998713)."""

    def __init__(self, params, lr, beta_1, beta_2, epsilon):
        super().__init__(params, dict(lr=lr, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            b1, b2, eps = group["beta_1"], group["beta_2"], group["epsilon"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["t"], state["m"], state["v"] = 0, torch.zeros_like(p), torch.zeros_like(p)
                state["t"] += 1
                t, m, v, g = state["t"], state["m"], state["v"], p.grad
                f32 = np.float32
                alpha = float(f32(group["lr"]) * np.sqrt(f32(1) - f32(b2) ** f32(t)) / (f32(1) - f32(b1) ** f32(t)))
                m.mul_(b1).add_(g, alpha=1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                p.addcdiv_(m, v.sqrt().add_(eps), value=-alpha)


def make_optimizer(params, learning_rate):
    return KerasAdam(params, lr=learning_rate, beta_1=)PY" +
         pyNum(o.beta1) + ", beta_2=" + pyNum(o.beta2) + ", epsilon=" + pyNum(o.epsilon) + ")\n";
}

namespace {

constexpr const char* kEvaluate = R"PY(

def evaluate(model, x, y, device, batch):
    model.eval()
    totals = torch.zeros(3, dtype=torch.float64)
    with torch.no_grad():
        for i in range(0, len(x), batch):
            xb = torch.from_numpy(x[i:i + batch]).to(device)
            yb = torch.from_numpy(y[i:i + batch]).to(device)
            out = model(xb)
            totals += torch.tensor([loss_sum(out, yb).item(), metric_sum(out, yb), len(xb)], dtype=torch.float64)
    return totals[0].item() / totals[2].item(), totals[1].item() / totals[2].item()


def predict_only(args):
    """--predict-only: the loss and metric of the (loaded) weights over the training and validation data."""
    x_train, y_train, x_val, y_val, num_classes = load_data(args.data)
    x_train, x_val = as_input(x_train), as_input(x_val)
    torch.manual_seed(SEED)
    model = build_model()
    if args.weights:
        load_weights(model, args.weights)
    for name, x, y in (("train", x_train, y_train), ("val", x_val, y_val)):
        if x is not None:
            loss, metric = evaluate(model, x, y, torch.device("cpu"), 1024)
            print(f"{name}: loss {loss:.9g} {METRIC} {metric:.9g} ({len(x)} samples)", flush=True)


def lr_schedule(global_batch, steps_per_epoch):
    """The scaled rate (global batch against REFERENCE_BATCH), Mirrorlab's linear warm-up from the
    base rate to it, by updates done, and the step decay after LR_DECAY_EPOCHS finished epochs."""
    factor = @LR_FACTOR@
    target = BASE_LEARNING_RATE * factor
    warmup_steps = WARMUP_EPOCHS * steps_per_epoch

    def lr_at(step):
        lr = target
        if step < warmup_steps:
            lr = BASE_LEARNING_RATE + (target - BASE_LEARNING_RATE) * step / warmup_steps
        for after in LR_DECAY_EPOCHS:
            if step >= after * steps_per_epoch:
                lr *= LR_DECAY_FACTOR
        return lr
    return factor, target, lr_at


def shard_of(indices, part, parts):
    """Part `part` of `parts` nearly equal pieces (sizes differ by at most one), as Mirrorlab cuts them."""
    n = len(indices)
    return indices[n * part // parts:n * (part + 1) // parts]
)PY";

constexpr const char* kTrainStart = R"PY(

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

    x_train, y_train, x_val, y_val, num_classes = load_data(args.data)
    x_train, x_val = as_input(x_train), as_input(x_val)
    n = len(x_train)
)PY";

constexpr const char* kTrainLoop = R"PY(    if global_batch > n:
        sys.exit(f"global batch {global_batch} is larger than the training set ({n} samples)")
    steps_per_epoch = math.ceil(n / global_batch)
    total_steps = steps_per_epoch * args.epochs
    if args.steps:
        total_steps = min(total_steps, args.steps)

    torch.backends.cuda.matmul.allow_tf32 = TF32
    torch.backends.cudnn.allow_tf32 = TF32
    torch.manual_seed(SEED)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
    model = build_model()
    if args.weights:
        load_weights(model, args.weights)
    model = model.to(device)
    ddp = DDP(model, device_ids=[device.index] if use_cuda else None)
    if ALLREDUCE_DTYPE == "bfloat16" and world_size > 1:
        # The gradients cross as bfloat16, as Mirrorlab's distribute.allreduce_dtype: on GPUs PyTorch's
        # hook sends bfloat16 (half the bytes; it divides by the world size first, so the bits differ
        # slightly from Mirrorlab's). gloo cannot send bfloat16: on CPUs the values are rounded to it
        # before and after the sum and sent as float32.
        if use_cuda:
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)
        else:
            def bf16_values_hook(state, bucket):
                sent = bucket.buffer().to(torch.bfloat16).to(torch.float32)
                work = dist.all_reduce(sent, async_op=True).get_future()
                return work.then(lambda f: f.value()[0].to(torch.bfloat16).to(torch.float32).div_(world_size))
            ddp.register_comm_hook(None, bf16_values_hook)
    # Dropout draws from this process's generator: one seed per rank, so the replicas drop different
    # units; the Dropout layers draw from it in turn, so no two layers share a mask.
    torch.manual_seed(SEED * 1000003 + rank + 1)
    lr_factor, learning_rate, lr_at = lr_schedule(global_batch, steps_per_epoch)
    optimizer = make_optimizer(ddp.parameters(), learning_rate)
    # Mixed precision: autocast computes the layers in AMP_DTYPE with float32 master weights; the
    # GradScaler is Keras' dynamic loss scaling (halve and skip on inf/NaN, double after the interval).
    amp_dtype = AMP_DTYPE
    if amp_dtype is torch.float16 and not use_cuda:
        if rank == 0:
            print("mixed_float16: PyTorch's CPU autocast has no float16, so this CPU run computes in float32", flush=True)
        amp_dtype = None
    scaler = torch.cuda.amp.GradScaler(init_scale=LOSS_SCALE or 1.0, growth_interval=LOSS_SCALE_GROWTH_STEPS,
                                       enabled=amp_dtype is torch.float16 and LOSS_SCALE is not None)
    if rank == 0:
        micro = math.ceil(global_batch / ACCUMULATE)
        shards = sorted({len(shard_of(range(micro), r, world_size)) for r in range(world_size)})
        per = "step" if ACCUMULATE == 1 else f"micro-batch, {ACCUMULATE} micro-batches = {global_batch} samples per step"
        print(f"{world_size} replica(s) on {device.type} ({dist.get_backend()}): {world_size} x {'-'.join(map(str, shards))} = "
              f"{micro} samples per {per}; learning rate {BASE_LEARNING_RATE} x {lr_factor:g} = {learning_rate:g} "
              f"({LR_SCALING} scaling)", flush=True)

    step = 0
    for epoch in range(1, args.epochs + 1):
        order = epoch_order(n, SEED, epoch)  # the same on every rank: no sampler, no padding
        ddp.train()
        totals = torch.zeros(3, dtype=torch.float64)  # loss sum, metric sum, samples over this replica's shards
        for i in range(steps_per_epoch):
            if step >= total_steps:
                break
            batch = order[i * global_batch:(i + 1) * global_batch]  # the last one of an epoch may be smaller
            lr = lr_at(step)
            for group in optimizer.param_groups:
                group["lr"] = lr
            optimizer.zero_grad(set_to_none=True)
            step_totals = torch.zeros(3, dtype=torch.float64)
            for m in range(ACCUMULATE):
                shard = shard_of(shard_of(batch, m, ACCUMULATE), rank, world_size)
                x = torch.from_numpy(x_train[shard]).to(device)
                y = torch.from_numpy(y_train[shard]).to(device)
                # Before the last micro-batch, no_sync(): gradients add up locally, one all-reduce per update.
                with ddp.no_sync() if m < ACCUMULATE - 1 else contextlib.nullcontext():
                    with torch.autocast(device.type, dtype=amp_dtype or torch.bfloat16, enabled=amp_dtype is not None):
                        out = ddp(x)
                    out = out.float()  # the loss in float32 under every policy
                    loss = loss_sum(out, y)
                    # DDP divides the all-reduced sum by world_size: scaled so, it is the global-batch mean.
                    scaler.scale(loss * (world_size / len(batch))).backward()
                step_totals += torch.tensor([loss.item(), metric_sum(out.detach(), y), len(shard)], dtype=torch.float64)
            scaler.step(optimizer)  # the same averaged gradient on every replica: the same update (or the same skip)
            scaler.update()
            step += 1
            totals += step_totals
            if args.print_steps:
                step_totals = step_totals.to(device)
                dist.all_reduce(step_totals)
                if rank == 0:
                    print(f"step {step} loss {step_totals[0].item() / step_totals[2].item():.9g} lr {lr:.9g}", flush=True)
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
        if step >= total_steps:
            break
    if rank == 0:
        print(f"done: {step} steps on {world_size} replica(s)", flush=True)
        if args.save_weights:
            save_weights(model, args.save_weights)
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
    parser.add_argument("--weights", default=None, help="start from these weights (.npz saved by Mirrorlab)")
    parser.add_argument("--save-weights", default=None, help="write the trained weights here (.npz, Mirrorlab's names)")
    parser.add_argument("--predict-only", action="store_true", help="only print the loss and metric of the weights")
    parser.add_argument("--print-steps", action="store_true", help="print the global-batch loss of every step")
    args = parser.parse_args()
    if args.predict_only:
        predict_only(args)
        return
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

std::string torchTrainPython() {
  std::string helpers = kEvaluate;
  helpers.replace(helpers.find("@LR_FACTOR@"), 11, lrScalingPython());
  return helpers + kTrainStart + "    global_batch = GLOBAL_BATCH\n" + kTrainLoop;
}

}  // namespace ml::codegen
