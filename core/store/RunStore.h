// The run store: one SQLite file holding every training run — configuration, host, per-step and
// per-replica timings, epochs, device samples, status, tags, note and artifacts.
// One RunStore is one connection: use it from one thread at a time (the recorder opens its own).
// Opening validates the file read-only first, so a foreign or damaged file is never modified.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/Sqlite.h"
#include "telemetry/Events.h"

namespace ml {

// $MIRRORLAB_DB, else $XDG_DATA_HOME/mirrorlab/runs.sqlite, else ~/.local/share/mirrorlab/...
std::string defaultStorePath();

// Where a run's checkpoints live: <store>.checkpoints/run-<id> ("" for an in-memory store).
std::string checkpointFolder(const std::string& storePath, int64_t runId);

struct RunFilter {
  std::string status;  // exact ("finished"); empty: any
  std::string tag;     // runs carrying this tag; empty: any
  std::string name;    // case-insensitive substring of the name; empty: any
};

struct RunSummary {
  int64_t id = 0;
  std::string name;
  double created = 0;              // unix time, seconds
  std::optional<double> finished;  // unix time
  std::string status;              // toString(RunStatus)
  std::string devices;             // the configuration's "devices" ("cpu:4"), else the names
  int replicas = 1;
  int64_t globalBatch = 0;
  std::optional<double> lr;  // after the scaling rule
  std::optional<double> finalValMetric;
  std::optional<double> finalValLoss;
  std::optional<double> secondsPerEpoch;  // mean training seconds of the stored epochs
  int epochsDone = 0;
  std::vector<std::string> tags;
};

// Totals over a run for one replica: where its step time went.
struct ReplicaShare {
  int replica = 0;
  int64_t steps = 0;
  int64_t samples = 0;
  PhaseTimes total;  // seconds summed over the run
  double allreduceShare() const { return total.total() > 0 ? total.allreduce / total.total() : 0; }
  double waitShare() const { return total.total() > 0 ? total.wait / total.total() : 0; }
  double computeShare() const { return total.total() > 0 ? total.compute() / total.total() : 0; }
  double networkShare() const { return total.total() > 0 ? total.network / total.total() : 0; }
};

struct Artifact {
  int64_t id = 0;
  std::string path, kind, checksum;
  std::optional<int64_t> bytes;
  double created = 0;
};

// What happened to a run besides its steps, in order: a pause ("pause": seconds paused after
// step) or a watchdog warning ("straggler": seconds late, the replica, the message).
struct RunEvent {
  std::string kind;
  int64_t step = 0;
  double wallTime = 0;  // the run's clock (paused time excluded)
  double seconds = 0;
  std::optional<int> replica;
  std::string message;
};

struct RunDetail {
  RunSummary summary;
  std::string error;
  std::string projectJson, configJson, hostJson;
  std::string host;  // host name of the writing process
  // Several workers (processes under mpirun; rank 0 wrote the run): how many, and the host of
  // each by rank. One worker: 1 and {} (runs stored before workers existed read back so too).
  int workers = 1;
  std::vector<std::string> hosts;
  std::optional<int64_t> pid;
  std::vector<std::string> deviceNames;
  int64_t perReplicaBatch = 0;
  std::optional<double> baseLr;
  int epochsPlanned = 0;
  int64_t stepsPerEpoch = 0, totalSteps = 0;
  std::optional<double> seconds;  // from RunFinished
  std::optional<int64_t> steps;   // from RunFinished
  std::string description, note;
  uint64_t droppedEvents = 0;  // telemetry the recorder never saw (channel full)
  // The studio's drawing while the run trained: frames drawn and ms spent drawing them. Absent
  // when nothing drew (the CLI, a headless run), so a stored speed says whether charts competed.
  std::optional<int64_t> uiFrames;
  std::optional<double> uiDrawMs;
  std::vector<EpochEvent> epochs;
  std::vector<ReplicaShare> replicas;
  std::vector<Artifact> artifacts;
  std::vector<RunEvent> events;
  double pausedSeconds() const;  // summed over the "pause" events
};

class RunStore {
 public:
  // Creates the file (and its folder) on first use, migrates older schemas forward and marks
  // runs whose writing process is gone as interrupted. Throws UserError naming the file when it
  // is not SQLite, not a Mirrorlab store, from a newer Mirrorlab, damaged, or not writable.
  static RunStore open(const std::string& path);
  // For commands that only read (runs list, show, compare, export): open() where the store can
  // be written; a store on a read-only file, folder or medium is opened read-only after the same
  // checks, and nothing is written (dead runs are not marked interrupted, no WAL is created).
  static RunStore openForReading(const std::string& path);

