// A run's per-device timeline as a Chrome trace (Trace Event Format), which Perfetto and
// chrome://tracing open: one track (tid) per replica, five spans per replica per step.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "telemetry/Events.h"

namespace ml {

struct TraceOptions {
  std::string processName = "Mirrorlab run";  // the process track's title ("run 12: Spirals")
  std::vector<std::string> deviceNames;       // one per replica ("cpu:0 (simulated)"); optional
};

// The span names, in the order a replica lives through them within one step: backward ends,
// then the replica waits for the slowest one, then its exposed all-reduce, then (several workers)
// the all-reduce's cross-worker hop over the network, then the update, then (sharded optimizer)
// the all-gather. The network and all-gather spans appear only where they took time.
inline constexpr const char* kTracePhases[8] = {"input",      "forward", "backward",  "wait",
                                                "all-reduce", "network", "optimizer", "all-gather"};

// {"traceEvents": [...], "displayTimeUnit": "ms"}. ts and dur are microseconds; ts counts from
// the earliest replica start among the steps. Each span carries args {step, epoch, replica,
// samples}. Steps without per-replica timings add nothing.
nlohmann::json chromeTrace(const std::vector<StepEvent>& steps, const TraceOptions& options = {});

// Writes chromeTrace() to path; throws UserError naming the file when it cannot be written.
void writeChromeTrace(const std::vector<StepEvent>& steps, const std::string& path, const TraceOptions& options = {});

class RunStore;
struct TraceExportSummary {
  size_t steps = 0, spans = 0;
  int tracks = 0;
};
// A stored run's steps fromStep..toStep as a trace file, one track per device (named after the
// run's devices). Throws UserError when the run has no per-replica timings in that range.
TraceExportSummary exportRunTrace(RunStore& store, int64_t runId, const std::string& path, int64_t fromStep = 1,
                                  int64_t toStep = INT64_MAX);

}  // namespace ml
