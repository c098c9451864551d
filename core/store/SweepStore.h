// Sweeps in the run store: a sweep record (its grid, options, project, target and status) and one
// row per grid point (its values, status and the run that trained it). The runs of a sweep are
// ordinary runs, also tagged "sweep:<id>"; what a point achieved is read from its run.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store/RunStore.h"

namespace ml {

struct SweepPointRow {
  int point = 0;                   // 0-based index in the grid's order
  int64_t batchSize = 0;           // global batch
  double lr = 0;                   // base learning rate (before the scaling rule)
  std::string devices;             // "cpu:2"
  std::string lrScaling;           // none | linear | sqrt
  std::string status = "pending";  // pending | running | finished | cancelled | diverged | failed | interrupted
  std::optional<int64_t> runId;
  std::string message;
};

struct SweepRecord {
  int64_t id = 0;
  std::string name;
  double created = 0;  // unix time
  // running | finished | cancelled | failed | interrupted (its process ended while running:
  // resumable, as cancelled is)
  std::string status;
  std::optional<double> target;  // validation metric to reach
  std::string gridJson, optionsJson, projectJson;
  std::vector<SweepPointRow> points;
  std::string host;  // of the process that runs (or last ran) it; "" before it ran
  int64_t pid = 0, pidStart = 0;
  int finishedPoints() const;
};

// The tag carried by every run of sweep id.
std::string sweepTag(int64_t sweepId);

// Inserts the sweep and its points in one transaction; returns its id.
int64_t createSweep(RunStore& store, const SweepRecord& sweep);
// Throws UserError naming the id (and how to list sweeps) when there is none.
SweepRecord loadSweep(RunStore& store, int64_t sweepId);
// Every sweep, newest first, with its points.
std::vector<SweepRecord> listSweeps(RunStore& store);
// "running" also stores this process as the sweep's (host, pid): see RunStore::markInterruptedSweeps.
void setSweepStatus(RunStore& store, int64_t sweepId, const std::string& status);
// A point's new status, its run (tagged with the sweep when given) and a message.
void setPointState(RunStore& store, int64_t sweepId, int point, const std::string& status, std::optional<int64_t> runId,
                   const std::string& message = {});
// Deletes the sweep record (its runs stay).
void deleteSweep(RunStore& store, int64_t sweepId);

}  // namespace ml
