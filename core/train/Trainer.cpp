#include "train/Trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "Error.h"
#include "Field.h"
#include "JsonFile.h"
#include "Limits.h"
#include "distribute/Workers.h"
#include "nn/TeamSize.h"
#include "project/LrScaling.h"
#include "project/WeightsFile.h"
#include "random/Rng.h"
#include "store/RunStore.h"
#include "train/FitCheck.h"
#include "train/GpuTelemetry.h"
#include "train/Watchdog.h"

namespace ml {

static int64_t steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<int64_t> epochOrder(int64_t n, uint64_t seed, int epoch) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  Rng rng(hashKeys(seed, 0x5EEDull, static_cast<uint64_t>(epoch)));
  for (int64_t i = n - 1; i > 0; --i) std::swap(order[static_cast<size_t>(i)], order[rng.below(static_cast<uint64_t>(i + 1))]);
  return order;
}

EvalResult evaluateAll(MirroredStrategy& s, const Dataset& data, float* outputs) {
  std::vector<int64_t> idx(static_cast<size_t>(data.size));
  std::iota(idx.begin(), idx.end(), 0);
  return s.evaluate(data, idx, outputs);
}

Trainer::Trainer(Project project, std::shared_ptr<const DataSplit> data, TelemetryHub& hub, TrainerOptions options)
    : project_(std::move(project)), data_(std::move(data)), hub_(hub), options_(std::move(options)) {
  validate(project_);
  StrategyOptions so;
  so.devices = project_.distribute.devices;
  so.allreduce = project_.distribute.allreduce;
  so.bucketBytes = project_.distribute.bucketBytes;
  so.threadsPerDevice = project_.distribute.threadsPerDevice;
  so.shardOptimizer = project_.distribute.shardOptimizer;
  so.tf32 = project_.distribute.tf32;
  so.allreduceDtype = project_.distribute.allreduceDtype;
  so.precision = project_.training.precision;
  so.lossScaling.enabled = project_.training.lossScaling;
  so.lossScaling.initial = project_.training.lossScale;
  so.lossScaling.growthSteps = project_.training.lossScaleGrowthSteps;
  so.workers = options_.workers && options_.workers->size() > 1 ? options_.workers : nullptr;
  const int processes = options_.workers ? options_.workers->size() : 1;
  if (project_.distribute.workers > 1 && project_.distribute.workers != processes)
    throw fieldError(
        "distribute.workers",
        " is " + std::to_string(project_.distribute.workers) + " but " +
            (processes == 1 ? std::string("this is one process: train it with mirrorlab-cli train (it starts the workers "
                                          "under mpirun), or set it to 1 to train in one process")
                            : "mpirun started " + std::to_string(processes) + " workers: make them agree"));
  const Dataset& train = data_->train;
  Loss loss = Loss::make(project_.training.loss, project_.training.fromLogits);
  MetricKind metric = metricFor(project_.training.metrics.empty() ? "" : project_.training.metrics.front(), loss);
  // Every worker's replicas share each batch: the plan is of all of them.
  plan_ = planRun(project_, so.devices.size() * (so.workers ? so.workers->size() : 1), train.size);
  if (so.threadsPerDevice == 0 && so.devices.size() == 1 && so.devices.kind == DeviceKind::Cpu && !so.workers) {
    const TeamChoice team = chooseTeam(project_.model, plan_.perReplicaBatch);  // nn/TeamSize.h
    so.threadsPerDevice = team.threads;
    teamNote_ = team.why;
  }
  strategy_ = std::make_unique<MirroredStrategy>(project_.model, loss, metric, project_.training.optimizer, so);
  checkFitsData(loss, metric);
  strategy_->initialize(project_.training.seed);
  try {
    strategy_->setFaults(planFaults(project_.distribute.faults, so.devices, strategy_->worker(), strategy_->workerCount()));
  } catch (const UserError& e) {
    throw fieldError("distribute.faults", std::string(": ") + e.what());
  }
  if (options_.resume) restore(*options_.resume);
  setUpGpuTelemetry();
}

