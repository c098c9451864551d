#!/usr/bin/python3
"""PyTorch reference for the end-to-end benchmark: the same MLP, initialisation (Glorot uniform
kernels, zero biases), optimizer (Adam, Keras' epsilon 1e-7), batch and data as Mirrorlab, on the
CPU with a stated thread count. Prints one JSON line with seconds per epoch.

  torch_mlp.py --hidden 128 --batch 128 --epochs 3 --threads 2
  torch_mlp.py --hidden 512 512 --batch 256 --epochs 3 --threads 2
  torch_mlp.py ... --ddp 2      # DistributedDataParallel, gloo, 2 processes x --threads each
  torch_mlp.py ... --autocast   # torch.autocast("cpu", bfloat16): Mirrorlab's mixed_bfloat16
  torch_mlp.py --cnn --batch 64  # projects/fashion-cnn.json: Conv2D 32 -> MaxPool -> Conv2D 64 -> MaxPool
                                 # -> Dense 128 -> Dense 10, in PyTorch's own channels-first layout
"""
import argparse, gzip, json, os, struct, sys, time

import numpy as np

DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, n = struct.unpack(">II", data[:8])
    if magic == 0x803:
        rows, cols = struct.unpack(">II", data[8:16])
        return np.frombuffer(data, np.uint8, offset=16).reshape(n, rows * cols).astype(np.float32) / 255.0
    return np.frombuffer(data, np.uint8, offset=8).astype(np.int64)


def build(torch, hidden):
    layers, prev = [], 784
    for h in hidden:
        layers += [torch.nn.Linear(prev, h), torch.nn.ReLU()]
        prev = h
    layers.append(torch.nn.Linear(prev, 10))  # softmax folded into cross_entropy, as Mirrorlab fuses it
    model = torch.nn.Sequential(*layers)
    for m in model:
        if isinstance(m, torch.nn.Linear):
            torch.nn.init.xavier_uniform_(m.weight)
            torch.nn.init.zeros_(m.bias)
    return model


def build_cnn(torch):
    """projects/fashion-cnn.json with Glorot-uniform kernels and zero biases, as Keras starts them."""
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(64 * 5 * 5, 128), nn.ReLU(), nn.Linear(128, 10))
    for m in model:
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            torch.nn.init.xavier_uniform_(m.weight)
            torch.nn.init.zeros_(m.bias)
    return model


def run(rank, world, args, result_queue=None):
    import torch
    torch.set_num_threads(args.threads)
    torch.manual_seed(42)
    x = torch.from_numpy(read_idx(os.path.join(DATA, "train-images-idx3-ubyte.gz")))
    y = torch.from_numpy(read_idx(os.path.join(DATA, "train-labels-idx1-ubyte.gz")))
    model = build_cnn(torch) if args.cnn else build(torch, args.hidden)
    if args.cnn:
        x = x.reshape(-1, 1, 28, 28)
    if world > 1:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29517")
        torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
        model = torch.nn.parallel.DistributedDataParallel(model)
    # foreach: the multi-tensor Adam, several times faster than the per-parameter loop on this build
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7, foreach=True)
    n = x.shape[0]
    per = args.batch // world
    times = []
    for epoch in range(args.epochs):
        g = torch.Generator().manual_seed(epoch)
        order = torch.randperm(n, generator=g)
        t0 = time.perf_counter()
        for i in range(0, n, args.batch):
            idx = order[i:i + args.batch]
            lo = rank * len(idx) // world
            hi = (rank + 1) * len(idx) // world
            idx = idx[lo:hi]
            xb, yb = x[idx], y[idx]
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast):
                logits = model(xb)
            loss = torch.nn.functional.cross_entropy(logits.float(), yb)
            loss.backward()
            opt.step()
        times.append(time.perf_counter() - t0)
    if world > 1:
        torch.distributed.destroy_process_group()
    if rank == 0:
        out = {"framework": "pytorch", "torch": torch.__version__, "model": "cnn" if args.cnn else "mlp", "hidden": args.hidden,
               "batch": args.batch,
               "threads": args.threads, "processes": world, "autocast": args.autocast, "epoch_seconds": times,
               "median_epoch_seconds": sorted(times)[len(times) // 2], "blas": blas_name(torch)}
        print(json.dumps(out))
        sys.stdout.flush()


def blas_name(torch):
    try:
        cfg = torch.__config__.show()
        for line in cfg.splitlines():
            if "BLAS" in line:
                return line.strip()
    except Exception:
        pass
    return "unknown"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, nargs="+", default=[128])
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ddp", type=int, default=1)
    ap.add_argument("--autocast", action="store_true", help="bfloat16 autocast (Mirrorlab's mixed_bfloat16)")
    ap.add_argument("--cnn", action="store_true", help="projects/fashion-cnn.json's model instead of an MLP")
    args = ap.parse_args()
    if args.ddp > 1:
        import torch.multiprocessing as mp
        mp.spawn(run, args=(args.ddp, args), nprocs=args.ddp, join=True)
    else:
        run(0, 1, args)


if __name__ == "__main__":
    main()
