#!/usr/bin/env python3
"""Summarises bench/e2e/compare.sh's rounds: one table per model with Mirrorlab against TensorFlow
first (PyTorch 1.13 as a second reference), the share of the sgemm peak measured in the same
rounds, and each speed goal with its ratio.

  summarize.py ROUNDS_FILE TUNING_DIR
ROUNDS_FILE holds "round key value" lines: peak2/peak1 (sgemm 2048^3, GFLOP/s), dnnpeak2/dnnpeak1
(oneDNN matmul), load1, calib/calibend (a fixed loop's ms),
load-RUNNER-MODEL (the 1-min load after each runner), prodRA (bench_step's products bound) and RUNNER-MODEL (s/epoch).
"""
import glob, json, os, statistics as st, sys
from collections import defaultdict

# Training FLOPs per epoch (60,000 samples): forward, input gradient and weight gradient, 2 FLOPs
# per multiply-add each, less the first layer's input gradient, which nobody computes.
def mlp_gflop(sizes):
    f = sum(2 * 60000 * a * b for a, b in zip(sizes, sizes[1:]))
    return (3 * f - 2 * 60000 * sizes[0] * sizes[1]) / 1e9


def cnn_gflop():
    macs = [26 * 26 * 9 * 32, 11 * 11 * 9 * 32 * 64, 1600 * 128, 128 * 10]  # per sample
    return (6 * sum(macs) - 2 * macs[0]) * 60000 / 1e9


MODELS = (("default", "784-128-10 b128", mlp_gflop([784, 128, 10])), ("wide", "784-512-512-10 b256", mlp_gflop([784, 512, 512, 10])),
          ("cnn", "fashion-cnn b64", cnn_gflop()))
NAMES = {
    "tf": "tensorflow 1 device (best threads)", "tfm": "tensorflow MirroredStrategy 2 logical",
    "tfb": "tensorflow 1 device mixed_bfloat16", "tfmb": "tensorflow Mirrored 2 mixed_bfloat16",
    "ml1": "mirrorlab cpu:1 x 2 threads", "ml2": "mirrorlab cpu:2 (1 core each)", "ml2s": "mirrorlab cpu:2 --shard-optimizer",
    "ml1c": "mirrorlab cpu:1 x 1 thread", "ml1b": "mirrorlab cpu:1 x 2 mixed_bfloat16", "ml2b": "mirrorlab cpu:2 mixed_bfloat16",
    "torch": "pytorch 1.13 (Debian) 1 proc x 2 thr", "ddp": "pytorch 1.13 DDP gloo 2 proc x 1 thr",
    "torchb": "pytorch 1.13 1 x 2 autocast bf16"}
ORDER = ("tf", "tfm", "ml1", "ml2", "ml2s", "ml1c", "tfb", "tfmb", "ml1b", "ml2b", "torch", "ddp", "torchb")
F32_ML, BF_ML, F32_TF, BF_TF = ("ml1", "ml2", "ml2s", "ml1c"), ("ml1b", "ml2b"), ("tf", "tfm"), ("tfb", "tfmb")


