// What each point of a stored sweep achieved, read from its run: the final validation metric,
// the time and training samples to the sweep's target, samples/s; the best point; and the same
// as a terminal table and a CSV file (one row per point). The CLI, the studio and the lesson
// read sweeps only through this, so they all show what the store holds.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "store/SweepStore.h"

namespace ml {

struct SweepPointResult {
  SweepPointRow point;
  int replicas = 1;
  std::optional<double> lr;  // after the scaling rule
  std::optional<double> finalValMetric, finalValLoss;
  std::optional<double> secondsToTarget;  // wall time since the run started
  std::optional<int64_t> samplesToTarget;
  std::optional<int> epochToTarget;
  std::optional<double> samplesPerSec;
  std::optional<double> seconds;  // the whole run
  std::optional<int64_t> steps;   // optimizer steps the run took
  int epochs = 0;                 // epochs run
  std::string runStatus;          // the run's own status ("" when no run)
};

struct SweepResults {
  SweepRecord sweep;
  std::vector<SweepPointResult> points;  // in grid order
  std::optional<size_t> best;            // index into points
  std::string bestReason;                // "fastest to 0.85" / "best final validation metric"
  std::string metric = "accuracy";       // the project's first metric
  bool higherIsBetter = true;
};

SweepResults loadSweepResults(RunStore& store, int64_t sweepId);
// The best point: with a target, the one that reached it in the least time; else (or when none
// reached it) the best final validation metric. Fills best and bestReason.
void chooseBest(SweepResults& r);
// A fixed-width table with the best point marked by '*', and a line naming it.
std::string formatSweepTable(const SweepResults& r);
// One row per point: grid columns, status, run id, results. Throws UserError when not writable.
void writeSweepCsv(const SweepResults& r, const std::string& path);
std::string sweepCsv(const SweepResults& r);

}  // namespace ml