// Checks that the model fits the data before any time is spent. A loss or metric of the wrong
// kind for the labels (mean squared error or categorical_crossentropy on class indices, mae on
// classes, a classification loss on regression targets) is named first: changing a layer would
// not fix it. Then the shapes, in the words the studio shows; then the rest of the loss checks
// and, on CPU replicas, that the batch fits in memory (a GPU run names its own device's memory).
void Trainer::checkFitsData(const Loss& loss, MetricKind metric) const {
  const Dataset& train = data_->train;
  const bool classLabels = train.numClasses > 0 && train.targetDim == 1;
  const bool wrongKind =
      (classLabels && (loss.kind() == LossKind::MeanSquaredError || loss.kind() == LossKind::CategoricalCrossentropy ||
                       metric == MetricKind::MeanAbsoluteError)) ||
      (classLabels && train.numClasses > 2 && loss.kind() == LossKind::BinaryCrossentropy) ||
      (loss.kind() == LossKind::SparseCategoricalCrossentropy && train.numClasses <= 0);
  if (wrongKind) checkLossFitsData(loss, metric, strategy_->model(0), train);
  const FitCheck fit = checkFit(project_, factsOf(train));
  if (!fit.fits()) throw UserError(fit.summary(), fit.problems.front().field());
  checkLossFitsData(loss, metric, strategy_->model(0), train);
  if (!strategy_->onGpu())
    requireMemory(static_cast<double>(strategy_->model(0).activationBytes(plan_.perReplicaBatch)) * strategy_->replicas(),
                  "a per-replica batch of " + std::to_string(plan_.perReplicaBatch) + " on " +
                      std::to_string(strategy_->replicas()) + " replica(s) (activations and their gradients)",
                  "use a smaller batch");
}

// A checkpoint must be of this run, this architecture, optimizer and seed, and keep the global
// batch (the invariant makes any device count exact to float rounding only for the same batch).
void Trainer::restore(const Checkpoint& c) {
  const std::string what = "checkpoint of run " + std::to_string(c.runId) + " at step " + std::to_string(c.at.step);
  auto strip = [](nlohmann::json a) {
    for (auto& l : a["layers"]) l.erase("name");
    return a;
  };
  Sequential& m = strategy_->model(0);
  const nlohmann::json arch = architectureJson(m);
  if (strip(c.architecture) != strip(arch) || c.params.size() != static_cast<size_t>(m.paramCount()))
    throw UserError("the " + what + " belongs to another architecture (" + shortDump(c.architecture, 200) +
                    "), not this model's (" + shortDump(arch, 200) + "): it cannot be resumed with this project");
  if (c.optimizer != toString(project_.training.optimizer.kind))
    throw UserError("the " + what + " holds " + c.optimizer + " state but the project trains with " +
                    toString(project_.training.optimizer.kind));
  if (c.seed != project_.training.seed)
    throw UserError("the " + what + " was made with seed " + std::to_string(c.seed) + ", the project has seed " +
                    std::to_string(project_.training.seed) + ": its shuffle and dropout keys would not continue");
  if (c.globalBatch != plan_.globalBatch)
    throw UserError("resuming on " + std::to_string(plan_.replicas) + " replica(s) would change the global batch from " +
                    std::to_string(c.globalBatch) + " (" + c.devices + ") to " + std::to_string(plan_.globalBatch) +
                    ": the run could not go on as it was; resume with a device count that keeps a global batch of " +
                    std::to_string(c.globalBatch) +
                    (project_.training.perDeviceBatch ? " (the batch is per device: use " + c.devices + ")" : ""));
  if (c.at.step > plan_.stepsPerEpoch * project_.training.epochs || c.at.epoch < 1)
    throw UserError("the " + what + " is past the end of this run's " + std::to_string(project_.training.epochs) + " epochs");
  if (c.shuffleKey != hashKeys(c.seed, 0x5EEDull, static_cast<uint64_t>(c.at.epoch)))
    throw UserError("the " + what + " is damaged (its shuffle key does not match its seed and epoch)");
  std::copy(c.params.begin(), c.params.end(), m.params().begin());
  strategy_->broadcastParameters();
  strategy_->restoreOptimizer(c.optimizerSlots, c.optimizerIterations);
  if (c.lossScale) strategy_->restoreLossScale(*c.lossScale, c.lossScaleGoodSteps);
  runId_ = c.runId;
}