def main():
    v = defaultdict(list)
    for line in open(sys.argv[1]):
        r, k, x = line.split()
        v[k].append(float(x))
    med = lambda k: st.median(v[k])
    spread = lambda k: "%.3g-%.3g" % (min(v[k]), max(v[k]))
    p2, p1 = med("peak2"), med("peak1")
    print("rounds: %d; load (1-min) per round: %s" % (len(v["peak2"]), " ".join("%.1f" % x for x in v["load1"])))
    if v.get("calib"):
        print("calibration (fixed loop on both cores, ms; start / end of each round): %s" % " ".join(
            "%.0f/%.0f" % ab for ab in zip(v["calib"], v.get("calibend", v["calib"]))))
    print("sgemm 2048^3 peak: 2 threads %.0f GFLOP/s (%s), 1 thread %.0f (%s); 2/1 ratio %.2f" % (p2, spread("peak2"), p1, spread("peak1"), p2 / p1))
    if v.get("dnnpeak2"):
        print("oneDNN matmul 2048^3 peak: 2 threads %.0f GFLOP/s (%s), 1 thread %.0f (%s)" % (med("dnnpeak2"), spread("dnnpeak2"),
              med("dnnpeak1"), spread("dnnpeak1")))
    print("'of peak' is against the sgemm's 2-thread peak; FLOPs per epoch: forward + both gradients (first layer's input gradient left out)")
    for path in sorted(glob.glob(os.path.join(sys.argv[2], "*.json"))):
        t = json.load(open(path))
        print("tensorflow threads %s: %s (ms/step by candidate: %s)" % (os.path.basename(path)[:-5], t["best"], t["ms_per_step"]))
    goals = []
    for m, label, work in MODELS:
        has = lambda r: bool(v.get(r + "-" + m))
        if not any(has(r) for r in ORDER):
            continue
        best = lambda rs: min((med(r + "-" + m), r) for r in rs if has(r)) if any(has(r) for r in rs) else None
        tf32, tfbf = best(F32_TF), best(BF_TF)
        torch = med("torch-" + m) if has("torch") else None
        print("\n%-20s %-38s %8s %13s %8s %8s %8s %7s" % ("model (%.0f GFLOP)" % work if m == "cnn" else "model", "runner", "s/epoch",
                                                        "spread", "vs TF", "vs torch", "GFLOP/s", "of peak"))
        for r in ORDER:
            if not has(r):
                continue
            k = r + "-" + m
            x = med(k)
            ref = tfbf if r in BF_ML + BF_TF + ("torchb",) else tf32
            vs = "%7.2fx" % (ref[0] / x) if ref else "%8s" % "-"
            vt = "%7.2fx" % (torch / x) if torch else "%8s" % "-"
            load = " load %s" % "/".join("%.1f" % y for y in v["load-" + k]) if v.get("load-" + k) else ""
            print("%-20s %-38s %8.3f %13s %s %s %8.0f %6.0f%%%s" % (label, NAMES[r], x, spread(k), vs, vt, work / x, 100 * work / x / p2,
                                                                  load))
            label = ""
        ml32, mlbf = best(F32_ML), best(BF_ML)
        if ml32 and tf32:
            goals.append((m, "best Mirrorlab (%s) vs best TensorFlow (%s), float32" % (ml32[1], tf32[1]), tf32[0] / ml32[0], 1.5, "x"))
        if mlbf and tfbf:
            goals.append((m, "best Mirrorlab (%s) vs best TensorFlow (%s), mixed_bfloat16" % (mlbf[1], tfbf[1]), tfbf[0] / mlbf[0], 1.5, "x"))
        for a, b in (("ml2", "tfm"), ("ml2b", "tfmb")):
            if has(a) and has(b):
                goals.append((m, "%s vs %s" % (NAMES[a], NAMES[b]), med(b + "-" + m) / med(a + "-" + m), 2.0, "x"))
        if ml32 and m in ("cnn", "wide"):
            goals.append((m, "best Mirrorlab float32 (%s), share of the 2-thread sgemm peak" % ml32[1], 100 * work / ml32[0] / p2,
                          70.0 if m == "cnn" else 85.0, "%"))
        if ml32 and mlbf:
            goals.append((m, "mixed_bfloat16 vs float32, best Mirrorlab of each", ml32[0] / mlbf[0], 1.5 if m == "cnn" else None, "x"))
        if m == "wide" and v.get("prod10") and v.get("prod21"):
            # bench_step's BM_ReplicaProducts in the same rounds: the step's products alone (and with
            # the sharded Adam) for 1 replica at 256 and 2 at 128 on their own cores at once.
            b0, b1 = med("prod10") / med("prod20"), med("prod11") / med("prod21")
            print("    the bound the products set: cpu:2 vs cpu:1 on one core at most %.2fx (products alone), %.2fx (with the sharded"
                  " Adam); the step at most %.0f%% and %.0f%% of the peak" % (b0, b1, 100 * work * 256 / 60000 / med("prod20") * 1e3 / p2,
                                                                         100 * work * 256 / 60000 / med("prod21") * 1e3 / p2))
        if has("ml1c") and has("ml2"):
            goals.append((m, "cpu:2 vs cpu:1 on one core (sgemm 2/1 ratio %.2f)" % (p2 / p1), med("ml1c-" + m) / med("ml2-" + m), None, "x"))
    print("\n%-8s %-78s %9s %7s %s" % ("model", "goal", "measured", "goal", ""))
    for m, what, x, goal, unit in goals:
        fmt = "%8.2fx" if unit == "x" else "%7.0f%% "
        g = ("%6.2fx" if unit == "x" else "%5.0f%% ") % goal if goal else "%7s" % "-"
        print("%-8s %-78s %s %s %s" % (m, what, fmt % x, g, "" if goal is None else ("met" if x >= goal else "MISSED")))


if __name__ == "__main__":
    main()
