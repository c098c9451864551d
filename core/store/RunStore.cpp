// Writing, reading and editing runs in the store; opening and migrating is in StoreOpen.cpp,
// the CSV export in CsvExport.cpp. Phase timings are stored as integer microseconds.
#include "store/RunStore.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "Error.h"
#include "JsonFile.h"
#include "store/HostInfo.h"

namespace ml {
namespace {

double unixNow() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

int64_t toMicros(double seconds) { return std::llround(seconds * 1e6); }
double fromMicros(int64_t us) { return static_cast<double>(us) * 1e-6; }

std::string joinChecksums(const std::vector<uint64_t>& sums) {
  std::string out;
  char buf[20];
  for (uint64_t c : sums) {
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(c));
    if (!out.empty()) out += ',';
    out += buf;
  }
  return out;
}

std::vector<uint64_t> splitChecksums(const std::string& s) {
  std::vector<uint64_t> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    out.push_back(std::strtoull(s.substr(pos, comma - pos).c_str(), nullptr, 16));
    pos = comma + 1;
  }
  return out;
}

// The configuration's short device spec ("cpu:4"), else the device names joined; a run of several
// workers says so first ("2 workers x cpu:2"): the list of runs shows it.
std::string deviceSpec(const RunStarted& s) {
  const std::string workers = s.workers > 1 ? std::to_string(s.workers) + " workers x " : "";
  auto cfg = parseJsonOrDiscarded(s.configJson);
  if (cfg.is_object() && cfg.contains("devices") && cfg["devices"].is_string())
    return workers + cfg["devices"].get<std::string>();
  std::string out;
  for (const auto& d : s.devices) out += (out.empty() ? "" : ",") + d;
  return out;
}

