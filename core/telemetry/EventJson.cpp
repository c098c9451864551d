// Each event type lists its fields once (fields()), and the same list writes and reads them.
#include "telemetry/EventJson.h"

#include <optional>
#include <stdexcept>
#include <type_traits>

namespace ml {

using nlohmann::json;

namespace {

template <class T>
void put(json& j, const char* key, const T& v) {
  j[key] = v;
}
template <class T>
void put(json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = *v;
}
template <class T>
void take(const json& j, const char* key, T& v) {
  if (const auto it = j.find(key); it != j.end()) it->get_to(v);
}
template <class T>
void take(const json& j, const char* key, std::optional<T>& v) {
  if (const auto it = j.find(key); it != j.end() && !it->is_null()) v = it->get<T>();
}

struct Writer {
  json& j;
  template <class T>
  void operator()(const char* key, const T& v) {
    put(j, key, v);
  }
};
struct Reader {
  const json& j;
  template <class T>
  void operator()(const char* key, T& v) {
    take(j, key, v);
  }
};

RunStatus statusNamed(const std::string& s) {
  for (RunStatus st : {RunStatus::Running, RunStatus::Finished, RunStatus::Cancelled, RunStatus::Diverged, RunStatus::Failed,
                       RunStatus::Interrupted})
    if (s == toString(st)) return st;
  throw std::runtime_error("unknown run status '" + s + "'");
}

}  // namespace

// Enums travel by name; structs inside events by their fields (found by argument-dependent lookup).
static void to_json(json& j, RunStatus s) { j = toString(s); }
static void from_json(const json& j, RunStatus& s) { s = statusNamed(j.get<std::string>()); }
static void to_json(json& j, SampleSource s) { j = toString(s); }
static void from_json(const json& j, SampleSource& s) {
  s = j.get<std::string>() == toString(SampleSource::Nvml) ? SampleSource::Nvml : SampleSource::Computed;
}

template <class IO>
static void fields(IO& f, PhaseTimes& p) {
  f("forward", p.forward), f("backward", p.backward), f("allreduce", p.allreduce), f("wait", p.wait);
  f("optimizer", p.optimizer), f("allgather", p.allgather), f("network", p.network), f("input", p.input);
}
template <class IO>
static void fields(IO& f, ReplicaStep& r) {
  f("replica", r.replica), f("samples", r.samples), f("phases", r.phases), f("start", r.start);
}
template <class IO>
static void fields(IO& f, RunStarted& s) {
  f("run_name", s.runName), f("project", s.projectJson), f("config", s.configJson), f("devices", s.devices);
  f("replicas", s.replicas), f("workers", s.workers), f("hosts", s.hosts), f("global_batch", s.globalBatch);
  f("per_replica_batch", s.perReplicaBatch), f("base_lr", s.baseLr), f("lr", s.lr), f("epochs", s.epochs);
  f("steps_per_epoch", s.stepsPerEpoch), f("total_steps", s.totalSteps), f("description", s.description);
  f("telemetry", s.telemetry), f("tags", s.tags), f("resume_run", s.resumeRun), f("resume_step", s.resumeStep);
  f("resume_epochs_done", s.resumeEpochsDone), f("resume_wall", s.resumeWall);
}
template <class IO>
static void fields(IO& f, StepEvent& s) {
  f("step", s.step), f("epoch", s.epoch), f("step_in_epoch", s.stepInEpoch), f("steps_per_epoch", s.stepsPerEpoch);
  f("loss", s.loss), f("metric", s.metric), f("lr", s.lr), f("samples", s.samples), f("step_time", s.stepTime);
  f("wall", s.wallTime), f("replicas", s.replicas), f("loss_scale", s.lossScale), f("skipped", s.skipped);
}
template <class IO>
static void fields(IO& f, EpochEvent& e) {
  f("epoch", e.epoch), f("train_loss", e.trainLoss), f("train_metric", e.trainMetric), f("val_loss", e.valLoss);
  f("val_metric", e.valMetric), f("seconds", e.seconds), f("samples_per_sec", e.samplesPerSec);
  f("allreduce_share", e.allreduceShare), f("wait_share", e.waitShare), f("checksums", e.checksums);
  f("in_sync", e.inSync), f("wall", e.wallTime);
}
template <class IO>
static void fields(IO& f, DeviceSample& d) {
  f("wall", d.wallTime), f("device", d.device), f("utilization", d.utilization), f("memory", d.memoryBytes);
  f("source", d.source), f("gpu", d.gpu), f("gpu_replicas", d.gpuReplicas), f("memory_total", d.memoryTotalBytes);
  f("temperature", d.temperatureC), f("memory_busy", d.memoryBusy);
}
template <class IO>
static void fields(IO& f, RunPaused& p) {
  f("wall", p.wallTime), f("seconds", p.seconds);
}
template <class IO>
static void fields(IO& f, RunFinished& r) {
  f("status", r.status), f("message", r.message), f("seconds", r.seconds), f("steps", r.steps);
  f("final_val_loss", r.finalValLoss), f("final_val_metric", r.finalValMetric);
}
template <class IO>
static void fields(IO& f, CheckpointSaved& c) {
  f("step", c.step), f("epoch", c.epoch), f("path", c.path), f("checksum", c.checksum), f("bytes", c.bytes);
  f("removed", c.removed), f("wall", c.wallTime);
}
template <class IO>
static void fields(IO& f, WatchdogWarning& w) {
  f("replica", w.replica), f("device", w.device), f("phase", w.phase), f("step", w.step);
  f("late_seconds", w.lateSeconds), f("typical_seconds", w.typicalSeconds), f("message", w.message), f("wall", w.wallTime);
}

// The writer reads the fields through the same non-const list; it never changes them.
template <class T>
static json write(const T& v) {
  json j = json::object();
  Writer w{j};
  fields(w, const_cast<T&>(v));
  return j;
}
template <class T>
static void read(const json& j, T& v) {
  Reader r{j};
  fields(r, v);
}

static void to_json(json& j, const PhaseTimes& p) { j = write(p); }
static void from_json(const json& j, PhaseTimes& p) { read(j, p); }
static void to_json(json& j, const ReplicaStep& r) { j = write(r); }
static void from_json(const json& j, ReplicaStep& r) { read(j, r); }

namespace {
// The type tags, in the order of the Event variant's alternatives.
constexpr const char* kTypes[] = {"started", "step", "epoch", "sample", "paused", "finished", "checkpoint", "watchdog"};
static_assert(std::size(kTypes) == std::variant_size_v<Event>);

template <size_t I = 0>
Event readAlternative(const std::string& type, const json& j) {
  if constexpr (I == std::variant_size_v<Event>) {
    throw std::runtime_error("unknown event type '" + type + "'");
  } else {
    if (type != kTypes[I]) return readAlternative<I + 1>(type, j);
    std::variant_alternative_t<I, Event> e;
    read(j, e);
    return e;
  }
}
}  // namespace

json eventToJson(const Event& e) {
  json j = std::visit([](const auto& v) { return write(v); }, e);
  j["type"] = kTypes[e.index()];
  return j;
}

Event eventFromJson(const json& j) {
  if (!j.is_object() || !j.contains("type")) throw std::runtime_error("not an event: " + j.dump().substr(0, 80));
  return readAlternative(j.at("type").get<std::string>(), j);
}

json recordedRunLine(int64_t runId) { return {{"type", "recorded"}, {"run", runId}}; }

std::optional<int64_t> recordedRunIn(const json& j) {
  if (!j.is_object() || j.value("type", std::string()) != "recorded" || !j.contains("run")) return std::nullopt;
  return j.at("run").get<int64_t>();
}

}  // namespace ml
