"""TensorBoard reads the event files `mirrorlab-cli runs export --tensorboard` writes, and every
value in them is the run store's.

usage: tensorboard_check.py STORE.sqlite LOGDIR RUN_ID [RUN_ID ...]
Reads each run's folder with TensorBoard's own loaders (event_file_loader for every event, the
EventAccumulator the dashboards use for the scalars, the HParams plugin's parser for the session
data) and the store with sqlite3, recomputes every scalar from the store's rows and compares them:
the same tags, steps and float32 values, wall times of the run's start plus the step's, hparams
equal to the run's configuration, the session's status. Exits 1 on any difference.
Runs with the reference environment's python (scripts/pyref.sh).
"""
import glob
import json
import os
import sqlite3
import sys

import numpy as np
from tensorboard.backend.event_processing import event_accumulator, event_file_loader
from tensorboard.plugins.hparams import metadata as hp_metadata

problems = []


def expect(cond, what):
    if not cond:
        problems.append(what)


def flatten(config, prefix=""):
    out = {}
    for k, v in config.items():
        key = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict):
            out.update(flatten(v, key))
        elif v is not None:
            out[key] = v  # a list arrives as its JSON text
    return out


def expected_scalars(db, run):
    """{(tag, step): (value, wall_time)} recomputed from the store's rows."""
    created, project = db.execute("SELECT created, project_json FROM runs WHERE id=?", (run,)).fetchone()
    metrics = json.loads(project).get("training", {}).get("metrics", ["accuracy"]) or ["accuracy"]
    metric = {"acc": "accuracy", "mean_absolute_error": "mae"}.get(metrics[0], metrics[0])
    out = {}
    steps = db.execute("SELECT step, loss, metric, lr, samples, step_time, wall_time, coalesce(loss_scale, 0) FROM steps "
                       "WHERE run_id=? ORDER BY step", (run,)).fetchall()
    reps = {}
    for row in db.execute("SELECT step, replica, forward_us, backward_us, allreduce_us, wait_us, optimizer_us, "
                          "allgather_us, network_us, input_us FROM replica_steps WHERE run_id=? ORDER BY step, replica",
                          (run,)):
        reps.setdefault(row[0], []).append(row[1:])
    for step, loss, m, lr, samples, step_time, wall, scale in steps:
        at = created + wall
        out[("step/loss", step)] = (loss, at)
        out[(f"step/{metric}", step)] = (m, at)
        out[("step/learning_rate", step)] = (lr, at)
        if step_time > 0:
            out[("step/samples_per_second", step)] = (samples / step_time, at)
        if scale > 0:
            out[("step/loss_scale", step)] = (scale, at)
        sync = total = 0.0
        for replica, *us in reps.get(step, []):
            f, b, ar, w, o, ag, nw, inp = (u * 1e-6 for u in us)  # the store keeps microseconds
            allreduce = ar + ag + nw
            sync += allreduce + w
            total += inp + f + b + ar + w + o + ag + nw
            out[(f"replica_{replica}/compute_seconds", step)] = (f + b + o, at)
            out[(f"replica_{replica}/allreduce_seconds", step)] = (allreduce, at)
            out[(f"replica_{replica}/wait_seconds", step)] = (w, at)
        if total > 0:
            out[("step/sync_share", step)] = (sync / total, at)
    for (epoch, loss, m, vloss, vm, seconds, sps, ar, wait, wall) in db.execute(
            "SELECT epoch, train_loss, train_metric, val_loss, val_metric, seconds, samples_per_sec, allreduce_share, "
            "wait_share, wall_time FROM epochs WHERE run_id=? ORDER BY epoch", (run,)):
        at = created + wall
        out[("epoch/loss", epoch)] = (loss, at)
        out[(f"epoch/{metric}", epoch)] = (m, at)
        if vloss is not None:
            out[("epoch/val_loss", epoch)] = (vloss, at)
        if vm is not None:
            out[(f"epoch/val_{metric}", epoch)] = (vm, at)
        out[("epoch/seconds", epoch)] = (seconds, at)
        out[("epoch/samples_per_second", epoch)] = (sps, at)
        out[("epoch/allreduce_share", epoch)] = (ar, at)
        out[("epoch/wait_share", epoch)] = (wait, at)
        out[("epoch/sync_share", epoch)] = (ar + wait, at)
    return out