std::vector<std::string> splitLines(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t nl = s.find('\n', pos);
    if (nl == std::string::npos) nl = s.size();
    out.push_back(s.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

}  // namespace

struct RunStore::Inserts {
  sql::Stmt step, replica, epoch, sample;
};

RunStore::RunStore() = default;
RunStore::RunStore(RunStore&&) noexcept = default;
RunStore& RunStore::operator=(RunStore&&) noexcept = default;
RunStore::~RunStore() = default;

RunStore::Inserts& RunStore::inserts() {
  if (!inserts_) {
    inserts_ = std::make_unique<Inserts>();
    inserts_->step = db_.prepare(
        "INSERT OR REPLACE INTO steps(run_id, step, epoch, loss, metric, lr, samples, step_time, "
        "wall_time, loss_scale, skipped) VALUES(?,?,?,?,?,?,?,?,?,nullif(?,0),?)");
    inserts_->replica = db_.prepare(
        "INSERT OR REPLACE INTO replica_steps(run_id, step, replica, samples, start_us, "
        "forward_us, backward_us, allreduce_us, wait_us, optimizer_us, allgather_us, network_us, input_us) "
        "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)");
    inserts_->epoch = db_.prepare(
        "INSERT OR REPLACE INTO epochs(run_id, epoch, train_loss, train_metric, val_loss, "
        "val_metric, seconds, samples_per_sec, allreduce_share, wait_share, in_sync, checksums, "
        "wall_time) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)");
    inserts_->sample = db_.prepare(
        "INSERT OR REPLACE INTO device_samples(run_id, device, wall_time, utilization, "
        "memory_bytes, source, gpu, gpu_replicas, memory_total_bytes, temperature_c, memory_busy) "
        "VALUES(?,?,?,?,?,?,?,?,nullif(?,0),?,?)");
  }
  return *inserts_;
}

int RunStore::schemaVersion() { return static_cast<int>(db_.queryInt("PRAGMA user_version")); }

void RunStore::requireRun(int64_t run) {
  auto q = db_.prepare("SELECT 1 FROM runs WHERE id=?");
  q.bind(1, run);
  if (!q.step())
    throw UserError("run store " + path() + " has no run " + std::to_string(run) + "; `mirrorlab-cli runs list` shows the ids");
}

int64_t RunStore::createRun(const RunStarted& s, const nlohmann::json& host) {
  sql::Transaction tx(db_);
  auto q = db_.prepare(
      "INSERT INTO runs(name, created, status, devices, replicas, global_batch, "
      "per_replica_batch, base_lr, lr, epochs, steps_per_epoch, total_steps, pid, pid_start, "
      "host, description, device_names, project_json, config_json, host_json, workers, hosts) "
      "VALUES(?,?,'running',?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  int64_t pid = ::getpid();
  q.bindAll(s.runName, unixNow(), deviceSpec(s), s.replicas, s.globalBatch, s.perReplicaBatch, s.baseLr, s.lr, s.epochs,
            s.stepsPerEpoch, s.totalSteps, pid, processStartTicks(pid), hostName(), s.description,
            nlohmann::json(s.devices).dump(), s.projectJson, s.configJson, host.dump(), std::max(1, s.workers),
            nlohmann::json(s.hosts).dump());
  q.run();
  int64_t id = db_.lastInsertId();
  for (const auto& tag : s.tags) {
    auto t = db_.prepare("INSERT OR IGNORE INTO tags(run_id, tag) VALUES(?,?)");
    t.bindAll(id, tag).run();
  }
  if (s.runName.empty()) {
    auto u = db_.prepare("UPDATE runs SET name='run ' || id WHERE id=?");
    u.bind(1, id).run();
  }
  tx.commit();
  return id;
}

void RunStore::appendSteps(int64_t run, std::span<const StepEvent> steps) {
  sql::Transaction tx(db_);
  auto& ins = inserts();
  for (const StepEvent& e : steps) {
    // A loss scale of 0 (no loss scaling) is stored as NULL (nullif in the statement).
    ins.step.bindAll(run, e.step, e.epoch, e.loss, e.metric, e.lr, e.samples, e.stepTime, e.wallTime, e.lossScale,
                     e.skipped ? 1 : 0);
    ins.step.run();
    for (const ReplicaStep& r : e.replicas) {
      const PhaseTimes& p = r.phases;
      ins.replica.bindAll(run, e.step, r.replica, r.samples, toMicros(r.start), toMicros(p.forward), toMicros(p.backward),
                          toMicros(p.allreduce), toMicros(p.wait), toMicros(p.optimizer), toMicros(p.allgather),
                          toMicros(p.network), toMicros(p.input));
      ins.replica.run();
    }
  }
  tx.commit();
}

void RunStore::appendEpochs(int64_t run, std::span<const EpochEvent> epochs) {
  sql::Transaction tx(db_);
  auto& ins = inserts();
  for (const EpochEvent& e : epochs) {
    ins.epoch.bindAll(run, e.epoch, e.trainLoss, e.trainMetric, e.valLoss, e.valMetric, e.seconds, e.samplesPerSec,
                      e.allreduceShare, e.waitShare, e.inSync ? 1 : 0, joinChecksums(e.checksums), e.wallTime);
    ins.epoch.run();
  }
  tx.commit();
}

void RunStore::appendDeviceSamples(int64_t run, std::span<const DeviceSample> samples) {
  sql::Transaction tx(db_);
  auto& ins = inserts();
  for (const DeviceSample& d : samples) {
    const bool nvml = d.source == SampleSource::Nvml;
    ins.sample.bindAll(run, d.device, d.wallTime, d.utilization, d.memoryBytes, toString(d.source),
                       nvml ? std::optional<int64_t>(d.gpu) : std::nullopt, nvml ? d.gpuReplicas : 1, d.memoryTotalBytes,
                       d.temperatureC, d.memoryBusy);
    ins.sample.run();
  }
  tx.commit();
}

void RunStore::finishRun(int64_t run, const RunFinished& f) {
  auto u = db_.prepare(
      "UPDATE runs SET status=?, error=?, finished=?, seconds=?, steps=?, "
      "final_val_loss=coalesce(?, final_val_loss), final_val_metric=coalesce(?, "
      "final_val_metric) WHERE id=?");
  u.bindAll(toString(f.status), f.message, unixNow(), f.seconds, f.steps, f.finalValLoss, f.finalValMetric, run);
  u.run();
}

void RunStore::finishRun(int64_t run, RunStatus status, const std::string& message) {
  auto u = db_.prepare("UPDATE runs SET status=?, error=?, finished=? WHERE id=?");
  u.bindAll(toString(status), message, unixNow(), run);
  u.run();
}

void RunStore::setUiCost(int64_t run, int64_t frames, double drawMs) {
  requireRun(run);
  auto u = db_.prepare("UPDATE runs SET ui_frames=?, ui_draw_ms=? WHERE id=?");
  u.bindAll(frames, drawMs, run);
  u.run();
}

void RunStore::setDroppedEvents(int64_t run, uint64_t dropped) {
  auto u = db_.prepare("UPDATE runs SET dropped_events=? WHERE id=?");
  u.bindAll(static_cast<int64_t>(dropped), run);
  u.run();
}

std::vector<RunSummary> RunStore::listRuns(const RunFilter& f) { return summaries(f, {}); }

std::vector<RunSummary> RunStore::summaries(const RunFilter& f, std::optional<int64_t> id) {
  // Summary numbers come from the small epochs table, never from steps.
  auto q = db_.prepare(R"sql(
SELECT r.id, r.name, r.created, r.finished, r.status, r.devices, r.replicas, r.global_batch, r.lr,
  coalesce(r.final_val_metric, (SELECT e.val_metric FROM epochs e
    WHERE e.run_id=r.id AND e.val_metric IS NOT NULL ORDER BY e.epoch DESC LIMIT 1)),
  coalesce(r.final_val_loss, (SELECT e.val_loss FROM epochs e
    WHERE e.run_id=r.id AND e.val_loss IS NOT NULL ORDER BY e.epoch DESC LIMIT 1)),
  (SELECT avg(e.seconds) FROM epochs e WHERE e.run_id=r.id),
  (SELECT count(*) FROM epochs e WHERE e.run_id=r.id),
  (SELECT group_concat(t.tag, char(10)) FROM tags t WHERE t.run_id=r.id)
FROM runs r
WHERE (?1='' OR r.status=?1)
  AND (?2='' OR EXISTS(SELECT 1 FROM tags t WHERE t.run_id=r.id AND t.tag=?2))
  AND (?3='' OR instr(lower(r.name), lower(?3)) > 0)
  AND (?4 IS NULL OR r.id=?4)
ORDER BY r.id)sql");
  q.bindAll(f.status, f.tag, f.name, id);
  std::vector<RunSummary> out;
  while (q.step()) {
    RunSummary s;
    s.id = q.getInt(0);
    s.name = q.getText(1);
    s.created = q.getDouble(2);
    s.finished = q.getOptDouble(3);
    s.status = q.getText(4);
    s.devices = q.getText(5);
    s.replicas = static_cast<int>(q.getInt(6));
    s.globalBatch = q.getInt(7);
    s.lr = q.getOptDouble(8);
    s.finalValMetric = q.getOptDouble(9);
    s.finalValLoss = q.getOptDouble(10);
    s.secondsPerEpoch = q.getOptDouble(11);
    s.epochsDone = static_cast<int>(q.getInt(12));
    s.tags = splitLines(q.getText(13));
    out.push_back(std::move(s));
  }
  return out;
}

// Long: one column per line for the runs row, then one short query per child table (steps,
// epochs, events, artifacts); a RunDetail is filled in one place.
RunDetail RunStore::loadRun(int64_t run) {
  RunDetail d;
  {
    auto q = db_.prepare(
        "SELECT error, project_json, config_json, host_json, host, pid, device_names, "
        "per_replica_batch, base_lr, epochs, steps_per_epoch, total_steps, seconds, steps, "
        "description, note, dropped_events, ui_frames, ui_draw_ms, workers, hosts FROM runs WHERE id=?");
    q.bind(1, run);
    if (!q.step()) requireRun(run);
    d.error = q.getText(0);
    d.projectJson = q.getText(1);
    d.configJson = q.getText(2);
    d.hostJson = q.getText(3);
    d.host = q.getText(4);
    d.pid = q.getOptInt(5);
    auto names = parseJsonOrDiscarded(q.getText(6));
    if (names.is_array())
      for (auto& n : names)
        if (n.is_string()) d.deviceNames.push_back(n.get<std::string>());
    d.perReplicaBatch = q.getInt(7);
    d.baseLr = q.getOptDouble(8);
    d.epochsPlanned = static_cast<int>(q.getInt(9));
    d.stepsPerEpoch = q.getInt(10);
    d.totalSteps = q.getInt(11);
    d.seconds = q.getOptDouble(12);
    d.steps = q.getOptInt(13);
    d.description = q.getText(14);
    d.note = q.getText(15);
    d.droppedEvents = static_cast<uint64_t>(q.getInt(16));
    d.uiFrames = q.getOptInt(17);
    d.uiDrawMs = q.getOptDouble(18);
    d.workers = std::max<int>(1, static_cast<int>(q.getInt(19)));
    auto hosts = parseJsonOrDiscarded(q.getText(20));
    if (hosts.is_array())
      for (auto& h : hosts)
        if (h.is_string()) d.hosts.push_back(h.get<std::string>());
  }
  d.summary = summaries({}, run).at(0);
  {
    auto q = db_.prepare(
        "SELECT epoch, train_loss, train_metric, val_loss, val_metric, seconds, "
        "samples_per_sec, allreduce_share, wait_share, in_sync, checksums, wall_time "
        "FROM epochs WHERE run_id=? ORDER BY epoch");
    q.bind(1, run);
    while (q.step()) {
      EpochEvent e;
      e.epoch = static_cast<int>(q.getInt(0));
      e.trainLoss = q.getDouble(1);
      e.trainMetric = q.getDouble(2);
      e.valLoss = q.getOptDouble(3);
      e.valMetric = q.getOptDouble(4);
      e.seconds = q.getDouble(5);
      e.samplesPerSec = q.getDouble(6);
      e.allreduceShare = q.getDouble(7);
      e.waitShare = q.getDouble(8);
      e.inSync = q.getInt(9) != 0;
      e.checksums = splitChecksums(q.getText(10));
      e.wallTime = q.getDouble(11);
      d.epochs.push_back(std::move(e));
    }
  }
  {
    // Summed here rather than with GROUP BY, which would sort 400,000 rows for a long run.
    auto q = db_.prepare(
        "SELECT replica, samples, forward_us, backward_us, allreduce_us, wait_us, optimizer_us, allgather_us, "
        "network_us, input_us FROM replica_steps WHERE run_id=?");
    q.bind(1, run);
    std::vector<std::array<int64_t, 10>> sums;  // steps, samples, eight phases in microseconds
    while (q.step()) {
      int64_t replica = q.getInt(0);
      if (replica < 0 || replica > 65535) continue;  // not a replica index
      auto r = static_cast<size_t>(replica);
      if (r >= sums.size()) sums.resize(r + 1, {});
      sums[r][0] += 1;
      for (int c = 1; c < 10; ++c) sums[r][c] += q.getInt(c);
    }
    for (size_t r = 0; r < sums.size(); ++r) {
      if (sums[r][0] == 0) continue;
      ReplicaShare s;
      s.replica = static_cast<int>(r);
      s.steps = sums[r][0];
      s.samples = sums[r][1];
      s.total = PhaseTimes{fromMicros(sums[r][2]), fromMicros(sums[r][3]), fromMicros(sums[r][4]), fromMicros(sums[r][5]),
                           fromMicros(sums[r][6]), fromMicros(sums[r][7]), fromMicros(sums[r][8]), fromMicros(sums[r][9])};
      d.replicas.push_back(s);
    }
  }
  {
    auto q = db_.prepare(
        "SELECT id, path, kind, checksum, bytes, created FROM artifacts WHERE run_id=? "
        "ORDER BY id");
    q.bind(1, run);
    while (q.step())
      d.artifacts.push_back(Artifact{q.getInt(0), q.getText(1), q.getText(2), q.getText(3), q.getOptInt(4), q.getDouble(5)});
  }
  {
    auto q = db_.prepare("SELECT kind, step, wall_time, seconds, replica, message FROM run_events WHERE run_id=? ORDER BY seq");
    q.bind(1, run);
    while (q.step()) {
      const auto replica = q.getOptInt(4);
      d.events.push_back(RunEvent{q.getText(0), q.getInt(1), q.getDouble(2), q.getDouble(3),
                                  replica ? std::optional<int>(static_cast<int>(*replica)) : std::nullopt, q.getText(5)});
    }
  }
  return d;
}

double RunDetail::pausedSeconds() const {
  double s = 0;
  for (const auto& e : events)
    if (e.kind == "pause") s += e.seconds;
  return s;
}

void RunStore::addEvent(int64_t run, const RunEvent& e) {
  auto q = db_.prepare(
      "INSERT INTO run_events(run_id, seq, kind, step, wall_time, seconds, replica, message) "
      "VALUES(?1, (SELECT coalesce(max(seq), 0) + 1 FROM run_events WHERE run_id=?1), ?2, ?3, ?4, ?5, ?6, ?7)");
  std::optional<int64_t> replica;
  if (e.replica) replica = *e.replica;
  q.bindAll(run, e.kind, e.step, e.wallTime, e.seconds, replica, e.message).run();
}

std::vector<StepEvent> RunStore::loadCurves(int64_t run) {
  requireRun(run);
  auto spe = db_.prepare("SELECT steps_per_epoch, coalesce(steps, total_steps) FROM runs WHERE id=?");
  spe.bind(1, run);
  int64_t perEpoch = spe.step() ? spe.getInt(0) : 0;
  int64_t expected = spe.getInt(1);
  auto q = db_.prepare(
      "SELECT step, epoch, loss, metric, lr, samples, step_time, wall_time, coalesce(loss_scale, 0), skipped FROM steps "
      "WHERE run_id=? ORDER BY step");
  q.bind(1, run);
  std::vector<StepEvent> out;
  out.reserve(static_cast<size_t>(std::clamp<int64_t>(expected, 0, 10'000'000)));
  while (q.step()) {
    StepEvent& e = out.emplace_back();
    e.step = q.getInt(0);
    e.epoch = static_cast<int>(q.getInt(1));
    e.loss = q.getDouble(2);
    e.metric = q.getDouble(3);
    e.lr = q.getDouble(4);
    e.samples = q.getInt(5);
    e.stepTime = q.getDouble(6);
    e.wallTime = q.getDouble(7);
    e.lossScale = q.getDouble(8);
    e.skipped = q.getInt(9) != 0;
    e.stepsPerEpoch = perEpoch;
    e.stepInEpoch = perEpoch > 0 ? e.step - int64_t(e.epoch - 1) * perEpoch : 0;
  }
  return out;
}

std::vector<StepEvent> RunStore::loadSteps(int64_t run, int64_t fromStep, int64_t toStep) {
  std::vector<StepEvent> out;
  for (StepEvent& e : loadCurves(run))
    if (e.step >= fromStep && e.step <= toStep) out.push_back(std::move(e));
  auto q = db_.prepare(
      "SELECT step, replica, samples, start_us, forward_us, backward_us, allreduce_us, wait_us, "
      "optimizer_us, allgather_us, network_us, input_us FROM replica_steps WHERE run_id=? AND step BETWEEN ? AND ? "
      "ORDER BY step, replica");
  q.bindAll(run, fromStep, toStep);
  size_t i = 0;
  while (q.step()) {
    int64_t step = q.getInt(0);
    while (i < out.size() && out[i].step < step) ++i;
    if (i == out.size() || out[i].step != step) continue;  // a replica row without its step
    ReplicaStep r;
    r.replica = static_cast<int>(q.getInt(1));
    r.samples = q.getInt(2);
    r.start = fromMicros(q.getInt(3));
    r.phases = PhaseTimes{fromMicros(q.getInt(4)), fromMicros(q.getInt(5)), fromMicros(q.getInt(6)),  fromMicros(q.getInt(7)),
                          fromMicros(q.getInt(8)), fromMicros(q.getInt(9)), fromMicros(q.getInt(10)), fromMicros(q.getInt(11))};
    out[i].replicas.push_back(r);
  }
  return out;
}

std::vector<DeviceSample> RunStore::loadDeviceSamples(int64_t run) {
  requireRun(run);
  auto q = db_.prepare(
      "SELECT wall_time, device, utilization, memory_bytes, source, gpu, gpu_replicas, memory_total_bytes, "
      "temperature_c, memory_busy FROM device_samples WHERE run_id=? ORDER BY wall_time, device");
  q.bind(1, run);
  std::vector<DeviceSample> out;
  while (q.step()) {
    DeviceSample d{q.getDouble(0), static_cast<int>(q.getInt(1)), q.getDouble(2), q.getDouble(3)};
    if (q.getText(4) == "nvml") {
      d.source = SampleSource::Nvml;
      d.gpu = static_cast<int>(q.getInt(5));
      d.gpuReplicas = static_cast<int>(q.getInt(6));
    }
    d.memoryTotalBytes = q.getDouble(7);  // NULL reads 0: unknown
    d.temperatureC = q.getOptDouble(8);
    d.memoryBusy = q.getOptDouble(9);
    out.push_back(d);
  }
  return out;
}

int64_t RunStore::samplesThroughEpoch(int64_t run, int epoch) {
  auto q = db_.prepare("SELECT coalesce(sum(samples), 0) FROM steps WHERE run_id=? AND epoch<=?");
  q.bindAll(run, epoch);
  return q.step() ? q.getInt(0) : 0;
}

void RunStore::renameRun(int64_t run, const std::string& name) {
  if (name.empty()) throw UserError("a run name cannot be empty; give a name");
  requireRun(run);
  auto u = db_.prepare("UPDATE runs SET name=? WHERE id=?");
  u.bindAll(name, run).run();
}

void RunStore::tagRun(int64_t run, const std::string& tag) {
  if (tag.empty() || tag.find('\n') != std::string::npos)
    throw UserError("a tag must be one non-empty line; give a tag such as \"baseline\"");
  requireRun(run);
  auto u = db_.prepare("INSERT OR IGNORE INTO tags(run_id, tag) VALUES(?,?)");
  u.bindAll(run, tag).run();
}

void RunStore::untagRun(int64_t run, const std::string& tag) {
  requireRun(run);
  auto u = db_.prepare("DELETE FROM tags WHERE run_id=? AND tag=?");
  u.bindAll(run, tag).run();
}

void RunStore::setNote(int64_t run, const std::string& note) {
  requireRun(run);
  auto u = db_.prepare("UPDATE runs SET note=? WHERE id=?");
  u.bindAll(note, run).run();
}

void RunStore::deleteRun(int64_t run) {
  sql::Transaction tx(db_);
  requireRun(run);
  for (const char* table : {"replica_steps", "steps", "epochs", "device_samples", "tags", "artifacts", "run_events"}) {
    auto d = db_.prepare(std::string("DELETE FROM ") + table + " WHERE run_id=?");
    d.bind(1, run).run();
  }
  auto d = db_.prepare("DELETE FROM runs WHERE id=?");
  d.bind(1, run).run();
  tx.commit();
  // The files after the rows: a crash in between leaves files without a run, never a run whose
  // checkpoints are gone.
  const std::string folder = checkpointFolder(path(), run);
  std::error_code ec;
  if (!folder.empty()) std::filesystem::remove_all(folder, ec);
}

std::string checkpointFolder(const std::string& storePath, int64_t runId) {
  if (storePath.empty() || storePath == ":memory:") return {};
  return storePath + ".checkpoints/run-" + std::to_string(runId);
}

void RunStore::resumeRun(int64_t run, int64_t fromStep, int epochsDone, double wall) {
  sql::Transaction tx(db_);
  requireRun(run);
  for (const char* table : {"replica_steps", "steps", "run_events"}) {
    auto d = db_.prepare(std::string("DELETE FROM ") + table + " WHERE run_id=? AND step>?");
    d.bindAll(run, fromStep).run();
  }
  auto e = db_.prepare("DELETE FROM epochs WHERE run_id=? AND epoch>?");
  e.bindAll(run, epochsDone).run();
  auto s = db_.prepare("DELETE FROM device_samples WHERE run_id=? AND wall_time>?");
  s.bindAll(run, wall).run();
  const int64_t pid = ::getpid();
  auto u = db_.prepare(
      "UPDATE runs SET status='running', error='', finished=NULL, seconds=NULL, steps=?, pid=?, pid_start=?, host=? WHERE id=?");
  u.bindAll(fromStep, pid, processStartTicks(pid), hostName(), run).run();
  tx.commit();
}

void RunStore::removeArtifact(int64_t run, const std::string& p) {
  auto d = db_.prepare("DELETE FROM artifacts WHERE run_id=? AND path=?");
  d.bindAll(run, p).run();
}

int64_t RunStore::addArtifact(int64_t run, const std::string& path, const std::string& kind, const std::string& checksum,
                              std::optional<int64_t> bytes) {
  requireRun(run);
  auto q = db_.prepare("INSERT INTO artifacts(run_id, path, kind, checksum, bytes, created) VALUES(?,?,?,?,?,?)");
  q.bindAll(run, path, kind, checksum, bytes, unixNow()).run();
  return db_.lastInsertId();
}

}  // namespace ml
