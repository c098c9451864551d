#!/usr/bin/env python3
"""Step-for-step equivalence of the generated TensorFlow program with `mirrorlab-cli train`.

For each case, mirrorlab-cli trains a small project for 20 steps, saving its initial weights, its
final weights and the loss of every step (--report); the program from `mirrorlab-cli export-code
--framework tf` starts from those weights (--weights), feeds the same batches in the same order,
prints the loss of every step (--print-steps) and saves its final weights (--save-weights).
In float32 every step's loss must agree to 1e-5 relative and every final weight to 1e-5 (relative
where a weight exceeds 1): MLPs with SGD + Nesterov, Adam and RMSprop on 1, 2 and 3 logical CPU
devices; a global batch of 13 on 3 devices (shards 4, 4, 5); a per-device batch with accumulation;
linear scaling with warm-up and step decay; a CNN; a CNN with synchronized BatchNormalization with
accumulation; a binary classifier (sigmoid + binary_crossentropy). mixed_bfloat16 agrees to
BF16_REL_TOL (below). What TensorFlow does differently is asserted as the program's header states
it: per-replica BatchNormalization keeps replica 0's moving statistics (both exponential averages
are computed here), Keras' Dropout draws the same mask on every replica (the program's ReplicaDropout
does not), TensorFlow's own split of 13 samples over 3 replicas is 5, 5, 3 (the program feeds
Mirrorlab's 4, 4, 5); the learning-rate schedule equals Mirrorlab's step_lr and rebuilds from its config.

TensorFlow starts once (its import takes 4-10 s), in a second process: it imports every program
and calls its main(), each on a fresh runtime with the program's number of logical CPU devices
(fresh_runtime).

Usage: tf_equivalence.py MIRRORLAB_CLI [--only TEXT]. Runs with the reference environment's python
(scripts/pyref.sh: TensorFlow 2.21, Keras 3.15).
"""
import contextlib
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time

STEPS = 20
REL_TOL = 1e-5
WEIGHT_TOL = 1e-5
# mixed_bfloat16: both round Dense inputs, kernels and outputs to bfloat16 (8 significant bits: one
# rounding moves a value by up to 2^-9 = 0.2%), but not at the same places (Mirrorlab also rounds
# the gradients, TensorFlow's kernels round where they compute), so the losses differ by a few such
# roundings averaged over many values, and the weights by a share of their change in 20 steps.
BF16_REL_TOL = 5e-3
BF16_WEIGHT_TOL = 2e-2
HANG_SECONDS = 540  # the TensorFlow process: about 2 minutes here

tf = None  # imported in the TensorFlow processes only


def run(cmd, cwd):
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}{p.stderr}")
    return p.stdout


def cases(tmp):
    from equivalence_data import cnn_layers, images, spirals, write_images
    sgd = {"name": "sgd", "learning_rate": 0.05, "momentum": 0.9, "nesterov": True}
    adam = {"name": "adam", "learning_rate": 0.01}
    rms = {"name": "rmsprop", "learning_rate": 0.003, "momentum": 0.5, "epsilon": 1e-3}
    write_images(tmp)
    # 640 training samples: 20 steps cross an epoch's end (a new order; with 61 and 70 a short last batch).
    return [
        ("sgd-nesterov 1 device, global 64", spirals("a", sgd, "cpu:1", 64)),
        ("sgd-nesterov 2 devices, global 61 (shards 30, 31; the epoch's last batch 30)", spirals("b", sgd, "cpu:2", 61)),
        ("sgd-nesterov 3 devices, global 13 (shards 4, 4, 5)", spirals("c", sgd, "cpu:3", 13)),
        ("adam 1 device, global 50", spirals("d", adam, "cpu:1", 50)),
        ("adam 2 devices, per-device 16 x accumulate 2", spirals("e", adam, "cpu:2", 16, per_device_batch=True, accumulate=2)),
        ("adam 3 devices, global 64, linear scaling (reference 32), warm-up 0.5 epoch, x0.3 after epoch 1",
         spirals("f", adam, "cpu:3", 64, lr_scaling="linear", lr_reference_batch=32, warmup_epochs=0.5,
                 lr_decay_epochs=[1], lr_decay_factor=0.3)),
        ("rmsprop 1 device, global 70 (the epoch's last batch 10)", spirals("g", rms, "cpu:1", 70)),
        ("rmsprop 2 devices, global 64", spirals("h", rms, "cpu:2", 64)),
        ("rmsprop 3 devices, global 100 x accumulate 2", spirals("i", rms, "cpu:3", 100, accumulate=2)),
        ("binary classifier (sigmoid + binary_crossentropy), 2 devices, adam",
         spirals("bin", adam, "cpu:2", 64, classes=2, loss="binary_crossentropy",
                 layers=[{"type": "Dense", "units": 16, "activation": "tanh"}, {"type": "Dense", "units": 1, "activation": "sigmoid"}])),
        ("CNN 2 devices, global 40, adam", images("cnn", tmp, "cpu:2", 40, cnn_layers())),
        ("CNN + synchronized BatchNormalization 3 devices, global 40 x accumulate 2",
         images("cnn-sync", tmp, "cpu:3", 40, cnn_layers({"synchronized": True}), accumulate=2)),
    ]


