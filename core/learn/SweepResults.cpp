// Sweep results from the store: every figure comes from the point's stored run.
#include "learn/SweepResults.h"

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "Error.h"
#include "Format.h"
#include "store/RunCompare.h"
#include "store/RunFigures.h"

namespace ml {

SweepResults loadSweepResults(RunStore& store, int64_t sweepId) {
  SweepResults r;
  r.sweep = loadSweep(store, sweepId);
  auto pj = nlohmann::json::parse(r.sweep.projectJson, nullptr, false);
  if (pj.is_object() && pj.contains("training") && pj["training"].contains("metrics") && pj["training"]["metrics"].is_array() &&
      !pj["training"]["metrics"].empty())
    r.metric = pj["training"]["metrics"][0].get<std::string>();
  bool directionKnown = false;
  for (const auto& pt : r.sweep.points) {
    SweepPointResult res;
    res.point = pt;
    // A cancelled or failed point's run stopped part-way: its figures would not compare.
    if (pt.runId && pt.status == "finished") {
      const RunDetail d = store.loadRun(*pt.runId);
      if (!directionKnown) {
        r.higherIsBetter = metricHigherIsBetter(d.configJson);
        directionKnown = true;
      }
      res.replicas = d.summary.replicas;
      res.lr = d.summary.lr;
      res.finalValMetric = d.summary.finalValMetric;
      res.finalValLoss = d.summary.finalValLoss;
      res.seconds = d.seconds;
      res.steps = d.steps;
      res.epochs = d.summary.epochsDone;
      res.runStatus = d.summary.status;
      const RunFigures f = figuresOf(d, store.loadCurves(*pt.runId));
      if (f.samplesPerSec() > 0) res.samplesPerSec = f.samplesPerSec();
      if (r.sweep.target)
        if (auto hit = reachTarget(store, d, *r.sweep.target)) {
          res.secondsToTarget = hit->seconds;
          res.samplesToTarget = hit->samples;
          res.epochToTarget = hit->epoch;
        }
    }
    r.points.push_back(std::move(res));
  }
  chooseBest(r);
  return r;
}

void chooseBest(SweepResults& r) {
  r.best.reset();
  r.bestReason.clear();
  auto better = [&](double a, double b) { return r.higherIsBetter ? a > b : a < b; };
  for (size_t i = 0; i < r.points.size(); ++i) {
    const auto& p = r.points[i];
    if (p.point.status != "finished" || !p.secondsToTarget) continue;
    if (!r.best || *p.secondsToTarget < *r.points[*r.best].secondsToTarget) r.best = i;
  }
  if (r.best) {
    r.bestReason = "fastest to " + r.metric + " " + formatNumber("%g", *r.sweep.target);
    return;
  }
  for (size_t i = 0; i < r.points.size(); ++i) {
    const auto& p = r.points[i];
    if (p.point.status != "finished" || !p.finalValMetric) continue;
    if (!r.best || better(*p.finalValMetric, *r.points[*r.best].finalValMetric)) r.best = i;
  }
  if (r.best)
    r.bestReason = std::string(r.sweep.target ? "no point reached the target; " : "") + "best final validation " + r.metric;
}

namespace {

std::string opt(const std::optional<double>& v, const char* fmt) { return v ? formatNumber(fmt, *v) : "-"; }

}  // namespace

std::string formatSweepTable(const SweepResults& r) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "  %3s %-10s %-7s %7s %9s %10s %12s %10s %12s %11s  %s\n", "#", "devices", "scaling", "batch",
                "lr", "status", ("val " + r.metric.substr(0, 8)).c_str(), "s to tgt", "samples>tgt", "samples/s", "run");
  out += line;
  for (size_t i = 0; i < r.points.size(); ++i) {
    const auto& p = r.points[i];
    std::snprintf(line, sizeof line, "%c %3d %-10s %-7s %7lld %9s %10s %12s %10s %12s %11s  %s\n", r.best == i ? '*' : ' ',
                  p.point.point + 1, p.point.devices.c_str(), p.point.lrScaling.c_str(),
                  static_cast<long long>(p.point.batchSize), formatNumber("%g", p.point.lr).c_str(), p.point.status.c_str(),
                  opt(p.finalValMetric, "%.4f").c_str(), opt(p.secondsToTarget, "%.2f").c_str(),
                  p.samplesToTarget ? std::to_string(*p.samplesToTarget).c_str() : "-", opt(p.samplesPerSec, "%.0f").c_str(),
                  p.point.runId ? std::to_string(*p.point.runId).c_str() : "-");
    out += line;
  }
  if (r.best) {
    const auto& b = r.points[*r.best];
    out += "* best: #" + std::to_string(b.point.point + 1) + " (batch " + std::to_string(b.point.batchSize) + ", lr " +
           formatNumber("%g", b.point.lr) + ", " + b.point.devices + ", " + b.point.lrScaling + " scaling) — " + r.bestReason +
           "\n";
  } else {
    out += "no point has finished with a validation metric yet\n";
  }
  return out;
}

std::string sweepCsv(const SweepResults& r) {
  std::string out =
      "sweep_id,point,devices,replicas,lr_scaling,batch_size,base_lr,lr,status,run_id,epochs,final_val_metric,final_val_loss,"
      "target,seconds_to_target,samples_to_target,epoch_to_target,samples_per_sec,seconds,best\n";
  auto num = [](const std::optional<double>& v) { return v ? formatNumber("%.10g", *v) : std::string(); };
  for (size_t i = 0; i < r.points.size(); ++i) {
    const auto& p = r.points[i];
    // Device specs such as gpu:0,1 hold commas: quote that field.
    out += std::to_string(r.sweep.id) + "," + std::to_string(p.point.point + 1) + ",\"" + p.point.devices + "\"," +
           std::to_string(p.replicas) + "," + p.point.lrScaling + "," + std::to_string(p.point.batchSize) + "," +
           formatNumber("%.10g", p.point.lr) + "," + num(p.lr) + "," + p.point.status + "," +
           (p.point.runId ? std::to_string(*p.point.runId) : "") + "," + std::to_string(p.epochs) + "," + num(p.finalValMetric) +
           "," + num(p.finalValLoss) + "," + num(r.sweep.target) + "," + num(p.secondsToTarget) + "," +
           (p.samplesToTarget ? std::to_string(*p.samplesToTarget) : "") + "," +
           (p.epochToTarget ? std::to_string(*p.epochToTarget) : "") + "," + num(p.samplesPerSec) + "," + num(p.seconds) + "," +
           (r.best == i ? "1" : "0") + "\n";
  }
  return out;
}

void writeSweepCsv(const SweepResults& r, const std::string& path) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw UserError("cannot write the sweep CSV " + path + ": choose a writable file");
  f << sweepCsv(r);
  if (!f.flush()) throw UserError("cannot write the sweep CSV " + path + " (disk full?): choose another file");
}

}  // namespace ml