  RunStore(RunStore&&) noexcept;
  RunStore& operator=(RunStore&&) noexcept;
  ~RunStore();

  const std::string& path() const { return db_.path(); }
  int schemaVersion();
  sql::Db& db() { return db_; }
  // Groups the calls below into one transaction (the recorder's batches).
  sql::Transaction transaction() { return sql::Transaction(db_); }

  // Writing a run. The writing process's pid and host name are stored with it.
  int64_t createRun(const RunStarted& started, const nlohmann::json& host);
  void appendSteps(int64_t run, std::span<const StepEvent> steps);
  void appendEpochs(int64_t run, std::span<const EpochEvent> epochs);
  void appendDeviceSamples(int64_t run, std::span<const DeviceSample> samples);
  void finishRun(int64_t run, const RunFinished& finished);
  void finishRun(int64_t run, RunStatus status, const std::string& message);
  void setDroppedEvents(int64_t run, uint64_t dropped);
  void setUiCost(int64_t run, int64_t frames, double drawMs);
  void addEvent(int64_t run, const RunEvent& event);  // numbered after the run's last one
  // Runs still "running" whose process (on this host) is gone become "interrupted".
  int markInterruptedRuns();
  // Likewise sweeps (and their running points) whose process is gone become "interrupted".
  int markInterruptedSweeps();
  // False when the process (pid, its start time) on this host is gone; true while it lives, and
  // for another host, where it cannot be seen.
  static bool writerAlive(const std::string& host, int64_t pid, int64_t pidStart);
  // The temporary checkpoint files (.step-N.mlck.tmp-*) a kill left in the folders of runs that
  // are not running; open() calls it, so a resume or the next run of the store cleans them.
  // Returns how many were removed.
  int removeStaleCheckpointTemps();

  // Reading.
  std::vector<RunSummary> listRuns(const RunFilter& filter = {});
  RunDetail loadRun(int64_t run);
  std::vector<StepEvent> loadCurves(int64_t run);                                   // every step, without per-replica timings
  std::vector<StepEvent> loadSteps(int64_t run, int64_t fromStep, int64_t toStep);  // with them
  std::vector<DeviceSample> loadDeviceSamples(int64_t run);
  int64_t samplesThroughEpoch(int64_t run, int epoch);  // sum of step samples, epochs 1..epoch

  // Editing.
  void renameRun(int64_t run, const std::string& name);
  void tagRun(int64_t run, const std::string& tag);
  void untagRun(int64_t run, const std::string& tag);
  void setNote(int64_t run, const std::string& note);
  // Every row of the run, in every table, in one transaction; then its checkpoint files.
  void deleteRun(int64_t run);
  // A resumed run goes on in its row: the rows after its checkpoint (steps after fromStep, epochs
  // after epochsDone, device samples after wall) go, and it is running again in this process.
  void resumeRun(int64_t run, int64_t fromStep, int epochsDone, double wall);
  void removeArtifact(int64_t run, const std::string& path);
  int64_t addArtifact(int64_t run, const std::string& path, const std::string& kind, const std::string& checksum,
                      std::optional<int64_t> bytes = std::nullopt);

  // steps.csv, epochs.csv, replica_steps.csv, device_samples.csv with headers; creates dir.
  void exportCsv(int64_t run, const std::string& dir);

 private:
  struct Inserts;
  RunStore();
  void requireRun(int64_t run);
  std::vector<RunSummary> summaries(const RunFilter& filter, std::optional<int64_t> id);
  void configure();
  void migrate();
  Inserts& inserts();

  sql::Db db_;
  std::unique_ptr<Inserts> inserts_;  // prepared once, on first write
};

}  // namespace ml
