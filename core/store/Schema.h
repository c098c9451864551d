// The run store's schema: its identity (application_id), its version (user_version) and the
// forward migrations. A migration is appended, never edited: stores in users' hands were made
// with the old text. Volume tables are WITHOUT ROWID with integer microseconds to stay small;
// the large JSON columns of runs come last so that listing runs never reads their overflow pages.
#pragma once
#include <cstdint>

namespace ml::store {

// PRAGMA application_id of every Mirrorlab run store: "MLab" in ASCII.
inline constexpr int32_t kApplicationId = 0x4D4C6162;
inline constexpr int kSchemaVersion = 11;

// migrations[v - 1] takes a store from version v - 1 to version v.
inline constexpr const char* kMigrations[kSchemaVersion] = {
    // v1: runs, per-step metrics, per-replica phase timings, epochs, device samples.
    R"sql(
CREATE TABLE runs(
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  created REAL NOT NULL,
  finished REAL,
  status TEXT NOT NULL,
  devices TEXT NOT NULL DEFAULT '',
  replicas INTEGER NOT NULL DEFAULT 1,
  global_batch INTEGER NOT NULL DEFAULT 0,
  per_replica_batch INTEGER NOT NULL DEFAULT 0,
  base_lr REAL,
  lr REAL,
  epochs INTEGER,
  steps_per_epoch INTEGER,
  total_steps INTEGER,
  seconds REAL,
  steps INTEGER,
  final_val_loss REAL,
  final_val_metric REAL,
  pid INTEGER,
  pid_start INTEGER,
  host TEXT NOT NULL DEFAULT '',
  error TEXT NOT NULL DEFAULT '',
  description TEXT NOT NULL DEFAULT '',
  device_names TEXT NOT NULL DEFAULT '[]',
  project_json TEXT NOT NULL,
  config_json TEXT NOT NULL,
  host_json TEXT NOT NULL
);
CREATE INDEX runs_created ON runs(created);
CREATE TABLE steps(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step INTEGER NOT NULL,
  epoch INTEGER NOT NULL,
  loss REAL,
  metric REAL,
  lr REAL,
  samples INTEGER,
  step_time REAL,
  wall_time REAL,
  PRIMARY KEY(run_id, step)
) WITHOUT ROWID;
CREATE TABLE replica_steps(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step INTEGER NOT NULL,
  replica INTEGER NOT NULL,
  samples INTEGER,
  start_us INTEGER,
  forward_us INTEGER,
  backward_us INTEGER,
  allreduce_us INTEGER,
  wait_us INTEGER,
  optimizer_us INTEGER,
  PRIMARY KEY(run_id, step, replica)
) WITHOUT ROWID;
CREATE TABLE epochs(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  epoch INTEGER NOT NULL,
  train_loss REAL,
  train_metric REAL,
  val_loss REAL,
  val_metric REAL,
  seconds REAL,
  samples_per_sec REAL,
  allreduce_share REAL,
  wait_share REAL,
  in_sync INTEGER,
  checksums TEXT NOT NULL DEFAULT '',
  wall_time REAL,
  PRIMARY KEY(run_id, epoch)
) WITHOUT ROWID;
CREATE TABLE device_samples(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  device INTEGER NOT NULL,
  wall_time REAL NOT NULL,
  utilization REAL,
  memory_bytes REAL,
  PRIMARY KEY(run_id, device, wall_time)
) WITHOUT ROWID;
)sql",
    // v2: tags, a note and dropped-event count per run, artifacts; the runs table by status.
    R"sql(
ALTER TABLE runs ADD COLUMN note TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN dropped_events INTEGER NOT NULL DEFAULT 0;
CREATE INDEX runs_status ON runs(status);
CREATE TABLE tags(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  tag TEXT NOT NULL,
  PRIMARY KEY(run_id, tag)
) WITHOUT ROWID;
CREATE INDEX tags_tag ON tags(tag);
CREATE TABLE artifacts(
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  path TEXT NOT NULL,
  kind TEXT NOT NULL,
  checksum TEXT NOT NULL DEFAULT '',
  bytes INTEGER,
  created REAL NOT NULL
);
CREATE INDEX artifacts_run ON artifacts(run_id);
)sql",
    // v3: what the studio's drawing cost while the run trained (NULL: nobody drew, as in the CLI).
    R"sql(
ALTER TABLE runs ADD COLUMN ui_frames INTEGER;
ALTER TABLE runs ADD COLUMN ui_draw_ms REAL;
)sql",
    // v4: sweeps (a grid of batch size x learning rate x devices x scaling rule) and their points,
    // each point a run; the runs are also tagged "sweep:<id>".
    R"sql(