void Trainer::writeCheckpoint(const TrainPosition& at) {
  if (!options_.record) return;  // not recorded: a checkpoint could never be resumed
  if (!runId_) runId_ = options_.record->awaitRunId();
  if (!runId_) return;
  const std::string folder = checkpointFolder(options_.record->storePath(), *runId_);
  if (folder.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) throw UserError("cannot create the checkpoint folder " + folder + ": " + ec.message());
  MirroredStrategy& s = *strategy_;
  Checkpoint c;
  c.runId = *runId_;
  c.architecture = architectureJson(s.model(0));
  c.optimizer = toString(project_.training.optimizer.kind);
  c.seed = project_.training.seed;
  c.shuffleKey = hashKeys(c.seed, 0x5EEDull, static_cast<uint64_t>(at.epoch));
  c.globalBatch = plan_.globalBatch;
  c.replicas = plan_.replicas;
  c.devices = project_.distribute.devices.spec;
  c.at = at;
  // The store first: a kill after this point finds every row the checkpoint covers (RunRecord::awaitStep).
  if (!options_.record->awaitStep(at.step)) {
    std::lock_guard lock(abortMu_);
    if (!abortReason_.empty()) return;  // the run stops at the next step, with the store's reason
    throw std::runtime_error("the run store has not confirmed the steps up to " + std::to_string(at.step) +
                             ", so their checkpoint was not written (it would be ahead of the run's stored history)");
  }
  const FaultPlan& faults = strategy_->faults();
  const bool killHere = faults.killStep == at.step;
  if (killHere && faults.killPoint == FaultPlan::KillPoint::BeforeCheckpoint) killNow();
  const auto params = s.model(0).params();
  c.params.assign(params.begin(), params.end());
  for (const auto& slot : s.optimizerSlots(0)) c.optimizerSlots.emplace_back(slot.begin(), slot.end());
  c.optimizerIterations = s.optimizerIterations(0);
  if (s.lossScale() > 0) {
    c.lossScale = s.lossScale();
    c.lossScaleGoodSteps = s.lossScaleGoodSteps();
  }
  CheckpointSaved ev;
  ev.step = at.step;
  ev.epoch = at.epoch;
  ev.path = checkpointFile(folder, at.step);
  ev.checksum = saveCheckpoint(c, ev.path);
  if (killHere && faults.killPoint == FaultPlan::KillPoint::AfterCheckpoint) killNow();
  ev.bytes = static_cast<int64_t>(std::filesystem::file_size(ev.path, ec));
  // Keep the newest K: the names sort by step.
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(folder, ec))
    if (e.path().extension() == ".mlck") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  const size_t keep = static_cast<size_t>(std::max(1, project_.training.checkpointKeep));
  for (size_t i = 0; i + keep < files.size(); ++i) {
    std::filesystem::remove(files[i], ec);
    ev.removed.push_back(files[i]);
  }
  ev.wallTime = wall();
  hub_.publish(ev);
}

Trainer::~Trainer() = default;

double Trainer::wall() const { return static_cast<double>(steadyNs() - t0_ - pausedNs_) * 1e-9; }

// Blocks while paused; the time is taken out of the run's clock and reported as its own event, so
// no step, epoch, throughput or utilization figure includes it.
void Trainer::waitWhilePaused() {
  double at = 0;
  int64_t from = 0;
  {
    std::lock_guard clock(clockMu_);
    at = wall();
    from = steadyNs();
    inPause_ = true;
  }
  {
    std::unique_lock lock(pauseMu_);
    pauseCv_.wait(lock, [&] { return !paused_.load() || cancel_.load(); });
  }
  std::lock_guard clock(clockMu_);  // the NVML sampler's next sample comes after this event
  const int64_t ns = steadyNs() - from;
  pausedNs_ += ns;
  inPause_ = false;
  RunPaused ev;
  ev.wallTime = at;
  ev.seconds = static_cast<double>(ns) * 1e-9;
  hub_.publish(ev);
}

std::string Trainer::stuckFor(double graceSeconds) const {
  const int64_t at = hangNs_.load();
  if (at == 0 || static_cast<double>(steadyNs() - at) * 1e-9 < graceSeconds) return {};
  std::lock_guard lock(abortMu_);
  return abortReason_;
}

void Trainer::abort(const std::string& reason) {
  {
    std::lock_guard lock(abortMu_);
    if (abortReason_.empty()) abortReason_ = reason.empty() ? "aborted" : reason;
  }
  requestCancel();
}

void Trainer::setPaused(bool p) {
  {
    std::lock_guard lock(pauseMu_);
    paused_.store(p);
  }
  pauseCv_.notify_all();
}

std::string Trainer::abortReason() const {
  std::lock_guard lock(abortMu_);
  return abortReason_;
}

}  // namespace ml
