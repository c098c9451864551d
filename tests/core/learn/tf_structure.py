#!/usr/bin/env python3
"""Structure of the generated TensorFlow programs, checked with Python's ast (TensorFlow cannot be
installed on the build machines, so the program is read, not run).

For projects on cpu:1, cpu:2 and cpu:3, with a global or a per-device batch, accumulation, dropout
and warm-up, it checks that the program: splits the CPU into the project's number of logical
devices (tf.config.set_logical_device_configuration) before anything else touches TensorFlow and
builds tf.distribute.MirroredStrategy over them; computes the global batch with the accumulation
factor; builds the model, the optimizer and compile() inside `with strategy.scope():`; gives every
Dropout layer its own seed; refuses Keras 3.7.0; uses no API that TensorFlow 2 / Keras 3 removed.

Usage: tf_structure.py MIRRORLAB_CLI. To run a generated program for real, on a machine with
TensorFlow: mirrorlab-cli export-code projects/spirals.json --framework tf --output spirals_tf.py
&& python3 spirals_tf.py --steps 20.
"""
import ast
import copy
import json
import os
import subprocess
import sys
import tempfile

# Names TensorFlow 2.16+ / Keras 3 no longer have (or that only TF1 had).
REMOVED = {"experimental_run_v2", "fit_generator", "evaluate_generator", "predict_generator", "Session", "contrib",
           "compat", "get_session", "placeholder", "legacy", "experimental_distribute_datasets_from_function"}


