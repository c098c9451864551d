// The figures a run shows, computed in one place from what happened: throughput, elapsed time,
// the time per phase, the sync cost and its parts, speed-up and scaling efficiency against another
// run, and the "replicas x shard" sentence. The dashboard feeds it the live steps, the Runs and
// Learn screens the stored ones; both get the same numbers for the same run.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "store/RunStore.h"
#include "telemetry/Events.h"

namespace ml {

// Replica step time summed over replicas and steps. Every part is a share of the same whole (the
// sum of the parts), so a part never exceeds it.
struct PhaseTotals {
  PhaseTimes sum;            // seconds
  int64_t replicaSteps = 0;  // (replica, step) pairs summed
  void add(const ReplicaStep& r);
  void add(const ReplicaShare& r);
  double whole() const { return sum.total(); }
  double share(double part) const { return whole() > 0 ? part / whole() : 0; }
  // Means per replica and step, in seconds.
  PhaseTimes perReplicaStep() const;
  double wholePerReplicaStep() const { return replicaSteps > 0 ? whole() / static_cast<double>(replicaSteps) : 0; }
};

// What synchronising cost a replica per step, in seconds: the all-reduce not hidden behind
// backward, waiting for the slowest replica, the cross-worker hop and the sharded optimizer's
// all-gather, beside the whole replica step they are parts of.
struct SyncCost {
  double allreduce = 0, wait = 0, network = 0, allgather = 0;
  double whole = 0;
  double parts() const { return allreduce + wait + network + allgather; }
  double share() const { return whole > 0 ? parts() / whole : 0; }
};

struct RunFigures {
  int replicas = 1;
  int threadsPerReplica = 1;  // one replica's threads (its team); several replicas: 1 each
  int hostCores = 0;          // the machine's logical cores (0: unknown)
  int64_t steps = 0;
  int64_t samples = 0;
  double stepSeconds = 0;     // the steps' wall times summed: training, without validation or pauses
  double elapsedSeconds = 0;  // the run's clock at its end, else at its last step (paused time excluded)
  bool ended = false;
  PhaseTotals phases;

  void addStep(const StepEvent& e);
  void finish(const RunFinished& f);
  // Samples a second of step time: what the devices did, not what validation and checkpoints cost.
  double samplesPerSec() const { return stepSeconds > 0 ? static_cast<double>(samples) / stepSeconds : 0; }
  double secondsPerStep() const { return steps > 0 ? stepSeconds / static_cast<double>(steps) : 0; }
  SyncCost sync() const;
  // The cores the run's compute could use: its replicas' threads, at most the machine's cores.
  int coresUsed() const;
};

// The figures of a run started with these settings (RunStarted: replicas; its configuration's
// threads_per_device; the host's cores).
RunFigures figuresFor(const RunStarted& started, int hostCores);
// A stored run: its steps (RunStore::loadCurves: samples and step times, no per-replica timings
// needed), its per-replica phase totals and its end.
RunFigures figuresOf(const RunDetail& run, const std::vector<StepEvent>& curves);

// "3 replicas × 21-22 = 64 samples per step": shards differ by at most one sample (DESIGN.md);
// with accumulation, "2 micro-batches of 32 per step, 3 replicas × 10-11 each = 64 samples per step".
std::string shardSentence(int replicas, int64_t globalBatch, int accumulate = 1);

// Speed-up of a run against a baseline, from their samples per second of step time, and scaling
// efficiency (speed-up / replica ratio). bound: the speed-up the cores allow (cores used by the run
// over the baseline's); a speed-up above it cannot come from more compute, and note says why it
// happened instead of letting the figure stand alone.
struct Scaling {
  double speedup = 0;
  double efficiency = 0;
  double replicaRatio = 1;
  double bound = 0;  // 0: unknown (a run without its cores)
  std::string note;  // "" unless the speed-up exceeds the bound
};
Scaling scalingVs(const RunFigures& baseline, const RunFigures& run);

}  // namespace ml
