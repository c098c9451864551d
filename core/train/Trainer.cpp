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
#include "FieldNames.h"
#include "JsonFile.h"
#include "Limits.h"
#include "distribute/Workers.h"
#include "nn/TeamSize.h"
#include "nn/WeightsFile.h"
#include "project/LrScaling.h"
#include "random/Rng.h"
#include "store/RunStore.h"
#include "train/FitCheck.h"
#include "train/GpuTelemetry.h"
#include "train/Watchdog.h"

namespace ml {

static int64_t steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static std::string fmtNum(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string RunPlan::sentence() const {
  std::ostringstream s;
  if (replicas == 1)
    s << "1 replica x " << globalBatch << " = " << globalBatch << " samples per step";
  else if (perReplicaBatch == smallestShard)
    s << replicas << " replicas x " << perReplicaBatch << " = " << microBatch << " samples per "
      << (accumulate > 1 ? "micro-batch" : "step");
  else
    s << replicas << " replicas x " << smallestShard << "-" << perReplicaBatch << " = " << microBatch << " samples per "
      << (accumulate > 1 ? "micro-batch" : "step");
  if (accumulate > 1) s << ", " << accumulate << " micro-batches = " << globalBatch << " samples per update";
  s << "; learning rate " << scaling.explain();
  if (warmupEpochs > 0) s << ", " << fmtNum(warmupEpochs) << " epoch" << (warmupEpochs == 1 ? "" : "s") << " warm-up";
  if (!lrDecayEpochs.empty()) s << ", then " << decayPhrase();
  return s.str();
}

std::string RunPlan::decayPhrase() const {
  if (lrDecayEpochs.empty()) return {};
  std::string after;
  for (size_t i = 0; i < lrDecayEpochs.size(); ++i)
    after += (i == 0 ? "" : i + 1 == lrDecayEpochs.size() ? " and " : ", ") + std::to_string(lrDecayEpochs[i]);
  return "multiplied by " + fmtNum(lrDecayFactor) + " after epoch" + (lrDecayEpochs.size() == 1 ? " " : "s ") + after;
}

RunPlan planRun(const Project& p, int replicas, int64_t trainSamples) {
  RunPlan plan;
  const auto& t = p.training;
  plan.replicas = replicas;
  plan.accumulate = t.accumulate;
  plan.trainSamples = trainSamples;
  if (t.batchSize < 1 || t.accumulate < 1 || replicas < 1)
    throw UserError(fieldInWords("training.batch_size") + " and " + fieldInWords("training.accumulate") + " must be at least 1");
  if (t.perDeviceBatch) {
    const auto g = mulChecked(t.batchSize, int64_t{replicas} * t.accumulate);
    if (!g || *g > kMaxBatch)
      throw UserError("a per-device batch of " + std::to_string(t.batchSize) + " x " + std::to_string(replicas) + " replicas x " +
                      std::to_string(t.accumulate) + " micro-batches is more than " + std::to_string(kMaxBatch) +
                      " samples per update: lower " + fieldInWords("training.batch_size"));
    plan.globalBatch = *g;
  } else {
    plan.globalBatch = t.batchSize;
  }
  if (plan.globalBatch > trainSamples)
    throw UserError("global batch " + std::to_string(plan.globalBatch) + " is larger than the training set (" +
                    std::to_string(trainSamples) + " samples): set " + fieldInWords("training.batch_size") + " to at most " +
                    std::to_string(trainSamples));
  if (plan.globalBatch < t.accumulate)
    throw UserError("global batch " + std::to_string(plan.globalBatch) + " cannot be split into " + std::to_string(t.accumulate) +
                    " micro-batches: set " + fieldInWords("training.batch_size") + " to at least " +
                    std::to_string(t.accumulate) + " or lower " + fieldInWords("training.accumulate"));
  plan.microBatch = (plan.globalBatch + t.accumulate - 1) / t.accumulate;
  plan.perReplicaBatch = (plan.microBatch + replicas - 1) / replicas;
  plan.smallestShard = (plan.globalBatch / t.accumulate) / replicas;
  plan.stepsPerEpoch = (trainSamples + plan.globalBatch - 1) / plan.globalBatch;
  plan.lastBatch = trainSamples - (plan.stepsPerEpoch - 1) * plan.globalBatch;
  plan.scaling = scaleLearningRate(t, plan.globalBatch);
  plan.baseLr = plan.scaling.baseLr;
  plan.lrRule = plan.scaling.rule;
  plan.lrFactor = plan.scaling.factor;
  plan.lr = plan.scaling.lr;
  plan.warmupEpochs = t.warmupEpochs;
  plan.lrDecayEpochs = t.lrDecayEpochs;
  plan.lrDecayFactor = t.lrDecayFactor;
  if (plan.smallestShard == 0)
    plan.warnings.push_back("the global batch (" + std::to_string(plan.microBatch) +
                            ") is smaller than the number of replicas (" + std::to_string(replicas) +
                            "): some replicas get no samples and only wait");
  const int64_t lastMicro = plan.lastBatch / t.accumulate;
  if (lastMicro < replicas && plan.smallestShard > 0)
    plan.warnings.push_back("the last batch of each epoch has " + std::to_string(plan.lastBatch) +
                            " samples: some replicas get none");
  if (t.lrScaling == "none" && plan.globalBatch > plan.scaling.referenceBatch)
    plan.warnings.push_back("the global batch (" + std::to_string(plan.globalBatch) + ") is " +
                            fmtNum(static_cast<double>(plan.globalBatch) / static_cast<double>(plan.scaling.referenceBatch)) +
                            "x the batch the learning rate was set for (" + std::to_string(plan.scaling.referenceBatch) +
                            ") but the learning rate is unscaled: consider linear scaling with warm-up");
  return plan;
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
  try {
    so.devices = parseDevices(project_.distribute.devices);
  } catch (const UserError& e) {
    throw UserError(fieldInWords("distribute.devices") + ": " + e.what());
  }
  so.allreduce = project_.distribute.allreduce;
  so.bucketBytes = project_.distribute.bucketBytes;
  so.threadsPerDevice = project_.distribute.threadsPerDevice;
  so.shardOptimizer = project_.distribute.shardOptimizer;
  so.tf32 = project_.distribute.tf32;
  so.allreduceDtype = parseAllReduceDtype(project_.distribute.allreduceDtype);              // validated above
  so.precision = parsePrecision(project_.training.precision).value_or(Precision::Float32);  // validated above
  so.lossScaling.enabled = project_.training.lossScaling;
  so.lossScaling.initial = project_.training.lossScale;
  so.lossScaling.growthSteps = project_.training.lossScaleGrowthSteps;
  so.workers = options_.workers && options_.workers->size() > 1 ? options_.workers : nullptr;
  const int processes = options_.workers ? options_.workers->size() : 1;
  if (project_.distribute.workers > 1 && project_.distribute.workers != processes)
    throw UserError(fieldInWords("distribute.workers") + " is " + std::to_string(project_.distribute.workers) + " but " +
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
  // Check that the model fits the data before any time is spent. A loss or metric of the wrong
  // kind for the labels (mean squared error or categorical_crossentropy on class indices, mae on
  // classes, a classification loss on regression targets) is named first: changing a layer would
  // not fix it. Then the shapes, in the words the studio shows; then the rest of the loss checks
  // and, on CPU replicas, that the batch fits in memory (a GPU run names its own device's memory).
  for (const auto& name : project_.training.metrics) parseMetric(name);
  const bool classLabels = train.numClasses > 0 && train.targetDim == 1;
  const bool wrongKind =
      (classLabels && (loss.kind() == LossKind::MeanSquaredError || loss.kind() == LossKind::CategoricalCrossentropy ||
                       metric == MetricKind::MeanAbsoluteError)) ||
      (classLabels && train.numClasses > 2 && loss.kind() == LossKind::BinaryCrossentropy) ||
      (loss.kind() == LossKind::SparseCategoricalCrossentropy && train.numClasses <= 0);
  if (wrongKind) checkLossFitsData(loss, metric, strategy_->model(0), train);
  const FitCheck fit = checkFit(project_, factsOf(train));
  if (!fit.fits()) throw UserError(fit.summary());
  checkLossFitsData(loss, metric, strategy_->model(0), train);
  if (!strategy_->onGpu())
    requireMemory(static_cast<double>(strategy_->model(0).activationBytes(plan_.perReplicaBatch)) * strategy_->replicas(),
                  "a per-replica batch of " + std::to_string(plan_.perReplicaBatch) + " on " +
                      std::to_string(strategy_->replicas()) + " replica(s) (activations and their gradients)",
                  "use a smaller batch");
  strategy_->initialize(project_.training.seed);
  try {
    strategy_->setFaults(parseFaults(project_.distribute.faults, so.devices, strategy_->worker(), strategy_->workerCount()));
  } catch (const UserError& e) {
    throw UserError(fieldInWords("distribute.faults") + ": " + e.what());
  }
  if (options_.resume) restore(*options_.resume);
  setUpGpuTelemetry();
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
  if (c.optimizer != project_.training.optimizer.name)
    throw UserError("the " + what + " holds " + c.optimizer + " state but the project trains with " +
                    project_.training.optimizer.name);
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
  if (options_.checkpointStore.empty()) return;
  if (!runId_ && options_.runId) runId_ = options_.runId();
  if (!runId_) return;  // not recorded: a checkpoint could never be resumed
  const std::string folder = checkpointFolder(options_.checkpointStore, *runId_);
  if (folder.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) throw UserError("cannot create the checkpoint folder " + folder + ": " + ec.message());
  MirroredStrategy& s = *strategy_;
  Checkpoint c;
  c.runId = *runId_;
  c.architecture = architectureJson(s.model(0));
  c.optimizer = project_.training.optimizer.name;
  c.seed = project_.training.seed;
  c.shuffleKey = hashKeys(c.seed, 0x5EEDull, static_cast<uint64_t>(at.epoch));
  c.globalBatch = plan_.globalBatch;
  c.replicas = plan_.replicas;
  c.devices = project_.distribute.devices;
  c.at = at;
  // The store first: a kill after this point finds every row the checkpoint covers (see awaitRecorded).
  if (options_.awaitRecorded && !options_.awaitRecorded(at.step)) {
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

void Trainer::killNow() {
  if (options_.onKill)
    options_.onKill();
  else
    std::raise(SIGKILL);  // as a power cut or kill -9 would: no cleanup, nothing flushed
}

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

RunFinished Trainer::run() {
  const TrainPosition from = options_.resume ? options_.resume->at : TrainPosition{};
  t0_ = steadyNs() - static_cast<int64_t>(from.wall * 1e9);  // a resumed run's clock goes on
  MirroredStrategy& s = *strategy_;
  const Dataset& train = data_->train;
  const Dataset* val = data_->validation ? &*data_->validation : nullptr;
  const auto& tr = project_.training;
  const int n = s.globalReplicas();  // every worker's replicas: each step's timings hold them all
  const int64_t spe = plan_.stepsPerEpoch;
  const int64_t totalSteps = options_.maxSteps > 0 ? std::min<int64_t>(options_.maxSteps, spe * tr.epochs) : spe * tr.epochs;
  const int epochs = static_cast<int>((totalSteps + spe - 1) / spe);
  const FaultPlan& faults = s.faults();

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
  started.epochs = epochs;
  started.stepsPerEpoch = spe;
  started.totalSteps = totalSteps;
  for (const auto& l : startLines()) started.description += l + "\n";
  started.telemetry = telemetryLine_;
  if (!faults.empty()) started.tags.push_back("fault injected");
  if (options_.resume) {
    started.resumeRun = options_.resume->runId;
    started.resumeStep = from.step;
    started.resumeEpochsDone = from.epoch - 1;
    started.resumeWall = from.wall;
  }
  hub_.publish(started);
  // The run is in the store before its first step: a process killed at any step later leaves a
  // run that the next opening marks interrupted, never no run at all (the recorder commits on its
  // own thread, which a loaded machine may not schedule before a small model's first steps).
  if (!runId_ && options_.runId) runId_ = options_.runId();
  startGpuTelemetry();

  const double warmupSteps = plan_.warmupEpochs * static_cast<double>(spe);
  const int64_t memBytes = s.model(0).paramCount() * 4 * 2 + s.model(0).activationBytes(plan_.perReplicaBatch);
  std::vector<double> utilCompute(static_cast<size_t>(n), 0.0);
  double utilWall = 0, lastSample = from.wall;
  RunFinished fin;
  int64_t step = from.step;
  std::optional<double> lastValLoss = from.lastValLoss, lastValMetric = from.lastValMetric;
  double bestLoss = from.bestLoss;
  int sinceBest = from.sinceBest;
  const int64_t every = std::max<int64_t>(1, tr.checkpointEvery);
  bool stopAgreed = false;  // several workers: a stop vote was counted, every worker stops now

  WatchdogOptions wo;
  wo.hangSeconds = project_.distribute.hangSeconds;
  wo.stragglerFactor = project_.distribute.stragglerFactor;
  std::optional<Watchdog> watchdog;
  if (options_.watchdog)
    watchdog.emplace(s, wo, [this](const std::string& why) {
      hangNs_.store(steadyNs());
      abort(why);
      strategy_->releaseFaults();  // an injected hang lets go, so the stuck step ends and run() returns
    });

  auto finish = [&](RunStatus st, std::string msg) {
    stopGpuTelemetry();  // its last sample comes before the run's end
    fin.status = st;
    fin.message = std::move(msg);
    fin.seconds = wall();
    fin.steps = step;
    fin.finalValLoss = lastValLoss;
    fin.finalValMetric = lastValMetric;
    hub_.publish(fin);
    return fin;
  };

  try {
    for (int epoch = from.epoch; epoch <= epochs; ++epoch) {
      const bool resumedEpoch = epoch == from.epoch;
      const auto order = epochOrder(train.size, tr.seed, epoch);
      const double epochStart = resumedEpoch && from.stepInEpoch > 0 ? from.epochStart : wall();
      double lossSum = 0, metricSum = 0, arTime = 0, waitTime = 0, allTime = 0;
      int64_t samples = 0;
      if (resumedEpoch) {
        lossSum = from.lossSum, metricSum = from.metricSum, arTime = from.arTime, waitTime = from.waitTime,
        allTime = from.allTime;
        samples = from.samples;
      }
      auto position = [&](int64_t stepsInEpoch) {
        TrainPosition at;
        at.step = step;
        at.epoch = epoch;
        at.stepInEpoch = stepsInEpoch;
        at.wall = wall();
        at.epochStart = epochStart;
        at.lossSum = lossSum, at.metricSum = metricSum, at.arTime = arTime, at.waitTime = waitTime, at.allTime = allTime;
        at.samples = samples;
        at.lastValLoss = lastValLoss, at.lastValMetric = lastValMetric;
        at.bestLoss = bestLoss, at.sinceBest = sinceBest;
        return at;
      };
      for (int64_t i = resumedEpoch ? from.stepInEpoch : 0; i < spe && step < totalSteps; ++i) {
        // Several workers stop together: a cancel here is a vote, counted at the next step's
        // exchange, after which every worker ends at the same step (a worker that left alone
        // would leave the others waiting in the all-reduce). Pausing is not offered across workers.
        if (paused_.load() && !s.workers()) waitWhilePaused();
        if (cancel_.load() && s.workers() && !stopAgreed) s.requestStop();
        if (cancel_.load() && (!s.workers() || stopAgreed)) {
          std::string reason;
          {
            std::lock_guard lock(abortMu_);
            reason = abortReason_;
          }
          // Every worker stops here after the same votes: one that voted because it failed (its
          // watchdog, say) gives every worker its reason, with its name and host.
          if (WorkerGroup* w = s.workers()) {
            const auto why = w->allGather(reason, "the reasons for stopping");
            for (size_t k = 0; k < why.size() && reason.empty(); ++k)
              if (!why[k].empty()) reason = workerOnHost(*w, static_cast<int>(k)) + ": " + why[k];
          }
          if (!reason.empty())
            return finish(RunStatus::Failed, reason + " (training stopped after step " + std::to_string(step) + ")");
          return finish(RunStatus::Cancelled, "cancelled at step " + std::to_string(step));
        }
        const int64_t lo = i * plan_.globalBatch, hi = std::min<int64_t>(lo + plan_.globalBatch, train.size);
        double lr = plan_.lr;
        if (warmupSteps > 0 && static_cast<double>(step) < warmupSteps)
          lr = plan_.baseLr + (plan_.lr - plan_.baseLr) * static_cast<double>(step) / warmupSteps;
        for (const int64_t after : project_.training.lrDecayEpochs)  // step decay after that many finished epochs
          if (epoch - 1 >= after) lr *= project_.training.lrDecayFactor;
        const double t = wall();
        ++step;
        StepResult r =
            s.trainStep(train, std::span<const int64_t>(order).subspan(static_cast<size_t>(lo), static_cast<size_t>(hi - lo)),
                        tr.accumulate, static_cast<float>(lr), static_cast<uint64_t>(step));
        const double t2 = wall();
        if (r.stopVotes > 0) {  // every worker sees the same votes after the same step
          stopAgreed = true;
          cancel_.store(true);
        }
        if (watchdog && watchdog->fired()) continue;  // the cancel check above ends the run with the diagnosis
        if (!r.finite) {
          return finish(RunStatus::Diverged,
                        "non-finite " + r.badWhat + " at step " + std::to_string(step) + " (epoch " + std::to_string(epoch) +
                            ") on replica " + std::to_string(r.badReplica) + " (" + s.replicaLabel(r.badReplica) + ")" +
                            (r.skipped ? " even at loss scale 1" : "") +
                            (faults.nanStep == step ? " (an injected nan fault)" : ": lower the learning rate"));
        }
        StepEvent ev;
        ev.step = step;
        ev.epoch = epoch;
        ev.stepInEpoch = i + 1;
        ev.stepsPerEpoch = spe;
        ev.samples = r.samples;
        ev.loss = r.lossSum / static_cast<double>(r.samples);
        ev.metric = r.metricSum / static_cast<double>(r.samples);
        ev.lr = lr;
        ev.stepTime = t2 - t;
        ev.wallTime = t2;
        ev.lossScale = r.lossScale;
        ev.skipped = r.skipped;
        for (auto& rs : r.replicas) {
          rs.start -= static_cast<double>(pausedNs_) * 1e-9;  // the strategy's clock runs on through pauses
          // The sharded update's all-gather is the all-reduce's second half, moved after the update.
          arTime += rs.phases.allreduce + rs.phases.allgather + rs.phases.network;  // the cross-worker hop is all-reduce
          waitTime += rs.phases.wait;
          allTime += rs.phases.total();
          utilCompute[static_cast<size_t>(rs.replica)] += rs.phases.compute();
        }
        utilWall += ev.stepTime;
        ev.replicas = std::move(r.replicas);
        lossSum += r.lossSum;
        metricSum += r.metricSum;
        samples += r.samples;
        if (watchdog)
          if (auto warning = watchdog->afterStep(ev)) hub_.publish(*warning);
        hub_.publish(ev);
        // The next step starts once the store holds this one: a write that fails stops the run
        // with the step whose row failed (the recorder's abort), not a commit interval of steps
        // later. It costs a small model a commit per step (bench/RESULTS.md).
        if (options_.awaitRecorded) options_.awaitRecorded(step);
        // A sample per interval, and one at every epoch's end so that short runs show utilization too;
        // none while NVML's samples of the GPUs stand in for them.
        const bool epochEnd = i + 1 == spe || step == totalSteps;
        if ((t2 - lastSample >= options_.sampleInterval || epochEnd) && utilWall > 0) {
          const bool publish = !nvmlSampling();
          for (int d = 0; d < n; ++d) {
            DeviceSample ds;
            ds.wallTime = t2;
            ds.device = d;
            ds.utilization = std::min(1.0, utilCompute[static_cast<size_t>(d)] / utilWall);
            ds.memoryBytes = static_cast<double>(memBytes);
            if (publish) hub_.publish(ds);
            utilCompute[static_cast<size_t>(d)] = 0;
          }
          utilWall = 0;
          lastSample = t2;
        }
        if (tr.checkpointInSteps && step % every == 0 && step < totalSteps) writeCheckpoint(position(i + 1));
        if (faults.killStep == step && faults.killPoint == FaultPlan::KillPoint::AfterStep) killNow();
      }
      EpochEvent ep;
      ep.epoch = epoch;
      ep.seconds = wall() - epochStart;
      ep.trainLoss = samples ? lossSum / static_cast<double>(samples) : 0;
      ep.trainMetric = samples ? metricSum / static_cast<double>(samples) : 0;
      ep.samplesPerSec = ep.seconds > 0 ? static_cast<double>(samples) / ep.seconds : 0;
      ep.allreduceShare = allTime > 0 ? arTime / allTime : 0;
      ep.waitShare = allTime > 0 ? waitTime / allTime : 0;
      ep.checksums = s.checksums();
      for (size_t r = 1; r < ep.checksums.size(); ++r) {
        if (ep.checksums[r] != ep.checksums[0]) {
          ep.inSync = false;
          hub_.publish(ep);
          return finish(RunStatus::Failed, "replica " + std::to_string(r) + " (" + s.replicaLabel(static_cast<int>(r)) +
                                               ") is out of sync with replica 0 after epoch " + std::to_string(epoch) +
                                               " (weight checksums differ)");
        }
      }
      if (val && val->size > 0) {
        EvalResult e = evaluateAll(s, *val);
        ep.valLoss = lastValLoss = e.lossSum / static_cast<double>(e.samples);
        ep.valMetric = lastValMetric = e.metricSum / static_cast<double>(e.samples);
      }
      ep.wallTime = wall();
      hub_.publish(ep);
      if (options_.stopAfterNoImprovement > 0 && epoch < epochs) {
        const double watched = ep.valLoss ? *ep.valLoss : ep.trainLoss;
        sinceBest = (epoch == 1 || watched < bestLoss) ? 0 : sinceBest + 1;
        if (sinceBest == 0) bestLoss = watched;
        if (sinceBest >= options_.stopAfterNoImprovement)
          return finish(RunStatus::Finished, "stopped early after epoch " + std::to_string(epoch) + ": the " +
                                                 (ep.valLoss ? "validation" : "training") + " loss did not improve for " +
                                                 std::to_string(sinceBest) + " epoch" + (sinceBest == 1 ? "" : "s"));
      }
      if (!tr.checkpointInSteps && epoch % every == 0 && epoch < epochs && step < totalSteps) {
        TrainPosition at = position(0);
        at.epoch = epoch + 1;  // the next epoch, from its first step, with fresh sums
        at.epochStart = at.wall;
        at.lossSum = at.metricSum = at.arTime = at.waitTime = at.allTime = 0;
        at.samples = 0;
        writeCheckpoint(at);
      }
    }
  } catch (const std::exception& e) {
    return finish(RunStatus::Failed, e.what());
  }
  if (watchdog && watchdog->fired()) {
    std::lock_guard lock(abortMu_);
    return finish(RunStatus::Failed, abortReason_ + " (training stopped after step " + std::to_string(step) + ")");
  }
  return finish(RunStatus::Finished, "");
}

}  // namespace ml
