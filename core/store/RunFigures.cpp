// Run figures from steps: one arithmetic for the live dashboard and for stored runs.
#include "store/RunFigures.h"

#include <algorithm>

#include "Format.h"
#include "JsonFile.h"

namespace ml {

namespace {

void addPhases(PhaseTimes& to, const PhaseTimes& p) {
  to.input += p.input;
  to.forward += p.forward;
  to.backward += p.backward;
  to.allreduce += p.allreduce;
  to.wait += p.wait;
  to.optimizer += p.optimizer;
  to.allgather += p.allgather;
  to.network += p.network;
}

// threads_per_device of a run's configuration (RunDescription): one replica's threads.
int threadsOf(const std::string& configJson, int replicas) {
  if (replicas != 1) return 1;
  const auto j = parseJsonOrDiscarded(configJson);
  return j.is_object() && j.contains("threads_per_device") && j["threads_per_device"].is_number_integer()
             ? std::max(1, j["threads_per_device"].get<int>())
             : 1;
}

}  // namespace

void PhaseTotals::add(const ReplicaStep& r) {
  addPhases(sum, r.phases);
  ++replicaSteps;
}

void PhaseTotals::add(const ReplicaShare& r) {
  addPhases(sum, r.total);
  replicaSteps += r.steps;
}

PhaseTimes PhaseTotals::perReplicaStep() const {
  PhaseTimes p;
  if (replicaSteps == 0) return p;
  const double n = static_cast<double>(replicaSteps);
  p.input = sum.input / n;
  p.forward = sum.forward / n;
  p.backward = sum.backward / n;
  p.allreduce = sum.allreduce / n;
  p.wait = sum.wait / n;
  p.optimizer = sum.optimizer / n;
  p.allgather = sum.allgather / n;
  p.network = sum.network / n;
  return p;
}

void RunFigures::addStep(const StepEvent& e) {
  ++steps;
  samples += e.samples;
  stepSeconds += e.stepTime;
  if (!ended) elapsedSeconds = std::max(elapsedSeconds, e.wallTime);
  for (const ReplicaStep& r : e.replicas) phases.add(r);
}

void RunFigures::finish(const RunFinished& f) {
  elapsedSeconds = f.seconds;
  ended = true;
}

SyncCost RunFigures::sync() const {
  const PhaseTimes p = phases.perReplicaStep();
  return {p.allreduce, p.wait, p.network, p.allgather, phases.wholePerReplicaStep()};
}

int RunFigures::coresUsed() const {
  const int wanted = std::max(1, replicas) * std::max(1, threadsPerReplica);
  return hostCores > 0 ? std::min(wanted, hostCores) : wanted;
}

RunFigures figuresFor(const RunStarted& started, int hostCores) {
  RunFigures f;
  f.replicas = std::max(1, started.replicas);
  f.threadsPerReplica = threadsOf(started.configJson, f.replicas);
  f.hostCores = hostCores;
  return f;
}

RunFigures figuresOf(const RunDetail& run, const std::vector<StepEvent>& curves) {
  RunFigures f;
  f.replicas = std::max(1, run.summary.replicas);
  f.threadsPerReplica = threadsOf(run.configJson, f.replicas);
  const auto host = parseJsonOrDiscarded(run.hostJson);
  if (host.is_object() && host.contains("logical_cores") && host["logical_cores"].is_number_integer())
    f.hostCores = host["logical_cores"].get<int>();
  for (const StepEvent& e : curves) {
    ++f.steps;
    f.samples += e.samples;
    f.stepSeconds += e.stepTime;
    f.elapsedSeconds = std::max(f.elapsedSeconds, e.wallTime);
  }
  for (const ReplicaShare& r : run.replicas) f.phases.add(r);
  if (run.seconds) {
    f.elapsedSeconds = *run.seconds;
    f.ended = true;
  }
  return f;
}

std::string shardSentence(int replicas, int64_t globalBatch, int accumulate) {
  replicas = std::max(1, replicas);
  accumulate = std::max(1, accumulate);
  const int64_t micro = globalBatch / accumulate;
  const int64_t small = micro / replicas, large = (micro + replicas - 1) / replicas;
  const std::string shard = small == large ? std::to_string(small) : std::to_string(small) + "-" + std::to_string(large);
  const std::string copies = std::to_string(replicas) + (replicas == 1 ? " replica" : " replicas") + " × " + shard;
  if (accumulate == 1) return copies + " = " + std::to_string(globalBatch) + " samples per step";
  return std::to_string(accumulate) + " micro-batches of " + std::to_string(micro) + " per step, " + copies +
         " each = " + std::to_string(globalBatch) + " samples per step";
}

Scaling scalingVs(const RunFigures& base, const RunFigures& run) {
  Scaling s;
  if (base.samplesPerSec() > 0) s.speedup = run.samplesPerSec() / base.samplesPerSec();
  s.replicaRatio = static_cast<double>(run.replicas) / std::max(1, base.replicas);
  s.efficiency = s.speedup / s.replicaRatio;
  if (base.hostCores <= 0 || run.hostCores <= 0) return s;
  s.bound = static_cast<double>(run.coresUsed()) / base.coresUsed();
  if (s.speedup > s.bound * 1.05)  // 5%: a step's time on a shared machine varies by more
    s.note = formatNumber("%.2f", s.speedup) + "x is more than the cores allow (" + std::to_string(run.coresUsed()) +
             (run.coresUsed() == 1 ? " core" : " cores") + " against " + std::to_string(base.coresUsed()) + ", at most " +
             formatNumber("%.2f", s.bound) +
             "x): the baseline's steps took longer than its arithmetic (a step too small for its threads, a busy "
             "machine), or the smaller shards fit the caches better";
  return s;
}

}  // namespace ml