def mirrorlab(cli, proj, work):
    """Mirrorlab's per-step losses (project.json, init.npz, final.npz, report.json and program.py left in work)."""
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "project.json"), "w") as f:
        json.dump(proj, f)
    run([cli, "train", "project.json", "--steps", str(STEPS), "--save-initial-weights", "init.npz", "--save-weights", "final.npz",
         "--report", "report.json", "--no-record", "--quiet"], work)
    run([cli, "export-code", "project.json", "--framework", "tf", "--output", "program.py"], work)
    with open(os.path.join(work, "report.json")) as f:
        return json.load(f)["step_loss"]


def weight_diff(work, skip=()):
    """The largest difference of the final weights (relative where a weight exceeds 1), and its array."""
    import numpy as np
    worst, where = 0.0, ""
    with np.load(os.path.join(work, "final.npz")) as ours, np.load(os.path.join(work, "tf_final.npz")) as theirs:
        if sorted(ours.files) != sorted(theirs.files):
            raise RuntimeError(f"the weights files hold different arrays: {sorted(ours.files)} vs {sorted(theirs.files)}")
        for k in ours.files:
            d = 0.0 if k.endswith(skip) else float(np.max(np.abs(ours[k] - theirs[k]) / np.maximum(1.0, np.abs(ours[k]))))
            if d > worst:
                worst, where = d, k
    return worst, where


def compare(what, ours, theirs, work, failures, table, skip=()):
    worst = max(abs(a - b) / abs(a) for a, b in zip(ours, theirs))
    wdiff, warray = weight_diff(work, skip)
    table.append((what, worst, wdiff))
    print(f"{what}: step 1 loss {ours[0]:.6f} vs {theirs[0]:.6f}, step {STEPS} {ours[-1]:.6f} vs {theirs[-1]:.6f}; worst "
          f"relative loss difference {worst:.1e}, final weights {wdiff:.1e} ({warray})", flush=True)
    if worst > REL_TOL:
        failures.append(f"{what}: loss differs by {worst:.2e} relative > {REL_TOL:g}\n  Mirrorlab  {ours}\n  TensorFlow {theirs}")
    if wdiff > WEIGHT_TOL:
        failures.append(f"{what}: final weight {warray} differs by {wdiff:.2e} > {WEIGHT_TOL:g}")


