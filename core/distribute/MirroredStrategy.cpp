// The mirrored step, once for every device kind. Per replica thread r:
//   computeGradients: for each micro-batch, stage the shard, forward + loss, backward; on the last
//     one each layer's gradients are checked and its complete buckets handed to the collective;
//   the collective's finish (every replica, even one that failed, so nobody waits forever);
//   applyUpdate (StepUpdate.cpp): the same optimizer update on every replica, or each replica's own
//     chunks when sharded, then the step's sums and times.
#include "distribute/MirroredStrategy.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include "Error.h"
#include "Field.h"
#include "distribute/CrossWorker.h"
#include "distribute/HostCollective.h"
#include "distribute/HostReplicaSum.h"
#include "distribute/Workers.h"
#include "tensor/Denormals.h"

namespace ml {

static int64_t steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

const char* toString(StepPhase p) {
  switch (p) {
    case StepPhase::Idle: return "waiting for the next step";
    case StepPhase::Forward: return "forward";
    case StepPhase::Backward: return "backward";
    case StepPhase::AllReduce: return "the all-reduce";
    case StepPhase::Optimizer: return "the optimizer update";
  }
  return "?";
}

Shard shardOf(int64_t size, int micro, int microBatches, int replica, int replicas) {
  const auto [mlo, mhi] = shardRange(size, micro, microBatches);
  const auto [lo, hi] = shardRange(mhi - mlo, replica, replicas);
  return {mlo + lo, mlo + hi};
}

MirroredStrategy::MirroredStrategy(const ModelSpec& model, const Loss& loss, MetricKind metric, const OptimizerSpec& optimizer,
                                   StrategyOptions options)
    : loss_(loss), metric_(metric), options_(std::move(options)), t0_(steadyNs()) {
  const int n = options_.devices.size();
  if (options_.workers && options_.workers->size() > 1) {
    workers_ = options_.workers;
    worker_ = workers_->rank();
    workerCount_ = workers_->size();
  }
  replicaSum_ = std::make_unique<HostReplicaSum>(n, failure_, workers_);
  if (options_.bucketBytes < 4) throw fieldError("distribute.bucket_bytes", " must be at least 4 bytes");
  std::vector<Sequential*> hosts;
  for (int r = 0; r < n; ++r) {
    auto rep = std::make_unique<Replica>();
    rep->rank = r;
    rep->model = std::make_unique<Sequential>(model);
    rep->model->configureLoss(loss_);
    hosts.push_back(rep->model.get());
    replicas_.push_back(std::move(rep));
  }
  const int64_t params = replicas_[0]->model->paramCount();
  buckets_ = gradientBuckets(replicas_[0]->model->paramRanges(), options_.bucketBytes);
  bool crossReplica = false;  // a layer sums across replicas
  for (size_t i = 0; i < replicas_[0]->model->layerCount(); ++i)
    crossReplica = crossReplica || replicas_[0]->model->layer(i).needsReplicaSum();
  // One BLAS pool serves the whole process (OpenBLAS' thread count is global), so several CPU
  // replicas each run BLAS single-threaded on their own core; one replica gets all the cores
  // (of this worker: workers on the same host share its cores).
  const int cores = coresOfThisWorker();
  blasThreads_ = n == 1 ? (options_.threadsPerDevice > 0 ? options_.threadsPerDevice : cores) : 1;
  BackendConfig config;
  config.devices = options_.devices;
  config.hosts = hosts;
  config.loss = loss_;
  config.metric = metric_;
  config.optimizer = optimizer;
  config.buckets = buckets_;
  config.blasThreads = blasThreads_;
  config.tf32 = options_.tf32;
  config.precision = options_.precision;
  backend_ = makeBackend(std::move(config));
  compute_ = backend_.get();
  params_ = backend_.get();
  caps_ = backend_->caps();
  for (auto& rep : replicas_) applyPrecision(*rep->model, options_.precision);
  lossScale_ = DynamicLossScale(options_.precision, options_.lossScaling);
  refuseAcrossWorkers();
  spins_ = spinBudget(n);
  // The plan (StepPlan.cpp): the collective, the update and where the gradients are checked.
  plan_.lossScaling = lossScale_.active();
  plan_.joinAll = crossReplica && globalReplicas() > 1;
  collective_ = makeCollective();
  units_ = updateUnits(buckets_, params, n);
  planUpdate();
  // One compute thread per replica but the first, which runs on the caller's thread.
  for (auto& rep : replicas_) {
    Replica* p = rep.get();
    if (p->rank > 0) p->compute = std::thread([this, p] { computeLoop(*p); });
  }
}

MirroredStrategy::~MirroredStrategy() {
  job_ = Job{};
  job_.kind = JobKind::Quit;
  jobGen_.fetch_add(1, std::memory_order_release);
  jobGen_.notify_all();
  for (auto& r : replicas_)
    if (r->compute.joinable()) r->compute.join();
}

std::string MirroredStrategy::threadPolicy() const {
  const std::string note = collective_->threadNote();
  return caps_.threadPolicy + (note.empty() ? "" : "; " + note);
}

void MirroredStrategy::enter(Replica& r, StepPhase phase) {
  r.phaseSinceNs.store(steadyNs() - t0_, std::memory_order_relaxed);
  r.phase.store(static_cast<int>(phase), std::memory_order_relaxed);
  // Where this worker is, for the message another worker gives if this one stops answering.
  if (workers_ && r.rank == 0) workers_->setProgress(r.step.load(std::memory_order_relaxed), toString(phase));
}

ReplicaProgress MirroredStrategy::progress(int rank) const {
  const Replica& r = *replicas_[static_cast<size_t>(rank)];
  ReplicaProgress p;
  p.stepsDone = r.stepsDone.load(std::memory_order_relaxed);
  p.step = r.step.load(std::memory_order_relaxed);
  p.phase = static_cast<StepPhase>(r.phase.load(std::memory_order_relaxed));
  p.bucketsHanded = r.bucketsHanded.load(std::memory_order_relaxed);
  p.phaseSince = static_cast<double>(r.phaseSinceNs.load(std::memory_order_relaxed)) * 1e-9;
  return p;
}

void MirroredStrategy::setFaults(FaultPlan plan) {
  if (plan.nanReplica >= 0 && !caps_.hostGradients)
    throw UserError(
        "a nan fault needs a replica whose gradients live in host memory: inject it on a simulated CPU device (cpu:N)");
  faults_ = std::move(plan);
  faultsReleased_.store(false);
}

void MirroredStrategy::releaseFaults() {
  faultsReleased_.store(true);
  faultsReleased_.notify_all();
}

void MirroredStrategy::restoreOptimizer(const std::vector<std::vector<float>>& slots, int64_t iterations) {
  for (int r = 0; r < replicas(); ++r) params_->restoreOptimizer(r, slots, iterations);
}

// Before the backward of the last micro-batch: a slow replica sleeps (factor - 1) times its own
// compute time of the step so far (forward) plus its last backward, so that its buckets reach the
// all-reduce late, as a slower device's would; a hanging replica stops until released; a NaN
// replica poisons its gradient buffer, which backward adds to and checks.
void MirroredStrategy::playFaults(Replica& r, const Job& job, int64_t computeStartNs) {
  const double factor = faults_.slowFactor(r.rank);
  if (factor > 1.0) {
    const double forward = static_cast<double>(steadyNs() - computeStartNs) * 1e-9;
    const double estimate = r.lastBackward > 0 ? forward + r.lastBackward : 3 * forward;
    std::this_thread::sleep_for(std::chrono::duration<double>((factor - 1.0) * estimate));
  }
  if (r.rank == faults_.hangReplica && static_cast<int64_t>(job.step) == faults_.hangStep)
    while (!faultsReleased_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (r.rank == faults_.stuckReplica && static_cast<int64_t>(job.step) == faults_.stuckStep)
    for (;;) std::this_thread::sleep_for(std::chrono::milliseconds(50));  // gone for good: no release reaches it
  if (r.rank == faults_.failReplica && static_cast<int64_t>(job.step) == faults_.failStep)
    throw UserError("an injected failure on " + options_.devices.devices[static_cast<size_t>(r.rank)].label() + " in step " +
                    std::to_string(job.step) + " (fail fault)");
  if (r.rank == faults_.nanReplica && static_cast<int64_t>(job.step) == faults_.nanStep) {
    auto g = caps_.hostGradients->hostGradients(r.rank);  // setFaults refused a nan fault without them
    if (!g.empty()) g.back() = std::numeric_limits<float>::quiet_NaN();
  }
}

double MirroredStrategy::now() const { return static_cast<double>(steadyNs() - t0_) * 1e-9; }

void MirroredStrategy::initialize(uint64_t seed) {
  seed_ = seed;
  for (auto& r : replicas_) r->model->initialize(seed);
  params_->pushParameters();
}

void MirroredStrategy::broadcastParameters() {
  params_->pullParameters();
  auto src = replicas_[0]->model->params();
  if (workers_) workers_->broadcast(src, 0, "the broadcast of worker 1's parameters");
  for (size_t r = 1; r < replicas_.size(); ++r) std::copy(src.begin(), src.end(), replicas_[r]->model->params().begin());
  params_->pushParameters();
}

std::vector<uint64_t> MirroredStrategy::checksums() const {
  params_->pullParameters();  // the checksums are of the parameters on the devices
  std::vector<uint64_t> out;
  for (const auto& r : replicas_) out.push_back(r->model->checksum());
  return workers_ ? gatherChecksums(out) : out;
}

// Replica 0 runs on the calling thread: one hand-off fewer per step, and with one replica
// no hand-off at all. The others are woken through an atomic generation (spin, then sleep).
void MirroredStrategy::runJob(const Job& job) {
  const FlushDenormals flush;  // replica 0's work on the caller's thread (tensor/Denormals.h)
  const int others = replicas() - 1;
  if (others > 0) {
    job_ = job;  // published by the release increment of jobGen_
    pending_.store(others, std::memory_order_relaxed);
    jobGen_.fetch_add(1, std::memory_order_release);
    jobGen_.notify_all();
  }
  runOne(*replicas_[0], job);
  for (int left = pending_.load(std::memory_order_acquire); left > 0; left = pending_.load(std::memory_order_acquire))
    spinWaitWhileEqual(pending_, left, spins_);
  // A failure on any replica (a CUDA error, out of memory) is thrown here, on the caller's thread.
  if (std::string failure = failure_.take(); !failure.empty()) throw UserError(failure);
}

void MirroredStrategy::runOne(Replica& r, const Job& job) {
  if (job.kind == JobKind::Train)
    trainReplica(r, job);
  else if (job.kind == JobKind::Eval)
    evalReplica(r, job);
}

void MirroredStrategy::computeLoop(Replica& r) {
  const FlushDenormals flush;
  uint64_t seen = 0;
  for (;;) {
    spinWaitWhileEqual(jobGen_, seen, spins_);
    seen = jobGen_.load(std::memory_order_acquire);
    const Job& job = job_;
    if (job.kind == JobKind::Quit) return;
    runOne(r, job);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_all();
  }
}

// A replica's failure is kept (the first one wins) and reported by runJob; the replica goes on
// through the collectives so that the others are not left waiting.
template <typename F>
void MirroredStrategy::guarded(Replica& r, F&& work) {
  try {
    work();
  } catch (const std::exception& e) {
    failure_.fail(e.what());
  } catch (...) {
    failure_.fail("unknown error on " + options_.devices.devices[static_cast<size_t>(r.rank)].label());
  }
}

int MirroredStrategy::completeBuckets(size_t layerDone) const {
  int count = 0;
  for (const auto& b : buckets_) {
    if (b.readyAfterLayer >= layerDone)
      ++count;
    else
      break;
  }
  return count;
}

void MirroredStrategy::trainReplica(Replica& r, const Job& job) {
  r.start = now();
  r.samples = 0;
  r.bucketsHanded.store(0, std::memory_order_relaxed);
  r.step.store(static_cast<int64_t>(job.step), std::memory_order_relaxed);
  guarded(r, [&] { computeGradients(r, job); });
  enter(r, StepPhase::AllReduce);
  collective_->finish(r.rank);
  if (failure_.failed()) {
    enter(r, StepPhase::Idle);
    return;
  }
  enter(r, StepPhase::Optimizer);
  guarded(r, [&] { applyUpdate(r, job); });
  r.gather = 0;
  if (plan_.sharded()) {
    // Every replica passes the barrier, even one whose update failed, so nobody waits forever.
    // Fused, the owners have already written their chunks into everyone's parameters (no gathers).
    const double t = now();
    updated_->arriveAndWait();
    if (!failure_.failed()) guarded(r, [&] { gatherParameters(r); });
    r.gather = now() - t;
  }
  guarded(r, [&] { collectStep(r, job); });
  r.stepsDone.store(static_cast<int64_t>(job.step), std::memory_order_relaxed);
  enter(r, StepPhase::Idle);
}

void MirroredStrategy::computeGradients(Replica& r, const Job& job) {
  const int n = replicas(), K = job.accumulate, G = globalReplicas(), g = globalIndex(r.rank);
  const int64_t B = static_cast<int64_t>(job.indices.size());
  // The backend timestamps the step's start right away (a GPU records it on an idle stream), so
  // its phase times are placed on the host clock from r.start.
  compute_->mark(r.rank, Mark::StepStart);
  int64_t most = 0;
  for (int m = 0; m < K; ++m) most = std::max(most, shardOf(B, m, K, g, G).rows());
  compute_->prepare(r.rank, K, most, job.data->targetDim, true);
  compute_->setLossScale(r.rank, job.lossScale);
  collective_->beginStep(r.rank);
  const std::function<void(size_t)> onLayer = [&](size_t layer) {
    const int ready = completeBuckets(layer);
    r.bucketsHanded.store(ready, std::memory_order_relaxed);
    collective_->bucketsReady(r.rank, ready);
  };
  const int64_t computeStart = steadyNs();
  const bool faulty = !faults_.empty();
  // A model whose layers sum across replicas (BatchNormalization) runs every micro-batch on every
  // replica, empty shards too, so that all of them join each sum and keep the same moving statistics.
  const bool joinAll = plan_.joinAll;
  StepContext ctx{true, seed_, job.step, nullptr};
  ctx.replicaSum = joinAll ? replicaSum_.get() : nullptr;
  ctx.replica = r.rank;
  ctx.peers = n;
  for (int m = 0; m < K; ++m) {
    const Shard s = shardOf(B, m, K, g, G);
    ctx.micro = m;
    const bool last = m == K - 1, run = s.rows() > 0 || joinAll;
    compute_->mark(r.rank, Mark::MicroStart, m);
    enter(r, StepPhase::Forward);
    if (s.rows() > 0)
      compute_->stage(r.rank, *job.data, job.indices.subspan(static_cast<size_t>(s.lo), static_cast<size_t>(s.rows())));
    compute_->mark(r.rank, Mark::InputEnd, m);
    if (run) {
      compute_->forwardLoss(r.rank, m, s.rows(), ctx);
      r.samples += s.rows();
    }
    compute_->mark(r.rank, Mark::ForwardEnd, m);
    enter(r, StepPhase::Backward);
    if (faulty && last) playFaults(r, job, computeStart);
    const int64_t backwardFrom = steadyNs();
    if (run) compute_->backward(r.rank, s.rows(), ctx, last ? onLayer : std::function<void(size_t)>());
    if (last && !run) compute_->checkGradients(r.rank);  // no layer was checked in this pass
    compute_->mark(r.rank, Mark::BackwardEnd, m);
    if (last) r.lastBackward = static_cast<double>(steadyNs() - backwardFrom) * 1e-9;
  }
}

// The step's sums and times. Checked on the local (pre-reduce) values, so the replica where a
// non-finite value appeared is named.
void MirroredStrategy::collectStep(Replica& r, const Job& job) {
  const ReplicaSums sums = compute_->finishStep(r.rank, job.accumulate);
  r.lossSum = sums.lossSum;
  r.metricSum = sums.metricSum;
  r.finite = true;
  r.badWhat.clear();
  if (!std::isfinite(r.lossSum)) {
    r.finite = false;
    r.badWhat = "loss";
  } else if (!sums.gradientsFinite || !collective_->localFinite(r.rank)) {
    r.finite = false;
    r.badWhat = "gradient";
  }
  const ReplicaTimes t = compute_->times(r.rank, job.accumulate);
  r.inlineComm = collective_->inlineSeconds(r.rank);
  r.phases = t.phases;
  r.phases.allgather = r.gather;
  r.phases.backward -= r.inlineComm;  // collectives run between layers are not backward
  if (plan_.update == Plan::Update::ShardedFused) {
    // The fused update's tiles interleave the three: each part's own seconds go to its phase.
    r.phases.optimizer = std::max(0.0, r.phases.optimizer - r.fusedSum - r.fusedPush);
    r.phases.allgather += r.fusedPush;
    r.inlineComm += r.fusedSum;  // counted with the all-reduce (trainStep)
  }
  r.backwardEnd = r.start + t.backwardEnd;
  r.network = collective_->networkSeconds(r.rank);
  r.commEnd = globalReplicas() > 1 ? r.start + t.commEnd : r.backwardEnd;  // one replica never communicates
}

StepResult MirroredStrategy::trainStep(const Dataset& data, std::span<const int64_t> indices, int accumulate, float lr,
                                       uint64_t step) {
  if (indices.empty()) throw UserError("a training step needs at least one sample");
  if (accumulate < 1) throw UserError("accumulate must be at least 1");
  if (workers_ && !clockSynced_) syncClocks();
  Job job;
  job.kind = JobKind::Train;
  job.data = &data;
  job.indices = indices;
  job.accumulate = accumulate;
  job.lr = lr;
  const auto factors = lossScale_.factors(static_cast<int64_t>(indices.size()));
  job.lossScale = factors.loss;
  job.gradScale = factors.grad;
  job.step = step;
  replicaSum_->newStep(step);
  if (hierarchical_) hierarchical_->setStep(step);
  std::string localFailure;
  try {
    runJob(job);
  } catch (const std::exception& e) {
    // One process: the step's failure. Several workers: a lost worker ends the group at once;
    // any other failure is shared at the exchange, so every worker stops with the same message.
    if (!workers_ || (hierarchical_ && hierarchical_->lost())) throw;
    localFailure = e.what();
  }
  const std::vector<ReplicaOutcome> all = exchange(localFailure, step);

  StepResult res;
  res.stopVotes = stopVotes_;
  double maxBackwardEnd = 0;
  for (const ReplicaOutcome& o : all) maxBackwardEnd = std::max(maxBackwardEnd, o.backwardEnd);
  for (size_t g = 0; g < all.size(); ++g) {
    const ReplicaOutcome& o = all[g];
    res.lossSum += o.lossSum;
    res.metricSum += o.metricSum;
    res.samples += static_cast<int64_t>(o.samples);
    ReplicaStep rs;
    rs.replica = static_cast<int>(g);
    rs.samples = static_cast<int64_t>(o.samples);
    rs.start = o.start;
    rs.phases = o.phases;
    const double exposed = std::max(0.0, o.commEnd - o.backwardEnd);
    rs.phases.wait = std::clamp(maxBackwardEnd - o.backwardEnd, 0.0, exposed);
    const double allreduce = exposed - rs.phases.wait + o.inlineComm;
    // The cross-worker hop is part of the all-reduce's time; shown on its own.
    rs.phases.network = std::min(o.phases.network, allreduce);
    rs.phases.allreduce = allreduce - rs.phases.network;
    res.replicas.push_back(rs);
    if (o.bad != 0 && res.finite) {
      res.finite = false;
      res.badReplica = static_cast<int>(g);
      res.badWhat = o.bad == 1 ? "loss" : "gradient";
    }
  }
  if (plan_.lossScaling) applyLossScaling(res);
  return res;
}

void MirroredStrategy::evalReplica(Replica& r, const Job& job) {
  r.lossSum = r.metricSum = 0;
  r.samples = 0;
  guarded(r, [&] {
    const auto [lo, hi] = shardRange(static_cast<int64_t>(job.indices.size()), globalIndex(r.rank), globalReplicas());
    const int64_t k = r.model->outFeatures();
    // Chunks of up to 1024 samples, fewer where a sample's activations are large: fashion-cnn's are
    // 146 KB a sample (292 KB with their gradients, activationBytes), so 229 samples a chunk and
    // ~33 MB of activations, not 150 MB.
    const int64_t perSample = std::max<int64_t>(1, r.model->activationBytes(1));
    const int64_t kChunk = std::clamp<int64_t>((int64_t{64} << 20) / perSample, 1, 1024);
    compute_->prepare(r.rank, 1, std::min(kChunk, hi - lo), job.data->targetDim, false);
    const StepContext ctx{false, seed_, 0, nullptr};
    for (int64_t a = lo; a < hi; a += kChunk) {
      const int64_t rows = std::min(kChunk, hi - a);
      compute_->stage(r.rank, *job.data, job.indices.subspan(static_cast<size_t>(a), static_cast<size_t>(rows)));
      compute_->evaluate(r.rank, rows, ctx, job.outputs ? job.outputs + a * k : nullptr, r.lossSum, r.metricSum);
      r.samples += rows;
    }
  });
}

EvalResult MirroredStrategy::evaluate(const Dataset& data, std::span<const int64_t> indices, float* outputs) {
  Job job;
  job.kind = JobKind::Eval;
  job.data = &data;
  job.indices = indices;
  job.outputs = outputs;
  const size_t outLen = outputs ? indices.size() * static_cast<size_t>(replicas_[0]->model->outFeatures()) : 0;
  // Several workers: each writes its replicas' rows; the rest stay zero for the sum below.
  if (workers_ && outputs) std::fill(outputs, outputs + outLen, 0.0f);
  std::string localFailure;
  try {
    runJob(job);
  } catch (const std::exception& e) {
    if (!workers_) throw;
    localFailure = e.what();
  }
  EvalResult res;
  for (const auto& r : replicas_) {
    res.lossSum += r->lossSum;
    res.metricSum += r->metricSum;
    res.samples += r->samples;
  }
  if (workers_) shareEvaluation(res, localFailure, std::span<float>(outputs, outLen));
  return res;
}

}  // namespace ml