def dotted(node):
    """'tf.config.set_logical_device_configuration' for an Attribute/Name chain, else ''."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def calls(tree):
    return [(dotted(n.func), n) for n in ast.walk(tree) if isinstance(n, ast.Call)]


def function(tree, name):
    for n in tree.body:
        if isinstance(n, ast.FunctionDef) and n.name == name:
            return n
    raise AssertionError(f"no function {name}()")


def constant(tree, name):
    for n in tree.body:
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets):
            return ast.literal_eval(n.value)
    return None


def check(source, proj, replicas):
    tree = ast.parse(source)
    errors = []

    def expect(cond, what):
        if not cond:
            errors.append(what)

    expect(constant(tree, "DEVICES") == replicas, f"DEVICES is {constant(tree, 'DEVICES')}, want {replicas}")
    expect(constant(tree, "ACCUMULATE") == proj["training"]["accumulate"], "ACCUMULATE differs from the project")

    # The strategy: logical CPU devices, then MirroredStrategy over the logical devices.
    make = function(tree, "make_strategy")
    names = [name for name, _ in calls(make)]
    expect("tf.config.set_logical_device_configuration" in names, "make_strategy() does not split the CPU into logical devices")
    mirrored = [c for name, c in calls(make) if name == "tf.distribute.MirroredStrategy"]
    expect(any(any(k.arg == "devices" for k in c.keywords) for c in mirrored), "no MirroredStrategy(devices=...) over the logical CPUs")
    expect(any(name == "tf.config.list_logical_devices" for name in names), "the strategy's devices are not the logical CPU devices")
    logical = [c for name, c in calls(make) if name == "tf.config.set_logical_device_configuration"]
    expect(any("DEVICES" in ast.dump(c) for c in logical), "the number of logical devices is not DEVICES")

    main = function(tree, "main")
    order = [name for name, _ in calls(main)]
    expect("make_strategy" in order, "main() does not call make_strategy()")
    first_tf = next((i for i, name in enumerate(order) if name.startswith("tf.")), len(order))
    expect("make_strategy" in order and order.index("make_strategy") < first_tf,
           "TensorFlow is used before the logical devices are configured")
    expect("require_keras" in order, "main() does not refuse Keras 3.7.0")
    expect("3.7.0" in ast.unparse(function(tree, "require_keras")), "require_keras() does not name 3.7.0")

    # The global batch: per-device x replicas x ACCUMULATE, or the project's global batch.
    batch = [n for n in ast.walk(main) if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "global_batch" for t in n.targets)]
    expect(len(batch) == 1, "global_batch is not assigned once in main()")
    if batch:
        text = ast.unparse(batch[0].value)
        if proj["training"]["per_device_batch"]:
            expect("PER_REPLICA_BATCH" in text and "replicas" in text and "ACCUMULATE" in text, f"global batch {text} leaves a factor out")
        else:
            expect(text == "GLOBAL_BATCH", f"global batch is {text}")
    batched = [n for n in ast.walk(main) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "batch"
               and any(isinstance(a, ast.Name) and a.id == "global_batch" for a in n.args)]
    expect(any("x_train" in ast.unparse(c.func.value) for c in batched), "the training data is not batched at the global batch")

    # Model, optimizer and compile inside strategy.scope().
    scopes = [n for n in ast.walk(main) if isinstance(n, ast.With)
              and any(dotted(i.context_expr.func) == "strategy.scope" for i in n.items if isinstance(i.context_expr, ast.Call))]
    expect(len(scopes) == 1, "no `with strategy.scope():` block")
    if scopes:
        inside = [name for name, _ in calls(scopes[0])]
        for needed in ("build_model", "model.compile", "make_optimizer"):
            expect(needed in inside, f"{needed}() is not inside strategy.scope()")
    outside = [name for name, _ in calls(main) if name in ("build_model", "make_optimizer")]
    expect(len(outside) == 2, "build_model() or make_optimizer() is called more than once")

    # Dropout: one seed per layer.
    seeds = [ast.unparse(k.value) for name, c in calls(function(tree, "build_model")) if name == "tf.keras.layers.Dropout"
             for k in c.keywords if k.arg == "seed"]
    expect(len(seeds) == len(set(seeds)), f"Dropout layers share a seed: {seeds}")

    # No removed APIs, no Keras 2-only optimizer arguments.
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and n.attr in REMOVED:
            errors.append(f"uses removed API .{n.attr} ({ast.unparse(n)})")
        if isinstance(n, ast.Call) and dotted(n.func).startswith("tf.keras.optimizers."):
            for k in n.keywords:
                expect(k.arg not in ("lr", "decay"), f"optimizer argument {k.arg}= was removed in Keras 3")
    return errors


def base_project(devices, **training):
    t = {"epochs": 3, "batch_size": 64, "per_device_batch": False, "accumulate": 1, "seed": 42, "lr_scaling": "none",
         "warmup_epochs": 0.0, "loss": "sparse_categorical_crossentropy", "metrics": ["accuracy"],
         "optimizer": {"name": "adam", "learning_rate": 0.01}}
    t.update(training)
    return {"schema_version": 1, "name": "structure",
            "model": {"input_shape": [2], "layers": [{"type": "Dense", "units": 16, "activation": "relu"},
                                                     {"type": "Dropout", "rate": 0.2},
                                                     {"type": "Dense", "units": 16, "activation": "relu"},
                                                     {"type": "Dropout", "rate": 0.2},
                                                     {"type": "Dense", "units": 3, "activation": "softmax"}]},
            "data": {"kind": "spirals", "samples": 600, "classes": 3, "noise": 0.2, "seed": 7, "validation_split": 0.2},
            "training": t, "distribute": {"devices": devices}}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    cli = os.path.abspath(sys.argv[1])
    cases = [
        ("cpu:1, global batch", base_project("cpu:1"), 1),
        ("cpu:2, per-device 32 x accumulate 2, linear + warm-up, step decay",
         base_project("cpu:2", batch_size=32, per_device_batch=True, accumulate=2, lr_scaling="linear", warmup_epochs=1.0,
                      lr_decay_epochs=[2], lr_decay_factor=0.1), 2),
        ("cpu:3, global 64, accumulate 3, sgd nesterov",
         base_project("cpu:3", accumulate=3, optimizer={"name": "sgd", "learning_rate": 0.1, "momentum": 0.9, "nesterov": True}), 3),
        ("cpu:4, rmsprop, step decay", base_project("cpu:4", optimizer={"name": "rmsprop", "learning_rate": 0.001},
                                                    lr_decay_epochs=[1, 2], lr_decay_factor=0.5), 4),
    ]
    failures = 0
    with tempfile.TemporaryDirectory(prefix="mirrorlab-tf-structure-") as tmp:
        for what, proj, replicas in cases:
            path = os.path.join(tmp, "p.json")
            with open(path, "w") as f:
                json.dump(copy.deepcopy(proj), f)
            source = subprocess.run([cli, "export-code", path, "--framework", "tf"], check=True, capture_output=True, text=True).stdout
            errors = check(source, proj, replicas)
            # A project with shards of unequal size says so at the top.
            uneven = replicas > 1 and not proj["training"]["per_device_batch"] and proj["training"]["batch_size"] % replicas
            head = source.split('"""', 1)[0]
            if uneven and "Differs from Mirrorlab: Keras scales each replica's mean loss" not in head:
                errors.append("uneven shards are not named at the top")
            if "Differs from Mirrorlab: dropout masks" not in head:
                errors.append("the dropout difference is not named at the top")
            print(f"{what}: {'ok' if not errors else 'FAILED'}")
            for e in errors:
                print("  - " + e)
            failures += len(errors)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