def bfloat16_compare(ours, f32, theirs, work, failures, table):
    """mixed_bfloat16: the losses within BF16_REL_TOL and closer to Mirrorlab's bfloat16 curve than to its
    float32 one; the final weights within BF16_WEIGHT_TOL of the largest change a weight made."""
    import numpy as np
    worst = max(abs(a - b) / abs(a) for a, b in zip(ours, theirs))
    to_bf16 = sum(abs(a - b) for a, b in zip(ours, theirs))
    to_f32 = sum(abs(a - b) for a, b in zip(f32, theirs))
    with np.load(os.path.join(work, "init.npz")) as i0, np.load(os.path.join(work, "final.npz")) as a, \
            np.load(os.path.join(work, "tf_final.npz")) as b:
        change = max(float(np.max(np.abs(a[k] - i0[k]))) for k in a.files)
        wdiff = max(float(np.max(np.abs(a[k] - b[k]))) for k in a.files) / change
    table.append(("mixed_bfloat16 2 devices, adam (weights: share of their change)", worst, wdiff))
    print(f"mixed_bfloat16 2 devices, adam: worst relative loss difference {worst:.1e}; summed distance to Mirrorlab's bfloat16 "
          f"curve {to_bf16:.4f}, to its float32 curve {to_f32:.4f}; final weights differ by {wdiff:.1e} of the largest change "
          f"({change:.3f})", flush=True)
    if worst > BF16_REL_TOL:
        failures.append(f"mixed_bfloat16: loss differs by {worst:.2e} > {BF16_REL_TOL:g}\n  Mirrorlab  {ours}\n  TensorFlow {theirs}")
    if not to_bf16 < to_f32:
        failures.append(f"mixed_bfloat16: TensorFlow's curve is no closer to Mirrorlab's bfloat16 curve ({to_bf16:.4f}) than to "
                        f"its float32 one ({to_f32:.4f}): is the policy on?")
    if wdiff > BF16_WEIGHT_TOL:
        failures.append(f"mixed_bfloat16: final weights differ by {wdiff:.2e} of their change > {BF16_WEIGHT_TOL:g}")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if sys.argv[1] == "--tensorflow":
        return tensorflow_process(sys.argv[2])
    if importlib.util.find_spec("tensorflow") is None:
        sys.exit(f"{sys.executable} cannot import TensorFlow: run scripts/pyref.sh and point MIRRORLAB_PYREF_PYTHON at it")
    from equivalence_data import spirals
    cli = os.path.abspath(sys.argv[1])
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    t0 = time.time()
    failures, table = [], []
    with tempfile.TemporaryDirectory(prefix="mirrorlab-tf-") as tmp:
        adam = {"name": "adam", "learning_rate": 0.01}
        exact = [(what, proj, os.path.join(tmp, f"case{i}")) for i, (what, proj) in enumerate(cases(tmp)) if not only or only in what]
        ours = {work: mirrorlab(cli, proj, work) for _, proj, work in exact}
        norm = [{"type": "BatchNormalization", "name": "norm", "momentum": 0.8}, {"type": "Dense", "units": 16, "activation": "tanh"},
                {"type": "Dense", "units": 3, "activation": "softmax"}]
        extra = {"bf16": spirals("bf", adam, "cpu:2", 64, precision="mixed_bfloat16"), "bf16-f32": spirals("f32", adam, "cpu:2", 64),
                 "norm": spirals("norm", {"name": "sgd", "learning_rate": 0.05, "momentum": 0.9, "nesterov": True}, "cpu:2", 64,
                                 layers=norm)}
        extra = {k: v for k, v in extra.items() if not only or only in k}
        for name, proj in extra.items():
            ours[os.path.join(tmp, name)] = mirrorlab(cli, proj, os.path.join(tmp, name))
        dropout = os.path.join(tmp, "dropout")
        os.makedirs(dropout)
        with open(os.path.join(dropout, "project.json"), "w") as f:
            json.dump(spirals("dropout", adam, "cpu:2", 64, layers=[
                {"type": "Dense", "units": 64, "activation": "tanh"}, {"type": "Dropout", "rate": 0.5},
                {"type": "Dense", "units": 64, "activation": "tanh"}, {"type": "Dropout", "rate": 0.5},
                {"type": "Dense", "units": 3, "activation": "softmax"}]), f)
        run([cli, "export-code", "project.json", "--framework", "tf", "--output", "program.py"], dropout)
        print(f"Mirrorlab: {len(ours)} runs in {time.time() - t0:.0f} s", flush=True)

        plan = {"tmp": tmp, "programs": [w for w in ours if not w.endswith("-f32")],
                "checks": [c for c in ("dropout", "norm", "bf16", "split", "schedule") if not only or only in c]}
        plan_path = os.path.join(tmp, "plan.json")
        with open(plan_path, "w") as f:
            json.dump(plan, f)
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--tensorflow", plan_path], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=HANG_SECONDS)
        print(proc.stdout, end="", flush=True)
        theirs = {}
        if proc.returncode != 0:
            failures.append(f"the TensorFlow process failed ({proc.returncode}); its output is above")
        else:
            with open(plan_path + ".out") as f:
                result = json.load(f)
            theirs, failures = result["losses"], failures + result["failures"]
        for what, _, work in exact:
            if work in theirs:
                compare(what, ours[work], theirs[work], work, failures, table)
        if "bf16" in extra and os.path.join(tmp, "bf16") in theirs:
            w = os.path.join(tmp, "bf16")
            bfloat16_compare(ours[w], ours[w + "-f32"], theirs[w], w, failures, table)
        if "norm" in extra and os.path.join(tmp, "norm") in theirs:
            w = os.path.join(tmp, "norm")
            compare("per-replica BatchNormalization 2 devices (moving statistics: below)", ours[w], theirs[w], w, failures, table,
                    skip=("moving_mean", "moving_variance"))
    print(f"\n{'case':<96} {'loss':>8} {'weights':>8}")
    for what, loss, weights in table:
        print(f"{what[:96]:<96} {loss:8.1e} {weights:8.1e}")
    print(f"{len(table)} programs against Mirrorlab in {time.time() - t0:.0f} s")
    if failures:
        print("FAILED:\n" + "\n".join(failures))
        sys.exit(1)
    print("all programs agree")


