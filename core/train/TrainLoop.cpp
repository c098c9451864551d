// Trainer::run and its parts: a short loop over the schedule, the stop votes, the step and its
// event, utilization samples, checkpoints, the kill fault, and the epoch's end (sync check,
// validation, early stopping). A part that ends the run returns how; finish() publishes it.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <span>

#include "distribute/Workers.h"
#include "train/Trainer.h"
#include "train/Watchdog.h"

namespace ml {

namespace {

int64_t steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

RunFinished ending(RunStatus status, std::string message) {
  RunFinished f;
  f.status = status;
  f.message = std::move(message);
  return f;
}

}  // namespace

// What one run() keeps between its parts: where it is, as a checkpoint stores it (the step, the
// epoch and its running sums, the validation and early-stopping state), and what this process
// alone needs (the epoch's shuffle, the utilization window, the watchdog).
struct Trainer::Loop {
  TrainPosition at;
  int64_t totalSteps = 0;
  int epochs = 0;
  std::vector<int64_t> order;  // this epoch's shuffle
  double warmupSteps = 0;
  int64_t memBytes = 0;             // a replica's parameters and activations (the computed samples)
  std::vector<double> utilCompute;  // per replica of every worker: compute seconds since the last sample
  double utilWall = 0, lastSample = 0;
  bool stopAgreed = false;  // several workers: a stop vote was counted, every worker stops now
  std::optional<Watchdog> watchdog;
};

// One optimizer step as the strategy returned it, with the rate it used and when it ran.
struct Trainer::Stepped {
  StepResult r;
  double lr = 0, start = 0, end = 0;
};

RunFinished Trainer::run() {
  Loop L;
  startRun(L);
  try {
    for (; L.at.epoch <= L.epochs; nextEpoch(L)) {
      beginEpoch(L);
      while (L.at.stepInEpoch < plan_.stepsPerEpoch && L.at.step < L.totalSteps) {
        if (auto end = stopVotes(L)) return finish(L, std::move(*end));
        Stepped st = step(L);
        if (L.watchdog && L.watchdog->fired()) continue;  // the stop votes end the run with the diagnosis
        if (!st.r.finite) return finish(L, diverged(L, st.r));
        publishStep(L, st);
        sampleUtilization(L, st.end);
        // The next step starts once the store holds this one: a write that fails stops the run
        // with the step whose row failed (the recorder's abort), not a commit interval of steps
        // later. It costs a small model a commit per step (bench/RESULTS.md).
        if (options_.record) options_.record->awaitStep(L.at.step);
        checkpointAfterStep(L);
        killFault(L.at.step);
      }
      if (auto end = endEpoch(L)) return finish(L, std::move(*end));
    }
  } catch (const std::exception& e) {
    return finish(L, ending(RunStatus::Failed, e.what()));
  }
  if (L.watchdog && L.watchdog->fired())
    return finish(L,
                  ending(RunStatus::Failed, abortReason() + " (training stopped after step " + std::to_string(L.at.step) + ")"));
  return finish(L, ending(RunStatus::Finished, ""));
}

// The clock (a resumed run's goes on), RunStarted, the run's id, the GPU sampler and the watchdog.
void Trainer::startRun(Loop& L) {
  L.at = options_.resume ? options_.resume->at : TrainPosition{};
  t0_ = steadyNs() - static_cast<int64_t>(L.at.wall * 1e9);
  const int64_t spe = plan_.stepsPerEpoch, all = spe * project_.training.epochs;
  L.totalSteps = options_.maxSteps > 0 ? std::min<int64_t>(options_.maxSteps, all) : all;
  L.epochs = static_cast<int>((L.totalSteps + spe - 1) / spe);
  hub_.publish(startedEvent(L));
  // The run is in the store before its first step: a process killed at any step later leaves a
  // run that the next opening marks interrupted, never no run at all (the recorder commits on its
  // own thread, which a loaded machine may not schedule before a small model's first steps).
  if (!runId_ && options_.record) runId_ = options_.record->awaitRunId();
  startGpuTelemetry();

  MirroredStrategy& s = *strategy_;
  L.warmupSteps = plan_.warmupEpochs * static_cast<double>(spe);
  L.memBytes = s.model(0).paramCount() * 4 * 2 + s.model(0).activationBytes(plan_.perReplicaBatch);
  L.utilCompute.assign(static_cast<size_t>(s.globalReplicas()), 0.0);
  L.lastSample = L.at.wall;
  if (!options_.watchdog) return;
  WatchdogOptions wo;
  wo.hangSeconds = project_.distribute.hangSeconds;
  wo.stragglerFactor = project_.distribute.stragglerFactor;
  L.watchdog.emplace(s, wo, [this](const std::string& why) {
    hangNs_.store(steadyNs());
    abort(why);
    strategy_->releaseFaults();  // an injected hang lets go, so the stuck step ends and run() returns
  });
}

RunStarted Trainer::startedEvent(const Loop& L) const {
  const MirroredStrategy& s = *strategy_;
  const int n = s.globalReplicas();  // every worker's replicas: each step's timings hold them all
  RunStarted started;
  started.runName = options_.runName.empty() ? project_.name : options_.runName;
  started.projectJson = project_.toJson().dump();
  started.configJson = effectiveConfig().dump();
  for (int g = 0; g < n; ++g) {
    const auto& d = s.options().devices.devices[static_cast<size_t>(g % s.replicas())];
    started.devices.push_back(s.replicaLabel(g) +
                              (d.kind == DeviceKind::Cpu ? " (simulated)" : " " + s.deviceName(g % s.replicas())));
  }
  started.replicas = n;
  started.workers = s.workerCount();
  if (s.workers()) started.hosts = s.workers()->hosts();
  started.globalBatch = plan_.globalBatch;
  started.perReplicaBatch = plan_.perReplicaBatch;
  started.baseLr = plan_.baseLr;
  started.lr = plan_.lr;
  started.epochs = L.epochs;
  started.stepsPerEpoch = plan_.stepsPerEpoch;
  started.totalSteps = L.totalSteps;
  for (const auto& l : startLines()) started.description += l + "\n";
  started.telemetry = telemetryLine_;
  if (!s.faults().empty()) started.tags.push_back("fault injected");
  if (options_.resume) {
    started.resumeRun = options_.resume->runId;
    started.resumeStep = L.at.step;
    started.resumeEpochsDone = L.at.epoch - 1;
    started.resumeWall = L.at.wall;
  }
  return started;
}

// The epoch's shuffle, keyed by (seed, epoch); a resumed epoch keeps its start time and sums.
void Trainer::beginEpoch(Loop& L) {
  L.order = epochOrder(data_->train.size, project_.training.seed, L.at.epoch);
  if (L.at.stepInEpoch == 0) L.at.epochStart = wall();
}

void Trainer::nextEpoch(Loop& L) {
  TrainPosition& at = L.at;
  ++at.epoch;
  at.stepInEpoch = 0;
  at.lossSum = at.metricSum = at.arTime = at.waitTime = at.allTime = 0;
  at.samples = 0;
}

// Before each step: a pause holds here, and a cancel or an abort ends the run. Several workers
// stop together: a cancel here is a vote, counted at the next step's exchange, after which every
// worker ends at the same step (a worker that left alone would leave the others waiting in the
// all-reduce). Pausing is not offered across workers.
std::optional<RunFinished> Trainer::stopVotes(Loop& L) {
  MirroredStrategy& s = *strategy_;
  if (paused_.load() && !s.workers()) waitWhilePaused();
  if (cancel_.load() && s.workers() && !L.stopAgreed) s.requestStop();
  if (!cancel_.load() || (s.workers() && !L.stopAgreed)) return std::nullopt;
  std::string reason = abortReason();
  const std::string after = std::to_string(L.at.step);
  // Every worker stops here after the same votes: one that voted because it failed (its watchdog,
  // say) gives every worker its reason, with its name and host.
  if (WorkerGroup* w = s.workers()) {
    const auto why = w->allGather(reason, "the reasons for stopping");
    for (size_t k = 0; k < why.size() && reason.empty(); ++k)
      if (!why[k].empty()) reason = workerOnHost(*w, static_cast<int>(k)) + ": " + why[k];
  }
  if (!reason.empty()) return ending(RunStatus::Failed, reason + " (training stopped after step " + after + ")");
  return ending(RunStatus::Cancelled, "cancelled at step " + after);
}

// The schedule: the scaled rate, ramped up from the base rate over the warm-up steps, times the
// decay factor once for every decay epoch already finished.
double Trainer::scheduledLr(const Loop& L) const {
  double lr = plan_.lr;
  const double done = static_cast<double>(L.at.step);
  if (L.warmupSteps > 0 && done < L.warmupSteps) lr = plan_.baseLr + (plan_.lr - plan_.baseLr) * done / L.warmupSteps;
  for (const int64_t after : project_.training.lrDecayEpochs)
    if (L.at.epoch - 1 >= after) lr *= project_.training.lrDecayFactor;
  return lr;
}

// The mirrored step on the epoch's next global batch.
Trainer::Stepped Trainer::step(Loop& L) {
  const Dataset& train = data_->train;
  const int64_t lo = L.at.stepInEpoch * plan_.globalBatch, hi = std::min<int64_t>(lo + plan_.globalBatch, train.size);
  Stepped st;
  st.lr = scheduledLr(L);
  st.start = wall();
  ++L.at.step;
  st.r = strategy_->trainStep(train,
                              std::span<const int64_t>(L.order).subspan(static_cast<size_t>(lo), static_cast<size_t>(hi - lo)),
                              project_.training.accumulate, static_cast<float>(st.lr), static_cast<uint64_t>(L.at.step));
  st.end = wall();
  ++L.at.stepInEpoch;
  if (st.r.stopVotes > 0) {  // every worker sees the same votes after the same step
    L.stopAgreed = true;
    cancel_.store(true);
  }
  return st;
}

RunFinished Trainer::diverged(const Loop& L, const StepResult& r) const {
  const MirroredStrategy& s = *strategy_;
  return ending(RunStatus::Diverged,
                "non-finite " + r.badWhat + " at step " + std::to_string(L.at.step) + " (epoch " + std::to_string(L.at.epoch) +
                    ") on replica " + std::to_string(r.badReplica) + " (" + s.replicaLabel(r.badReplica) + ")" +
                    (r.skipped ? " even at loss scale 1" : "") +
                    (s.faults().nanStep == L.at.step ? " (an injected nan fault)" : ": lower the learning rate"));
}

// The step's event, every replica's phases on the run's clock, and the epoch's running sums.
void Trainer::publishStep(Loop& L, Stepped& st) {
  StepResult& r = st.r;
  TrainPosition& at = L.at;
  StepEvent ev;
  ev.step = at.step;
  ev.epoch = at.epoch;
  ev.stepInEpoch = at.stepInEpoch;
  ev.stepsPerEpoch = plan_.stepsPerEpoch;
  ev.samples = r.samples;
  ev.loss = r.lossSum / static_cast<double>(r.samples);
  ev.metric = r.metricSum / static_cast<double>(r.samples);
  ev.lr = st.lr;
  ev.stepTime = st.end - st.start;
  ev.wallTime = st.end;
  ev.lossScale = r.lossScale;
  ev.skipped = r.skipped;
  for (auto& rs : r.replicas) {
    rs.start -= static_cast<double>(pausedNs_) * 1e-9;  // the strategy's clock runs on through pauses
    // The sharded update's all-gather is the all-reduce's second half, moved after the update.
    at.arTime += rs.phases.allreduce + rs.phases.allgather + rs.phases.network;  // the cross-worker hop is all-reduce
    at.waitTime += rs.phases.wait;
    at.allTime += rs.phases.total();
    L.utilCompute[static_cast<size_t>(rs.replica)] += rs.phases.compute();
  }
  L.utilWall += ev.stepTime;
  ev.replicas = std::move(r.replicas);
  at.lossSum += r.lossSum;
  at.metricSum += r.metricSum;
  at.samples += r.samples;
  if (L.watchdog)
    if (auto warning = L.watchdog->afterStep(ev)) hub_.publish(*warning);
  hub_.publish(ev);
}

// Utilization, computed: a sample per replica every sampleInterval and one at every epoch's end,
// so that short runs show utilization too; none while NVML's samples of the GPUs stand in.
void Trainer::sampleUtilization(Loop& L, double now) {
  const bool epochEnd = L.at.stepInEpoch == plan_.stepsPerEpoch || L.at.step == L.totalSteps;
  if ((now - L.lastSample < options_.sampleInterval && !epochEnd) || !(L.utilWall > 0)) return;
  const bool publish = !nvmlSampling();
  for (size_t d = 0; d < L.utilCompute.size(); ++d) {
    DeviceSample ds;
    ds.wallTime = now;
    ds.device = static_cast<int>(d);
    ds.utilization = std::min(1.0, L.utilCompute[d] / L.utilWall);
    ds.memoryBytes = static_cast<double>(L.memBytes);
    if (publish) hub_.publish(ds);
    L.utilCompute[d] = 0;
  }
  L.utilWall = 0;
  L.lastSample = now;
}

TrainPosition Trainer::position(const Loop& L) const {
  TrainPosition at = L.at;
  at.wall = wall();
  return at;
}

// Checkpoints every checkpoint_every steps or epochs, never after the last step: a run that ended
// has nothing to resume.
void Trainer::checkpointAfterStep(const Loop& L) {
  const auto& tr = project_.training;
  if (tr.checkpointInSteps && L.at.step % std::max<int64_t>(1, tr.checkpointEvery) == 0 && L.at.step < L.totalSteps)
    writeCheckpoint(position(L));
}

void Trainer::checkpointAfterEpoch(const Loop& L) {
  const auto& tr = project_.training;
  if (tr.checkpointInSteps || L.at.epoch % std::max<int64_t>(1, tr.checkpointEvery) != 0 || L.at.epoch >= L.epochs ||
      L.at.step >= L.totalSteps)
    return;
  TrainPosition at = position(L);
  at.epoch = L.at.epoch + 1;  // the next epoch, from its first step, with fresh sums
  at.stepInEpoch = 0;
  at.epochStart = at.wall;
  at.lossSum = at.metricSum = at.arTime = at.waitTime = at.allTime = 0;
  at.samples = 0;
  writeCheckpoint(at);
}

// An injected kill (kill@step=N), after the step's event and checkpoint.
void Trainer::killFault(int64_t step) {
  const FaultPlan& f = strategy_->faults();
  if (f.killStep == step && f.killPoint == FaultPlan::KillPoint::AfterStep) killNow();
}

// An injected kill here (kill@step=N, or at that step's checkpoint: writeCheckpoint).
void Trainer::killNow() {
  if (options_.killEndsRunWith.empty()) std::raise(SIGKILL);  // as a power cut would: no cleanup, nothing flushed
  abort(options_.killEndsRunWith);
}

// The epoch's figures and its checks: the replicas' sync, validation, early stopping; then the
// epoch's checkpoint.
std::optional<RunFinished> Trainer::endEpoch(Loop& L) {
  EpochEvent ep = epochFigures(L);
  if (auto end = syncCheck(L, ep)) return end;
  evaluateValidation(L, ep);
  ep.wallTime = wall();
  hub_.publish(ep);
  if (auto end = earlyStop(L, ep)) return end;
  checkpointAfterEpoch(L);
  return std::nullopt;
}

EpochEvent Trainer::epochFigures(const Loop& L) const {
  const TrainPosition& at = L.at;
  const double samples = static_cast<double>(at.samples);
  EpochEvent ep;
  ep.epoch = at.epoch;
  ep.seconds = wall() - at.epochStart;
  ep.trainLoss = at.samples ? at.lossSum / samples : 0;
  ep.trainMetric = at.samples ? at.metricSum / samples : 0;
  ep.samplesPerSec = ep.seconds > 0 ? samples / ep.seconds : 0;
  ep.allreduceShare = at.allTime > 0 ? at.arTime / at.allTime : 0;
  ep.waitShare = at.allTime > 0 ? at.waitTime / at.allTime : 0;
  ep.checksums = strategy_->checksums();
  return ep;
}

// Every replica holds the same weights (the invariant); a checksum that differs ends the run.
std::optional<RunFinished> Trainer::syncCheck(const Loop& L, EpochEvent& ep) {
  for (size_t r = 1; r < ep.checksums.size(); ++r) {
    if (ep.checksums[r] == ep.checksums[0]) continue;
    ep.inSync = false;
    hub_.publish(ep);
    return ending(RunStatus::Failed, "replica " + std::to_string(r) + " (" + strategy_->replicaLabel(static_cast<int>(r)) +
                                         ") is out of sync with replica 0 after epoch " + std::to_string(L.at.epoch) +
                                         " (weight checksums differ)");
  }
  return std::nullopt;
}

void Trainer::evaluateValidation(Loop& L, EpochEvent& ep) {
  const Dataset* val = data_->validation ? &*data_->validation : nullptr;
  if (!val || val->size <= 0) return;
  const EvalResult e = evaluateAll(*strategy_, *val);
  ep.valLoss = L.at.lastValLoss = e.lossSum / static_cast<double>(e.samples);
  ep.valMetric = L.at.lastValMetric = e.metricSum / static_cast<double>(e.samples);
}

// Early stopping (sweeps): the run ends, finished, after stopAfterNoImprovement epochs in a row
// without a lower validation loss (training loss without a validation set).
std::optional<RunFinished> Trainer::earlyStop(Loop& L, const EpochEvent& ep) {
  const int patience = options_.stopAfterNoImprovement;
  if (patience <= 0 || L.at.epoch >= L.epochs) return std::nullopt;
  TrainPosition& at = L.at;
  const double watched = ep.valLoss ? *ep.valLoss : ep.trainLoss;
  at.sinceBest = (at.epoch == 1 || watched < at.bestLoss) ? 0 : at.sinceBest + 1;
  if (at.sinceBest == 0) at.bestLoss = watched;
  if (at.sinceBest < patience) return std::nullopt;
  return ending(RunStatus::Finished, "stopped early after epoch " + std::to_string(at.epoch) + ": the " +
                                         (ep.valLoss ? "validation" : "training") + " loss did not improve for " +
                                         std::to_string(at.sinceBest) + " epoch" + (at.sinceBest == 1 ? "" : "s"));
}

RunFinished Trainer::finish(const Loop& L, RunFinished end) {
  stopGpuTelemetry();  // its last sample comes before the run's end
  end.seconds = wall();
  end.steps = L.at.step;
  end.finalValLoss = L.at.lastValLoss;
  end.finalValMetric = L.at.lastValMetric;
  hub_.publish(end);
  return end;
}

}  // namespace ml
