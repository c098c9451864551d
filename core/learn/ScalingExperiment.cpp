// The scaling experiment: one real Trainer run per device count over one loaded data set.
#include "learn/ScalingExperiment.h"
#include "Format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <thread>

#include "Error.h"
#include "backend/DeviceList.h"
#include "store/RunFigures.h"
#include "store/RunStore.h"

namespace ml {

BatchPolicy parseBatchPolicy(const std::string& s) {
  if (s == "global") return BatchPolicy::KeepGlobal;
  if (s == "per-device") return BatchPolicy::KeepPerDevice;
  throw UserError("batch policy '" + s +
                  "' is not one of: global (every row trains the same global batch), "
                  "per-device (every replica keeps the first row's per-replica batch)");
}

const char* toString(BatchPolicy p) { return p == BatchPolicy::KeepGlobal ? "global" : "per-device"; }

ScalingExperiment::ScalingExperiment(Project base, std::shared_ptr<const DataSplit> data, ScalingOptions options)
    : base_(std::move(base)), data_(std::move(data)), options_(std::move(options)) {
  if (options_.steps < 1)
    throw UserError("the scaling experiment needs at least 1 step per device count, got " + std::to_string(options_.steps));
  const auto sweep = parseDeviceSweep(options_.devices);
  // The first row fixes the batch: its global batch is kept, or its per-replica batch.
  const int firstN = sweep.front().size();
  const int64_t firstGlobal = base_.training.perDeviceBatch ? base_.training.batchSize * firstN : base_.training.batchSize;
  const int64_t perDevice = std::max<int64_t>(1, firstGlobal / firstN);
  const int64_t trainSamples = data_->train.size;
  for (const auto& dl : sweep) {
    Project p = base_;
    p.distribute.devices = dl;
    p.training.perDeviceBatch = false;
    p.training.batchSize = options_.keep == BatchPolicy::KeepGlobal ? firstGlobal : perDevice * dl.size();
    const int64_t perEpoch = std::max<int64_t>(1, trainSamples / std::max<int64_t>(1, p.training.batchSize));
    p.training.epochs = static_cast<int>(std::max<int64_t>(1, (options_.steps + perEpoch - 1) / perEpoch));
    planRun(p, dl.size(), trainSamples);  // a batch the data cannot hold fails here, before any run
    projects_.push_back(std::move(p));
  }
  if (!options_.storePath.empty()) RunStore::open(options_.storePath);  // a bad store fails now, not mid-sweep
}

void ScalingExperiment::requestCancel() { runs_.requestCancel(); }

ScalingRow scalingRowFromSteps(const std::string& devices, const RunPlan& plan, const std::vector<StepEvent>& steps) {
  ScalingRow row;
  row.devices = devices;
  row.replicas = plan.replicas;
  row.globalBatch = plan.globalBatch;
  row.perReplicaBatch = plan.perReplicaBatch;
  row.steps = static_cast<int64_t>(steps.size());
  std::vector<double> times;
  double ar = 0, wait = 0, all = 0;
  const size_t skip = std::min<size_t>(steps.size() / 10, 10);
  for (size_t i = skip; i < steps.size(); ++i) {
    times.push_back(steps[i].stepTime);
    for (const auto& r : steps[i].replicas) {
      ar += r.phases.allreduce;
      wait += r.phases.wait;
      all += r.phases.total();
    }
  }
  if (!times.empty()) {
    std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2), times.end());
    row.stepSeconds = times[times.size() / 2];
  }
  row.samplesPerSecond = row.stepSeconds > 0 ? static_cast<double>(plan.globalBatch) / row.stepSeconds : 0;
  row.allreduceShare = all > 0 ? ar / all : 0;
  row.waitShare = all > 0 ? wait / all : 0;
  row.syncShare = row.allreduceShare + row.waitShare;
  return row;
}

// Through store/RunFigures' scalingVs, as every speed-up the studio shows: a row is one global
// batch in its median step.
void computeSpeedups(std::vector<ScalingRow>& rows) {
  if (rows.empty()) return;
  auto figures = [](const ScalingRow& r) {
    RunFigures f;
    f.replicas = r.replicas;
    f.threadsPerReplica = r.threadsPerReplica;
    f.hostCores = r.hostCores;
    f.steps = 1;
    f.samples = r.samplesPerSecond > 0 ? std::max<int64_t>(1, r.globalBatch) : 0;
    f.stepSeconds = r.samplesPerSecond > 0 ? static_cast<double>(f.samples) / r.samplesPerSecond : 0;
    return f;
  };
  const RunFigures ref = figures(rows.front());
  for (auto& r : rows) {
    const Scaling s = scalingVs(ref, figures(r));
    r.speedup = s.speedup;
    r.efficiency = s.efficiency;
    r.note = s.note;
  }
}