def check_run(db, logdir, run):
    folders = glob.glob(os.path.join(logdir, f"run-{run}-*")) + glob.glob(os.path.join(logdir, f"run-{run}"))
    expect(len(folders) == 1, f"run {run}: {len(folders)} folders in {logdir}")
    if len(folders) != 1:
        return
    files = glob.glob(os.path.join(folders[0], "events.out.tfevents.*"))
    expect(len(files) == 1, f"run {run}: {len(files)} event files")
    events = list(event_file_loader.LegacyEventFileLoader(files[0]).Load())
    expect(events[0].file_version == "brain.Event:2", f"run {run}: first event {events[0]}")
    got, session = {}, {}
    for e in events[1:]:
        for v in e.summary.value:
            if v.metadata.plugin_data.plugin_name == hp_metadata.PLUGIN_NAME:
                session[v.tag] = hp_metadata.parse_session_start_info_plugin_data(v.metadata.plugin_data.content) \
                    if v.tag == hp_metadata.SESSION_START_INFO_TAG else \
                    hp_metadata.parse_session_end_info_plugin_data(v.metadata.plugin_data.content)
            else:
                expect(v.HasField("simple_value"), f"run {run}: {v.tag} is not a scalar")
                expect((v.tag, e.step) not in got, f"run {run}: {v.tag} twice at step {e.step}")
                got[(v.tag, e.step)] = (v.simple_value, e.wall_time)
    want = expected_scalars(db, run)
    expect(set(got) == set(want), f"run {run}: tags/steps differ: missing {sorted(set(want) - set(got))[:5]}, "
                                  f"extra {sorted(set(got) - set(want))[:5]}")
    differ = [(k, got[k], want[k]) for k in set(got) & set(want)
              if got[k][0] != np.float32(want[k][0]) or abs(got[k][1] - want[k][1]) > 1e-6]
    expect(not differ, f"run {run}: {len(differ)} values differ, e.g. {sorted(differ)[:3]}")
    # The accumulator behind TensorBoard's scalar dashboard sees the same series.
    acc = event_accumulator.EventAccumulator(folders[0], size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    tags = acc.Tags()["scalars"]
    expect(sorted(tags) == sorted({t for t, _ in want}), f"run {run}: accumulator tags {sorted(tags)[:5]}...")
    for t in tags:
        series = {s.step: s.value for s in acc.Scalars(t)}
        expect(series == {s: got[(t, s)][0] for (tt, s) in got if tt == t}, f"run {run}: accumulator series {t} differs")
    # HParams: the run's configuration, its id and name; the session's end is its status.
    name, status, config, created = db.execute("SELECT name, status, config_json, created FROM runs WHERE id=?",
                                               (run,)).fetchone()
    start = session.get(hp_metadata.SESSION_START_INFO_TAG)
    expect(start is not None, f"run {run}: no session_start_info")
    if start is not None:
        hp = {k: (v.number_value if v.HasField("number_value") else v.string_value if v.HasField("string_value")
                  else v.bool_value) for k, v in start.hparams.items()}
        config = flatten(json.loads(config))
        config.update(run_id=run, run_name=name)
        expect(hp.keys() == config.keys(), f"run {run}: hparams keys differ: {sorted(hp.keys() ^ config.keys())}")
        bad = [k for k in hp.keys() & config.keys()
               if not (json.loads(hp[k]) == config[k] if isinstance(config[k], list) else hp[k] == config[k])]
        expect(not bad, f"run {run}: hparams differ: {[(k, hp[k], config[k]) for k in bad][:5]}")
        expect(abs(start.start_time_secs - created) < 1e-6, f"run {run}: start time {start.start_time_secs} vs {created}")
    end = session.get(hp_metadata.SESSION_END_INFO_TAG)
    want_status = {"finished": 1, "running": 3}.get(status, 2)
    expect(end is not None and end.status == want_status, f"run {run}: session end {end} for status {status}")
    print(f"run {run} ({name}, {status}): {len(got)} scalars in {len(tags)} tags, {len(start.hparams) if start else 0} "
          f"hparams, all equal to the store")


def main(store, logdir, *runs):
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    for r in runs:
        check_run(db, logdir, int(r))
    for p in problems:
        print("FAIL:", p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
