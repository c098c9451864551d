// Chrome trace export. Phase times are sums over a step's micro-batches, so the spans are laid
// out back to back from the replica's start in the mirrored step's order; their durations are
// exactly the measured phase times and the spans of one lane never overlap.
#include "learn/TraceExport.h"

#include <algorithm>
#include <fstream>
#include <limits>

#include "AtomicFile.h"
#include "Error.h"
#include "store/RunStore.h"

namespace ml {

using nlohmann::json;

json chromeTrace(const std::vector<StepEvent>& steps, const TraceOptions& options) {
  constexpr int kPid = 1;
  double t0 = std::numeric_limits<double>::infinity();
  int lanes = static_cast<int>(options.deviceNames.size());
  for (const auto& s : steps)
    for (const auto& r : s.replicas) {
      t0 = std::min(t0, r.start);
      lanes = std::max(lanes, r.replica + 1);
    }
  json events = json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", kPid}, {"tid", 0}, {"args", {{"name", options.processName}}}});
  for (int r = 0; r < lanes; ++r) {
    std::string name = "replica " + std::to_string(r);
    if (r < static_cast<int>(options.deviceNames.size()) && !options.deviceNames[static_cast<size_t>(r)].empty())
      name += " (" + options.deviceNames[static_cast<size_t>(r)] + ")";
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", kPid}, {"tid", r}, {"args", {{"name", name}}}});
    events.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", kPid}, {"tid", r}, {"args", {{"sort_index", r}}}});
  }
  for (const auto& s : steps) {
    for (const auto& r : s.replicas) {
      const double durations[8] = {r.phases.input,     r.phases.forward, r.phases.backward,  r.phases.wait,
                                   r.phases.allreduce, r.phases.network, r.phases.optimizer, r.phases.allgather};
      const char* cats[8] = {"input", "compute", "compute", "sync", "sync", "sync", "compute", "sync"};
      double ts = (r.start - t0) * 1e6;
      for (int k = 0; k < 8; ++k) {
        const double dur = durations[k] * 1e6;
        // Runs stored before the input was its own phase have none; only several workers cross the
        // network, only a sharded optimizer update all-gathers.
        if ((k == 0 || k == 5 || k == 7) && dur <= 0) continue;
        events.push_back({{"name", kTracePhases[k]},
                          {"cat", cats[k]},
                          {"ph", "X"},
                          {"ts", ts},
                          {"dur", dur},
                          {"pid", kPid},
                          {"tid", r.replica},
                          {"args", {{"step", s.step}, {"epoch", s.epoch}, {"replica", r.replica}, {"samples", r.samples}}}});
        ts += dur;
      }
    }
  }
  return json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

void writeChromeTrace(const std::vector<StepEvent>& steps, const std::string& path, const TraceOptions& options) {
  writeFileAtomically(path, chromeTrace(steps, options).dump() + "\n", "trace file");
}

TraceExportSummary exportRunTrace(RunStore& store, int64_t runId, const std::string& path, int64_t fromStep, int64_t toStep) {
  const RunDetail run = store.loadRun(runId);
  const auto steps = store.loadSteps(runId, fromStep, toStep);
  TraceExportSummary out;
  out.steps = steps.size();
  for (const auto& s : steps) out.spans += 5 * s.replicas.size();
  if (out.spans == 0)
    throw UserError("run " + std::to_string(runId) + " has no per-replica timings in steps " + std::to_string(fromStep) + ".." +
                    (toStep == INT64_MAX ? std::string("end") : std::to_string(toStep)));
  TraceOptions o;
  o.processName = "run " + std::to_string(runId) + ": " + run.summary.name;
  o.deviceNames = run.deviceNames;
  writeChromeTrace(steps, path, o);
  out.tracks = run.summary.replicas;
  return out;
}

}  // namespace ml
