#!/usr/bin/env python3
"""PyTorch reference for the GPU check (tests/gpu/run.sh): the 784-512-512-10 MLP of
bench/gpu/mlp-blobs.json (ReLU, softmax folded into cross_entropy as Mirrorlab fuses it, Glorot
uniform kernels, zero biases, Adam 1e-3 with Keras' epsilon 1e-7) trained on one GPU, on
synthetic data made here (no download), TF32 off as Mirrorlab's default. Seconds per step, each
step timed by the host clock between two torch.cuda.synchronize() (as Mirrorlab's step ends when
the GPU is done), median over the steps after a warm-up.

Two data paths per batch size:
  resident  the data set lives in GPU memory, each batch a slice of it (PyTorch at its best);
  pageable  the data set lives in ordinary host memory and each batch is copied to the GPU
            (.to(device) from pageable memory, what Mirrorlab does with its batches).
Optimizer: Adam(fused=True) where this PyTorch has it, else foreach=True (the faster of its
implementations on GPUs).

Output: "name value unit" lines (milliseconds per step), "#" remarks, or one "skip torch <reason>"
line (exit 0) where torch or CUDA in torch is missing.
  torch_mlp_gpu.py [--batches 256 4096] [--steps 60] [--warmup 10] [--device cuda:0]
"""
import argparse
import statistics
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, nargs="+", default=[256, 4096])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--samples", type=int, default=32768, help="synthetic samples (at least 2 batches are made)")
    args = ap.parse_args()
    try:
        import torch
    except Exception as e:  # ImportError, or a broken install
        print("skip torch cannot be imported: %s" % str(e).splitlines()[0][:200])
        return 0
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"  # --device cpu: the same loop on the CPU (to check this script where there is no GPU)
    if cuda and not torch.cuda.is_available():
        print("skip torch %s has no usable CUDA (torch.version.cuda %s, torch.cuda.is_available() is False)" %
              (torch.__version__, torch.version.cuda))
        return 0
    sync = (lambda: torch.cuda.synchronize(dev)) if cuda else (lambda: None)
    # Mirrorlab's default: float32 products in float32 (no TF32).
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(42)
    print("# torch %s, CUDA %s, cuDNN %s, %s; TF32 off" % (torch.__version__, torch.version.cuda,
                                                          torch.backends.cudnn.version(), torch.cuda.get_device_name(dev) if cuda else "CPU"))
    nn = torch.nn
    for batch in args.batches:
        n = max(args.samples, 2 * batch)
        g = torch.Generator().manual_seed(batch)
        x_host = torch.randn(n, 784, generator=g)
        y_host = torch.randint(0, 10, (n,), generator=g)
        x_dev, y_dev = x_host.to(dev), y_host.to(dev)
        for path in ("resident", "pageable"):
            model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)).to(dev)
            for m in model:
                if isinstance(m, nn.Linear):
                    nn.init.xavier_uniform_(m.weight)
                    nn.init.zeros_(m.bias)
            try:
                opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7, fused=True)
                kind = "fused"
                if not cuda:
                    raise TypeError("fused Adam is for CUDA tensors")
            except (TypeError, RuntimeError):
                opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7, foreach=True)
                kind = "foreach"
            per_epoch = n // batch
            times = []
            for step in range(args.warmup + args.steps):
                lo = (step % per_epoch) * batch
                sync()
                t0 = time.perf_counter()
                if path == "resident":
                    xb, yb = x_dev[lo:lo + batch], y_dev[lo:lo + batch]
                else:
                    xb, yb = x_host[lo:lo + batch].to(dev), y_host[lo:lo + batch].to(dev)
                opt.zero_grad(set_to_none=True)
                loss = nn.functional.cross_entropy(model(xb), yb)
                loss.backward()
                opt.step()
                sync()
                if step >= args.warmup:
                    times.append(time.perf_counter() - t0)
            print("torch_step_b%d_%s %.6g ms" % (batch, path, 1e3 * statistics.median(times)))
            if not loss.isfinite():
                print("# warning: the loss is not finite at batch %d (%s)" % (batch, path))
        print("# batch %d: Adam %s, %d steps timed after %d, %d synthetic samples" % (batch, kind, args.steps, args.warmup, n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