CREATE TABLE sweeps(
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  created REAL NOT NULL,
  status TEXT NOT NULL,
  target REAL,
  grid_json TEXT NOT NULL,
  options_json TEXT NOT NULL,
  project_json TEXT NOT NULL
);
CREATE TABLE sweep_points(
  sweep_id INTEGER NOT NULL REFERENCES sweeps(id) ON DELETE CASCADE,
  point INTEGER NOT NULL,
  batch_size INTEGER NOT NULL,
  lr REAL NOT NULL,
  devices TEXT NOT NULL,
  lr_scaling TEXT NOT NULL,
  status TEXT NOT NULL DEFAULT 'pending',
  run_id INTEGER REFERENCES runs(id) ON DELETE SET NULL,
  message TEXT NOT NULL DEFAULT '',
  PRIMARY KEY(sweep_id, point)
) WITHOUT ROWID;
)sql",
    // v5: the all-gather of the sharded optimizer update (ZeRO stage 1), its own phase.
    R"sql(
ALTER TABLE replica_steps ADD COLUMN allgather_us INTEGER NOT NULL DEFAULT 0;
)sql",
    // v6: what happened to a run besides its steps: pauses (taken out of every time figure) and the
    // watchdog's straggler warnings, in the order they happened.
    R"sql(
CREATE TABLE run_events(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL,
  kind TEXT NOT NULL,
  step INTEGER NOT NULL,
  wall_time REAL NOT NULL,
  seconds REAL NOT NULL,
  replica INTEGER,
  message TEXT NOT NULL DEFAULT '',
  PRIMARY KEY(run_id, seq)
) WITHOUT ROWID;
)sql",
    // v7: dynamic loss scaling (mixed_float16): the scale of each step (NULL without loss scaling)
    // and whether its update was skipped for an inf/NaN gradient.
    R"sql(
ALTER TABLE steps ADD COLUMN loss_scale REAL;
ALTER TABLE steps ADD COLUMN skipped INTEGER NOT NULL DEFAULT 0;
)sql",
    // v8: several workers (processes under mpirun) as one run: how many, the host of each by rank
    // (a JSON array; '[]' for one worker), and the cross-worker hop of the all-reduce per replica
    // step, its own phase. Runs from before read back as one worker without network time.
    R"sql(
ALTER TABLE runs ADD COLUMN workers INTEGER NOT NULL DEFAULT 1;
ALTER TABLE runs ADD COLUMN hosts TEXT NOT NULL DEFAULT '[]';
ALTER TABLE replica_steps ADD COLUMN network_us INTEGER NOT NULL DEFAULT 0;
)sql",
    // v9: the micro-batches' input (rows gathered, copied to the device) as its own phase; it was
    // part of forward before. Runs from before read back with their input inside forward.
    R"sql(
ALTER TABLE replica_steps ADD COLUMN input_us INTEGER NOT NULL DEFAULT 0;
)sql",
    // v10: GPU telemetry from NVML. Each device sample says its source ('computed': a replica's
    // compute time / step time; 'nvml': the driver's kernel-busy share of a physical GPU), and an
    // NVML sample the GPU it is of, how many replicas share that GPU (logical GPUs: one sample,
    // stored under the first replica), the GPU's memory in all, its temperature and its
    // memory-controller busy share (NULL where unknown). Samples from before read back as computed.
    R"sql(
ALTER TABLE device_samples ADD COLUMN source TEXT NOT NULL DEFAULT 'computed';
ALTER TABLE device_samples ADD COLUMN gpu INTEGER;
ALTER TABLE device_samples ADD COLUMN gpu_replicas INTEGER NOT NULL DEFAULT 1;
ALTER TABLE device_samples ADD COLUMN memory_total_bytes REAL;
ALTER TABLE device_samples ADD COLUMN temperature_c REAL;
ALTER TABLE device_samples ADD COLUMN memory_busy REAL;
)sql",
    // v11: the process running a sweep (its pid, the pid's start time and the host), as runs have:
    // a sweep whose process is gone reads as interrupted, not running. Sweeps from before have none.
    R"sql(
ALTER TABLE sweeps ADD COLUMN pid INTEGER;
ALTER TABLE sweeps ADD COLUMN pid_start INTEGER;
ALTER TABLE sweeps ADD COLUMN host TEXT NOT NULL DEFAULT '';
)sql",
};

// Tables a store of each version must hold (checked when opening).
inline constexpr const char* kTablesV1[] = {"runs", "steps", "replica_steps", "epochs", "device_samples"};
inline constexpr const char* kTablesV2[] = {"tags", "artifacts"};
inline constexpr const char* kTablesV4[] = {"sweeps", "sweep_points"};
inline constexpr const char* kTablesV6[] = {"run_events"};

}  // namespace ml::store
