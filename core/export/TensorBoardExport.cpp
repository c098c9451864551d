// A stored run as TensorFlow events: per step the training loss and metric, learning rate,
// samples/s, sync share and each replica's compute, all-reduce and wait seconds; per epoch the
// epoch's means and validation; the effective configuration (flattened) as hparams, and the
// run's status as the session's end.
#include "export/TensorBoardExport.h"

#include <cctype>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "AtomicFile.h"
#include "Error.h"
#include "export/EventFile.h"
#include "nn/Loss.h"
#include "project/Project.h"
#include "store/RunStore.h"

namespace fs = std::filesystem;

namespace ml {

namespace {

// "accuracy" or "mae", as the run's project names its metric (the store keeps the number only).
std::string metricName(const RunDetail& d) {
  try {
    const Project p = Project::fromJson(nlohmann::json::parse(d.projectJson));
    const auto loss = Loss::make(p.training.loss, p.training.fromLogits);
    return toString(metricFor(p.training.metrics.empty() ? "" : p.training.metrics.front(), loss));
  } catch (const std::exception&) {
    return "metric";  // a project this Mirrorlab no longer reads: the number keeps a neutral name
  }
}

// Nested keys joined with "." (optimizer.learning_rate); lists as their JSON text.
void flatten(const nlohmann::json& j, const std::string& prefix, std::vector<std::pair<std::string, HParamValue>>& out) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
    const auto& v = it.value();
    HParamValue h;
    if (v.is_object()) {
      flatten(v, key, out);
      continue;
    }
    if (v.is_null()) continue;
    if (v.is_boolean()) {
      h.kind = HParamValue::Kind::Bool;
      h.flag = v.get<bool>();
    } else if (v.is_number()) {
      h.number = v.get<double>();
    } else {
      h.kind = HParamValue::Kind::String;
      h.text = v.is_string() ? v.get<std::string>() : v.dump();
    }
    out.emplace_back(key, h);
  }
}

int sessionStatus(const std::string& status) {
  if (status == "finished") return 1;
  if (status == "running") return 3;
  if (status == "failed" || status == "diverged" || status == "cancelled" || status == "interrupted") return 2;
  return 0;
}

void stepScalars(EventFile& f, double t0, const StepEvent& s, const std::string& metric) {
  const double at = t0 + s.wallTime;
  f.scalar(at, s.step, "step/loss", static_cast<float>(s.loss));
  f.scalar(at, s.step, "step/" + metric, static_cast<float>(s.metric));
  f.scalar(at, s.step, "step/learning_rate", static_cast<float>(s.lr));
  if (s.stepTime > 0) f.scalar(at, s.step, "step/samples_per_second", static_cast<float>(s.samples / s.stepTime));
  if (s.lossScale > 0) f.scalar(at, s.step, "step/loss_scale", static_cast<float>(s.lossScale));
  double sync = 0, all = 0;
  for (const ReplicaStep& r : s.replicas) {
    const PhaseTimes& p = r.phases;
    const double allreduce = p.allreduce + p.allgather + p.network;  // as the epoch's share counts it
    sync += allreduce + p.wait;
    all += p.total();
    const std::string tag = "replica_" + std::to_string(r.replica) + "/";
    f.scalar(at, s.step, tag + "compute_seconds", static_cast<float>(p.compute()));
    f.scalar(at, s.step, tag + "allreduce_seconds", static_cast<float>(allreduce));
    f.scalar(at, s.step, tag + "wait_seconds", static_cast<float>(p.wait));
  }
  if (all > 0) f.scalar(at, s.step, "step/sync_share", static_cast<float>(sync / all));
}

void epochScalars(EventFile& f, double t0, const EpochEvent& e, const std::string& metric) {
  const double at = t0 + e.wallTime;
  f.scalar(at, e.epoch, "epoch/loss", static_cast<float>(e.trainLoss));
  f.scalar(at, e.epoch, "epoch/" + metric, static_cast<float>(e.trainMetric));
  if (e.valLoss) f.scalar(at, e.epoch, "epoch/val_loss", static_cast<float>(*e.valLoss));
  if (e.valMetric) f.scalar(at, e.epoch, "epoch/val_" + metric, static_cast<float>(*e.valMetric));
  f.scalar(at, e.epoch, "epoch/seconds", static_cast<float>(e.seconds));
  f.scalar(at, e.epoch, "epoch/samples_per_second", static_cast<float>(e.samplesPerSec));
  f.scalar(at, e.epoch, "epoch/allreduce_share", static_cast<float>(e.allreduceShare));
  f.scalar(at, e.epoch, "epoch/wait_share", static_cast<float>(e.waitShare));
  f.scalar(at, e.epoch, "epoch/sync_share", static_cast<float>(e.allreduceShare + e.waitShare));
}

}  // namespace

std::string tensorBoardFolder(int64_t run, const std::string& name) {
  std::string s = "run-" + std::to_string(run);
  std::string tail;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      tail += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (!tail.empty() && tail.back() != '-')
      tail += '-';
  }
  while (!tail.empty() && tail.back() == '-') tail.pop_back();
  if (tail.size() > 48) tail.resize(48);
  return tail.empty() ? s : s + "-" + tail;
}

std::vector<TensorBoardRun> exportTensorBoard(RunStore& store, const std::vector<int64_t>& runs, const std::string& dir) {
  if (runs.empty()) throw UserError("name the runs to export (see `runs list`)");
  std::vector<RunDetail> details;
  for (int64_t id : runs) details.push_back(store.loadRun(id));  // every run checked before anything is written
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec))
    throw UserError("cannot create the folder '" + dir +
                    "' for the TensorBoard logs: choose a writable folder for --tensorboard");
  std::vector<TensorBoardRun> out;
  for (const RunDetail& d : details) {
    const RunSummary& s = d.summary;
    TensorBoardRun r;
    r.run = s.id;
    r.folder = (fs::path(dir) / tensorBoardFolder(s.id, s.name)).string();
    fs::create_directories(r.folder, ec);
    if (ec) throw UserError("cannot create the folder '" + r.folder + "': " + ec.message());
    const double t0 = s.created;
    EventFile f(t0);
    std::vector<std::pair<std::string, HParamValue>> hparams;
    hparams.push_back({"run_id", HParamValue{HParamValue::Kind::Number, static_cast<double>(s.id), {}, false}});
    hparams.push_back({"run_name", HParamValue{HParamValue::Kind::String, 0, s.name, false}});
    const auto config = nlohmann::json::parse(d.configJson, nullptr, false);
    if (config.is_object()) flatten(config, "", hparams);
    f.sessionStart(t0, hparams, tensorBoardFolder(s.id, s.name));
    const std::string metric = metricName(d);
    for (const StepEvent& step : store.loadSteps(s.id, 0, INT64_MAX)) stepScalars(f, t0, step, metric);
    for (const EpochEvent& e : d.epochs) epochScalars(f, t0, e, metric);
    f.sessionEnd(s.finished.value_or(t0), sessionStatus(s.status));
    // One file per run, named by its start: a second export replaces it instead of doubling the curves.
    r.file = (fs::path(r.folder) / ("events.out.tfevents." + std::to_string(static_cast<int64_t>(t0)) + ".mirrorlab")).string();
    writeFileAtomically(r.file, f.bytes(), "TensorBoard event file");
    r.scalars = f.scalars();
    out.push_back(r);
  }
  return out;
}

}  // namespace ml