std::string explainScaling(const std::vector<ScalingRow>& rows, BatchPolicy keep, int hostCores) {
  if (rows.size() < 2)
    return rows.empty() ? "No device count has finished yet." : "Only one device count has run: there is nothing to compare yet.";
  const ScalingRow& a = rows.front();
  const ScalingRow& b = rows.back();
  const double ideal = static_cast<double>(b.replicas) / a.replicas;
  std::string s = std::to_string(b.replicas) + " devices ran " + formatNumber("%.2f", b.speedup) + "x as fast as " +
                  std::to_string(a.replicas) + (a.replicas == 1 ? " device" : " devices") + " (ideal " +
                  formatNumber("%.0f", ideal) + "x, efficiency " + formatNumber("%.0f", 100 * b.efficiency) + "%). ";
  if (b.speedup < 1.0)
    s += "More devices were slower: ";
  else if (b.efficiency >= 0.9)
    s += "That is close to linear: ";
  else
    s += "The gap to the ideal line: ";
  const double grew = b.syncShare - a.syncShare;
  if (b.efficiency >= 0.9) {
    s += "compute dominates and synchronisation took only " + formatNumber("%.0f", 100 * b.syncShare) + "% of the step.";
  } else if (grew > 0.02) {
    s += "synchronisation (all-reduce plus waiting for the slowest replica) grew from " +
         formatNumber("%.0f", 100 * a.syncShare) + "% to " + formatNumber("%.0f", 100 * b.syncShare) +
         "% of the step; the all-reduce moves the whole gradient every step "
         "whatever the number of devices, while each device's share of the arithmetic shrinks.";
  } else {
    s += "the compute per device did not shrink as fast as the shard did (small shards use the cores less well, and "
         "the optimizer update is the same on every replica).";
  }
  if (!b.note.empty()) s += " Note: " + b.note + ".";
  if (hostCores > 0 && b.replicas > hostCores)
    s += " This machine has " + std::to_string(hostCores) + (hostCores == 1 ? " core" : " cores") + ", so " +
         std::to_string(b.replicas) + " simulated devices share them: beyond " + std::to_string(hostCores) +
         " devices the compute cannot get faster at all.";
  if (keep == BatchPolicy::KeepPerDevice)
    s += " The per-device batch was kept, so the global batch grew with the devices (weak scaling): samples/s is the fair "
         "measure.";
  return s;
}

ScalingResult ScalingExperiment::run() {
  struct CloseHub {
    TelemetryHub& hub;
    ~CloseHub() { hub.closeAll(); }
  } closeHub{hub_};
  ScalingResult out;
  auto collect = hub_.subscribe(size_t{1} << 20);
  const std::string prefix = options_.runNamePrefix.empty() ? base_.name + " scale" : options_.runNamePrefix;
  std::vector<Event> events;
  for (size_t i = 0; i < projects_.size(); ++i) {
    const Project& p = projects_[i];
    if (runs_.cancelled()) {
      out.message = "cancelled before " + p.distribute.devices.spec;
      break;
    }
    RecordedRunOptions ro;
    ro.trainer.maxSteps = options_.steps;
    ro.trainer.runName = prefix + " " + p.distribute.devices.spec;
    ro.storePath = options_.storePath;
    ro.hub = &hub_;  // one watcher follows every row
    RecordedRun run(p, data_, std::move(ro));
    if (onRowStarted) onRowStarted(i, p, run.plan());
    const RecordedRun::Result result = runs_.run(run);
    const RunFinished& fin = result.finished;
    std::vector<StepEvent> steps;
    events.clear();
    collect->drain(events);
    for (auto& e : events)
      if (auto* s = std::get_if<StepEvent>(&e)) steps.push_back(std::move(*s));
    if (fin.status != RunStatus::Finished) {
      out.message =
          p.distribute.devices.spec + " ended " + toString(fin.status) + (fin.message.empty() ? "" : ": " + fin.message);
      break;
    }
    ScalingRow row = scalingRowFromSteps(p.distribute.devices.spec, run.plan(), steps);
    row.runId = result.runId;
    row.threadsPerReplica = run.trainer().strategy().blasThreads();
    row.hostCores = static_cast<int>(std::thread::hardware_concurrency());
    out.rows.push_back(row);
    computeSpeedups(out.rows);
    if (onRowFinished) onRowFinished(i, out.rows.back());
  }
  out.completed = out.message.empty() && out.rows.size() == projects_.size();
  computeSpeedups(out.rows);
  out.explanation = explainScaling(out.rows, options_.keep, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  return out;
}

}  // namespace ml