# ---- in a TensorFlow process -------------------------------------------------------------------------------

def load_program(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fresh_runtime(devices):
    """A new TensorFlow runtime with `devices` logical CPU devices. Two MirroredStrategies in one runtime
    clash: each numbers its collectives from the same keys, and the runtime keeps what it learnt of a key
    (its group's size, its tensors' shapes) from the first. Resetting the eager context (what TensorFlow's
    own distribute tests do between cases) gives each program a runtime of its own."""
    from tensorflow.python.eager import context
    tf.keras.backend.clear_session()
    context._reset_context()
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(devices)])


def run_program(work, name):
    """(the program's per-step losses, its module); tf_final.npz left in work."""
    with open(os.path.join(work, "project.json")) as f:
        fresh_runtime(int(json.load(f)["distribute"]["devices"].split(":")[1]))
    module = load_program(os.path.join(work, "program.py"), name)
    out = io.StringIO()
    cwd = os.getcwd()
    os.chdir(work)
    try:
        with contextlib.redirect_stdout(out):
            module.main(["--weights", "init.npz", "--steps", str(STEPS), "--print-steps", "--save-weights", "tf_final.npz"])
    finally:
        os.chdir(cwd)
    losses = [float(m.group(1)) for m in re.finditer(r"^step \d+ loss (\S+)", out.getvalue(), re.M)]
    if len(losses) != STEPS:
        raise RuntimeError(f"expected {STEPS} steps from {work}/program.py, got {len(losses)}:\n{out.getvalue()}")
    return losses, module


def tensorflow_process(plan_path):
    global tf
    import tensorflow
    tf = tensorflow
    with open(plan_path) as f:
        plan = json.load(f)
    print(f"TensorFlow {tf.__version__}, Keras {tf.keras.__version__}", flush=True)
    losses, failures, modules = {}, [], {}
    for i, work in enumerate(plan["programs"]):
        t0 = time.time()
        losses[work], modules[work] = run_program(work, f"program{i}")
        print(f"  {os.path.basename(work)}: {STEPS} steps in {time.time() - t0:.1f} s", flush=True)
    checks = {"dropout": dropout_check, "norm": replica_norm_check, "bf16": bfloat16_check, "split": split_check,
              "schedule": schedule_check}
    for name in plan["checks"]:
        checks[name](plan["tmp"], modules, failures)
    with open(plan_path + ".out", "w") as f:
        json.dump({"losses": losses, "failures": failures}, f)


def replica_norm_check(tmp, modules, failures):
    """Per-replica BatchNormalization on the input, 2 devices: training agrees (compared by the parent), the
    moving statistics do not, as the header says: TensorFlow's are replica 0's exponential average of its
    shards' statistics, Mirrorlab's the global batches' (both computed here from the data)."""
    import numpy as np
    work = os.path.join(tmp, "norm")
    module = modules[work]
    x, _, _, _, _ = module.load_data(None)
    expect = {"replica 0": [np.zeros(2), np.ones(2)], "global": [np.zeros(2), np.ones(2)]}
    orders = [module.epoch_order(len(x), module.SEED, epoch) for epoch in (1, 2)]
    batches = [o[i:i + module.GLOBAL_BATCH] for o in orders for i in range(0, len(o), module.GLOBAL_BATCH)][:STEPS]
    for batch in batches:
        for who, rows in (("replica 0", module.shard_of(batch, 0, 2)), ("global", batch)):
            sample = x[rows].astype(np.float64)
            for j, stat in enumerate((sample.mean(axis=0), sample.var(axis=0))):
                expect[who][j] = 0.8 * expect[who][j] + 0.2 * stat
    with np.load(os.path.join(work, "final.npz")) as a, np.load(os.path.join(work, "tf_final.npz")) as b:
        got = {"Mirrorlab": [a["norm/moving_mean"], a["norm/moving_variance"]],
               "TensorFlow": [b["norm/moving_mean"], b["norm/moving_variance"]]}
    off = {(who, ref): max(float(np.max(np.abs(g - e) / np.maximum(1.0, np.abs(e)))) for g, e in zip(got[who], expect[ref]))
           for who in got for ref in expect}
    print(f"per-replica BatchNormalization, moving statistics: TensorFlow's {off[('TensorFlow', 'replica 0')]:.1e} from replica "
          f"0's average ({off[('TensorFlow', 'global')]:.1e} from the global one), Mirrorlab's {off[('Mirrorlab', 'global')]:.1e} "
          f"from the global average", flush=True)
    if off[("TensorFlow", "replica 0")] > WEIGHT_TOL or off[("Mirrorlab", "global")] > WEIGHT_TOL:
        failures.append(f"per-replica BatchNormalization: the moving statistics are not what the header says: {off}")
    if not off[("TensorFlow", "global")] > 100 * WEIGHT_TOL:
        failures.append("per-replica BatchNormalization: TensorFlow's moving statistics are the global ones; the header says "
                        "they are replica 0's")
    if "reads\n# (and saves) replica 0's" not in open(os.path.join(work, "program.py")).read():
        failures.append("per-replica BatchNormalization: the header does not name replica 0's moving statistics")


def bfloat16_check(tmp, modules, failures):
    """The mixed_bfloat16 program runs its last activation in float32 and says so."""
    work = os.path.join(tmp, "bf16")
    source = open(os.path.join(work, "program.py")).read()
    dtype = modules[work].build_model().layers[-1].dtype_policy.compute_dtype  # main() left the mixed policy on
    print(f"mixed_bfloat16: the model's last layer computes in {dtype}", flush=True)
    if dtype != "float32" or "the last activation in float32" not in source.split('"""', 1)[0]:
        failures.append(f"mixed_bfloat16: the last activation computes in {dtype}, or the header does not say it is float32")


def dropout_check(tmp, modules, failures):
    """Keras' Dropout draws one mask for every replica; the program's ReplicaDropout one per replica and per layer."""
    import numpy as np
    work = os.path.join(tmp, "dropout")
    module = load_program(os.path.join(work, "program.py"), "program_dropout")
    fresh_runtime(2)
    tf.keras.mixed_precision.set_global_policy("float32")
    strategy = tf.distribute.MirroredStrategy(devices=[d.name for d in tf.config.list_logical_devices("CPU")])
    with strategy.scope():
        ours = [module.ReplicaDropout(0.5, seed=1), module.ReplicaDropout(0.5, seed=2)]
        keras_own = tf.keras.layers.Dropout(0.5, seed=1)
    ones = tf.ones((32, 64))

    def masks(layer):
        out = strategy.run(tf.function(lambda: layer(ones, training=True)))
        return [(v.numpy() != 0) for v in strategy.experimental_local_results(out)]

    a, b, k = masks(ours[0]), masks(ours[1]), masks(keras_own)
    kept = float(np.mean(np.concatenate(a + b)))
    print(f"dropout 0.5, 2 replicas: Keras' Dropout masks equal on both replicas: {bool((k[0] == k[1]).all())}; ReplicaDropout's "
          f"equal: {bool((a[0] == a[1]).all())}, two layers' equal: {bool((a[0] == b[0]).all())}, share kept {kept:.3f}", flush=True)
    if not (k[0] == k[1]).all():
        failures.append("dropout: Keras' Dropout now draws a mask per replica: ReplicaDropout and its header line can go")
    if (a[0] == a[1]).all() or (a[0] == b[0]).all():
        failures.append("dropout: ReplicaDropout draws the same mask on two replicas or two layers")
    if abs(kept - 0.5) > 0.03:  # 8192 draws: the share kept has a standard deviation of 0.0055
        failures.append(f"dropout: ReplicaDropout keeps {kept:.3f} of the units at rate 0.5")
    if "Differs from Mirrorlab: dropout masks are TensorFlow's draws" not in open(os.path.join(work, "program.py")).read():
        failures.append("dropout: the header does not name the dropout difference")


def split_check(tmp, modules, failures):
    """TensorFlow's own split of 13 samples over 3 replicas (the header's 5, 5, 3) and the program's (Mirrorlab's 4, 4, 5)."""
    import numpy as np
    fresh_runtime(3)
    strategy = tf.distribute.MirroredStrategy(devices=[d.name for d in tf.config.list_logical_devices("CPU")])
    batch = next(iter(strategy.experimental_distribute_dataset(tf.data.Dataset.range(13).batch(13))))
    theirs = [int(v.shape[0]) for v in strategy.experimental_local_results(batch)]
    work = os.path.join(tmp, "case2")  # the global batch of 13 on 3 devices
    ours = [len(modules[work].shard_of(np.arange(13), r, 3)) for r in range(3)]
    header = open(os.path.join(work, "program.py")).read().split('"""', 1)[0].replace("\n# ", " ")
    print(f"13 samples over 3 replicas: TensorFlow's own split {theirs}, the program's (Mirrorlab's) {ours}", flush=True)
    if theirs != [5, 5, 3] or "13 over 3 as 5, 5, 3" not in header:
        failures.append(f"TensorFlow splits 13 over 3 as {theirs}; the header says 5, 5, 3")
    if ours != [4, 4, 5]:
        failures.append(f"the program cuts 13 over 3 as {ours}, Mirrorlab as [4, 4, 5]")


def schedule_check(tmp, modules, failures):
    """MirrorlabSchedule: Mirrorlab's step_lr of the warm-up + decay case, and the same rates once rebuilt from its config."""
    work = os.path.join(tmp, "case5")  # linear scaling, warm-up and decay
    module = modules[work]
    with open(os.path.join(work, "report.json")) as f:
        step_lr = json.load(f)["step_lr"]
    steps_per_epoch = -(-640 // module.GLOBAL_BATCH)
    lr = module.BASE_LEARNING_RATE * module.GLOBAL_BATCH / module.REFERENCE_BATCH
    schedule = module.MirrorlabSchedule(module.BASE_LEARNING_RATE, lr, module.WARMUP_EPOCHS * steps_per_epoch,
                                        [e * steps_per_epoch for e in module.LR_DECAY_EPOCHS], module.LR_DECAY_FACTOR)
    rebuilt = tf.keras.optimizers.schedules.deserialize(tf.keras.optimizers.schedules.serialize(schedule),
                                                        custom_objects={"MirrorlabSchedule": module.MirrorlabSchedule})
    rates = [float(schedule(s)) for s in range(len(step_lr))]
    again = [float(rebuilt(s)) for s in range(len(step_lr))]
    wrong = [(s, a, b) for s, (a, b) in enumerate(zip(rates, step_lr)) if abs(a - b) > 1e-7 * abs(b)]
    print(f"MirrorlabSchedule: {len(rates)} rates equal to Mirrorlab's step_lr (to float32): {not wrong}; rebuilt from its "
          f"config: {rates == again}", flush=True)
    if wrong or rates != again:
        failures.append(f"MirrorlabSchedule: (step, TensorFlow, Mirrorlab) {wrong[:5]}; rebuilt from its config equal: "
                        f"{rates == again}")


if __name__ == "__main__":
    main()
