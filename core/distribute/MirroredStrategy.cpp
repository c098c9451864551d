#include "distribute/MirroredStrategy.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "Error.h"
#include "distribute/GpuReplicas.h"

extern "C" void openblas_set_num_threads(int);

namespace ml {

static int64_t steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

MirroredStrategy::MirroredStrategy(const ModelSpec& model, const Loss& loss, MetricKind metric,
                                   const OptimizerSpec& optimizer, StrategyOptions options)
    : loss_(loss), metric_(metric), options_(std::move(options)), t0_(steadyNs()) {
  const int n = options_.devices.size();
  if (options_.bucketBytes < 4) throw UserError("bucket size must be at least 4 bytes");
  // One BLAS pool serves the whole process (OpenBLAS' thread count is global), so several
  // replicas each run BLAS single-threaded on their own core; one replica gets all the cores.
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (n == 1) blasThreads_ = options_.threadsPerDevice > 0 ? options_.threadsPerDevice : cores;
  else blasThreads_ = 1;
  openblas_set_num_threads(blasThreads_);

  for (int r = 0; r < n; ++r) {
    auto rep = std::make_unique<Replica>();
    rep->rank = r;
    rep->model = std::make_unique<Sequential>(model);
    rep->model->configureLoss(loss_);
    rep->opt = Optimizer::make(optimizer, rep->model->paramCount());
    replicas_.push_back(std::move(rep));
  }
  // Buckets in backward order: from the last layer's parameters towards the first, cut at
  // bucketBytes; a bucket is complete when the lowest layer it touches has finished backward.
  const auto& ranges = replicas_[0]->model->paramRanges();
  const int64_t cap = std::max<int64_t>(1, options_.bucketBytes / static_cast<int64_t>(sizeof(float)));
  int64_t curEnd = -1, curStart = -1;
  size_t curLayer = 0;
  for (auto it = ranges.rbegin(); it != ranges.rend(); ++it) {
    int64_t hi = it->offset + it->count;
    while (hi > it->offset) {
      if (curEnd < 0) curEnd = hi;
      const int64_t room = cap - (curEnd - hi);
      const int64_t lo = std::max(it->offset, hi - room);
      curStart = lo;
      curLayer = it->layer;
      hi = lo;
      if (curEnd - curStart >= cap) {
        buckets_.push_back({curStart, curEnd - curStart, curLayer});
        curEnd = -1;
      }
    }
  }
  if (curEnd >= 0) buckets_.push_back({curStart, curEnd - curStart, curLayer});
  if (options_.devices.kind == DeviceKind::Gpu) startGpu(optimizer);  // throws when the GPUs are not there
  // One compute thread per replica (comm threads mostly sleep while the compute threads work).
  spins_ = spinBudget(n);
  if (n > 1 && !gpu_) allreduce_ = makeAllReduce(options_.allreduce, n);
  readFromOwners_ = allreduce_ && allreduce_->scatters();
  // What one collective call reduces: each bucket when they overlap backward, else the whole buffer.
  if (n > 1 && buckets_.size() > 1) units_ = buckets_;
  else units_ = {{0, replicas_[0]->model->paramCount(), 0}};

  const bool several = n > 1 && buckets_.size() > 1 && !gpu_;
  commThreads_ = several && (options_.bucketComm == BucketComm::Threads ||
                             (options_.bucketComm == BucketComm::Auto && 2 * n <= cores));
  inlineBuckets_ = several && !commThreads_;
  for (auto& rep : replicas_) {
    Replica* p = rep.get();
    if (p->rank > 0) p->compute = std::thread([this, p] { computeLoop(*p); });
    if (commThreads_) p->comm = std::thread([this, p] { commLoop(*p); });
  }
}

MirroredStrategy::~MirroredStrategy() {
  job_ = Job{};
  job_.kind = JobKind::Quit;
  jobGen_.fetch_add(1, std::memory_order_release);
  jobGen_.notify_all();
  for (auto& r : replicas_) {
    if (r->compute.joinable()) r->compute.join();
    if (r->comm.joinable()) {
      r->commGen.store(UINT64_MAX, std::memory_order_release);
      r->commGen.notify_one();
      r->comm.join();
    }
  }
}

std::string MirroredStrategy::threadPolicy() const {
  if (gpu_) return gpu_->threadPolicy();
  const int n = replicas();
  if (n == 1) return "1 replica using " + std::to_string(blasThreads_) + " BLAS thread" + (blasThreads_ == 1 ? "" : "s");
  std::string s = std::to_string(n) + " replicas, one worker thread each, BLAS single-threaded per replica (one core each)";
  if (commThreads_) s += "; a communication thread per replica reduces each gradient bucket while backward goes on";
  if (inlineBuckets_) s += "; no spare core for communication threads, so each replica reduces every gradient bucket itself "
                           "between layers, as soon as backward has completed it";
  return s;
}

double MirroredStrategy::now() const { return static_cast<double>(steadyNs() - t0_) * 1e-9; }

void MirroredStrategy::initialize(uint64_t seed) {
  seed_ = seed;
  for (auto& r : replicas_) r->model->initialize(seed);
  if (gpu_) gpu_->pushParameters();
}

void MirroredStrategy::broadcastParameters() {
  syncFromGpu();
  auto src = replicas_[0]->model->params();
  for (size_t r = 1; r < replicas_.size(); ++r) std::copy(src.begin(), src.end(), replicas_[r]->model->params().begin());
  if (gpu_) gpu_->pushParameters();
}

std::vector<uint64_t> MirroredStrategy::checksums() const {
  syncFromGpu();  // the checksums are of the parameters on the devices
  std::vector<uint64_t> out;
  for (const auto& r : replicas_) out.push_back(r->model->checksum());
  return out;
}

// Replica 0 runs on the calling thread: one hand-off fewer per step, and with one replica
// no hand-off at all. The others are woken through an atomic generation (spin, then sleep).
void MirroredStrategy::runJob(const Job& job) {
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
  if (gpu_) finishGpuJob();  // a GPU failure on any replica throws here, on the caller's thread
}

void MirroredStrategy::runOne(Replica& r, const Job& job) {
  if (gpu_) return runOneOnGpu(r, job);
  if (job.kind == JobKind::Train) trainReplica(r, job);
  else if (job.kind == JobKind::Eval) evalReplica(r, job);
}

void MirroredStrategy::computeLoop(Replica& r) {
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

void MirroredStrategy::commLoop(Replica& r) {
  uint64_t seen = 0;
  const int nb = static_cast<int>(buckets_.size());
  for (;;) {
    spinWaitWhileEqual(r.commGen, seen, std::min(200, spins_));
    seen = r.commGen.load(std::memory_order_acquire);
    if (seen == UINT64_MAX) return;
    auto grads = r.model->grads();
    for (int k = 0; k < nb; ++k) {
      for (int rd = r.ready.load(std::memory_order_acquire); rd <= k; rd = r.ready.load(std::memory_order_acquire))
        spinWaitWhileEqual(r.ready, rd, std::min(200, spins_));
      const Bucket& b = buckets_[static_cast<size_t>(k)];
      auto span = grads.subspan(static_cast<size_t>(b.offset), static_cast<size_t>(b.count));
      if (readFromOwners_) allreduce_->reduceScatter(r.rank, span);
      else allreduce_->allReduce(r.rank, span);
      r.reduced.store(k + 1, std::memory_order_release);
      r.reduced.notify_one();
    }
  }
}

int MirroredStrategy::completeBuckets(size_t layerDone) const {
  int count = 0;
  for (const auto& b : buckets_) {
    if (b.readyAfterLayer >= layerDone) ++count;
    else break;
  }
  return count;
}

void MirroredStrategy::markReady(Replica& r, size_t layerDone) {
  const int count = completeBuckets(layerDone);
  if (count > r.ready.load(std::memory_order_relaxed)) {
    r.ready.store(count, std::memory_order_release);
    r.ready.notify_one();
  }
}

void MirroredStrategy::gather(Replica& r, const Dataset& data, std::span<const int64_t> idx) {
  const int64_t f = data.featureCount(), t = data.targetDim, n = static_cast<int64_t>(idx.size());
  if (static_cast<int64_t>(r.x.size()) < n * f) r.x.resize(static_cast<size_t>(n * f));
  if (static_cast<int64_t>(r.y.size()) < n * t) r.y.resize(static_cast<size_t>(n * t));
  r.ids.assign(idx.begin(), idx.end());
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(r.x.data() + i * f, data.sample(idx[static_cast<size_t>(i)]), static_cast<size_t>(f) * sizeof(float));
    std::memcpy(r.y.data() + i * t, data.target(idx[static_cast<size_t>(i)]), static_cast<size_t>(t) * sizeof(float));
  }
}

void MirroredStrategy::trainReplica(Replica& r, const Job& job) {
  const int n = replicas();
  const bool multi = n > 1;
  // Several buckets: a comm thread reduces each as soon as backward produces it (overlap).
  // One bucket: nothing to overlap, so the compute thread reduces it itself after backward.
  const bool overlap = commThreads_;
  const bool inlineBuckets = inlineBuckets_;
  r.start = now();
  r.phases = {};
  r.lossSum = r.metricSum = 0;
  r.samples = 0;
  r.finite = true;
  r.badWhat.clear();
  Sequential& model = *r.model;
  model.zeroGrads();
  if (overlap) {
    r.ready.store(0, std::memory_order_relaxed);
    r.reduced.store(0, std::memory_order_relaxed);
    r.commGen.fetch_add(1, std::memory_order_release);
    r.commGen.notify_one();
  }
  const int64_t B = static_cast<int64_t>(job.indices.size()), K = job.accumulate;
  const int64_t k = model.outFeatures();
  // With overlap, each layer's gradients are checked for inf/NaN on this thread before its bucket
  // is released to the comm thread (after that the all-reduce owns the buffer).
  bool gradBad = false;
  double lastComputeEnd = r.start;
  r.inlineComm = 0;
  r.inlineDone = 0;
  // Inline: every complete bucket is reduced right here, in the fixed bucket order every replica
  // follows, so the collectives match up; a replica with an empty shard reduces them all after.
  const auto reduceInline = [&](int upTo) {
    for (; r.inlineDone < upTo; ++r.inlineDone) {
      const Bucket& b = buckets_[static_cast<size_t>(r.inlineDone)];
      auto span = model.grads().subspan(static_cast<size_t>(b.offset), static_cast<size_t>(b.count));
      if (readFromOwners_) allreduce_->reduceScatter(r.rank, span);
      else allreduce_->allReduce(r.rank, span);
    }
  };
  const auto onLayer = [&](size_t layer) {
    if (!model.layer(layer).gradientsFinite()) gradBad = true;
    if (inlineBuckets) {
      const double t = now();
      reduceInline(completeBuckets(layer));
      r.inlineComm += now() - t;
    } else {
      markReady(r, layer);
    }
  };
  for (int64_t m = 0; m < K; ++m) {
    const auto [mlo, mhi] = shardRange(B, static_cast<int>(m), static_cast<int>(K));
    const auto [lo, hi] = shardRange(mhi - mlo, r.rank, n);
    const int64_t rows = hi - lo;
    const bool last = m == K - 1;
    if (rows > 0) {
      double t = now();
      gather(r, *job.data, job.indices.subspan(static_cast<size_t>(mlo + lo), static_cast<size_t>(rows)));
      StepContext ctx{true, seed_, job.step, r.ids.data()};
      const float* out = model.forward(r.x.data(), rows, ctx);
      float* dout = model.outputGrad(rows);
      r.lossSum += loss_.compute(out, r.y.data(), rows, k, dout);
      r.metricSum += metricSum(metric_, out, r.y.data(), rows, k, job.data->targetDim);
      r.samples += rows;
      const double t1 = now();
      r.phases.forward += t1 - t;
      model.backward(r.x.data(), rows, ctx,
                     last && (overlap || inlineBuckets) ? std::function<void(size_t)>(onLayer) : std::function<void(size_t)>());
      lastComputeEnd = now();
      r.phases.backward += lastComputeEnd - t1;
    }
    if (last && inlineBuckets && rows == 0 && !model.gradientsFinite()) gradBad = true;
    if (last && overlap) {
      if (rows == 0 && !model.gradientsFinite()) gradBad = true;  // no callbacks ran for this pass
      // Empty shards and parameter-free tails: release every bucket so nobody waits forever.
      r.ready.store(static_cast<int>(buckets_.size()), std::memory_order_release);
      r.ready.notify_one();
    }
  }
  // Checked on the local (pre-reduce) values, so the replica where it appeared is named. The
  // check is backward's work (with overlap it ran layer by layer inside backward already).
  if (!std::isfinite(r.lossSum)) {
    r.finite = false;
    r.badWhat = "loss";
  } else if (overlap || inlineBuckets ? gradBad : !model.gradientsFinite()) {
    r.finite = false;
    r.badWhat = "gradient";
  }
  r.backwardEnd = now();
  r.phases.backward += r.backwardEnd - lastComputeEnd - r.inlineComm;  // collectives are not backward
  if (inlineBuckets) {
    reduceInline(static_cast<int>(buckets_.size()));  // the rest, in order (all of them for an empty shard)
  } else if (overlap) {
    const int nb = static_cast<int>(buckets_.size());
    for (int rd = r.reduced.load(std::memory_order_acquire); rd < nb; rd = r.reduced.load(std::memory_order_acquire))
      spinWaitWhileEqual(r.reduced, rd, std::min(200, spins_));
  } else if (multi) {
    if (readFromOwners_) allreduce_->reduceScatter(r.rank, model.grads());
    else allreduce_->allReduce(r.rank, model.grads());
  }
  r.commEnd = multi ? now() : r.backwardEnd;  // one replica never communicates
  r.phases.optimizer = 0;
  const double t2 = r.commEnd;
  if (readFromOwners_) {
    // Every replica applies the whole update, reading each chunk's summed gradient from its owner
    // (the same bits for everyone); the owners' buffers stay untouched until the next step starts,
    // which waits for every replica to finish this one.
    auto params = model.params();
    r.opt->beginStep(job.lr);
    for (const Bucket& u : units_) {
      const size_t len = static_cast<size_t>(u.count);
      for (int c = 0; c < n; ++c) {
        const size_t a = AllReduce::chunkBegin(len, c, n), b = AllReduce::chunkBegin(len, c + 1, n);
        if (a == b) continue;
        const size_t at = static_cast<size_t>(u.offset) + a;
        const float* src = replicas_[static_cast<size_t>(AllReduce::chunkOwner(c, n))]->model->grads().data() + at;
        r.opt->update(at, params.subspan(at, b - a), std::span<const float>(src, b - a), job.gradScale);
      }
    }
  } else {
    r.opt->step(model.params(), model.grads(), job.gradScale, job.lr);
  }
  r.phases.optimizer = now() - t2;
}

StepResult MirroredStrategy::trainStep(const Dataset& data, std::span<const int64_t> indices, int accumulate, float lr,
                                       uint64_t step) {
  if (indices.empty()) throw UserError("a training step needs at least one sample");
  if (accumulate < 1) throw UserError("accumulate must be at least 1");
  Job job;
  job.kind = JobKind::Train;
  job.data = &data;
  job.indices = indices;
  job.accumulate = accumulate;
  job.lr = lr;
  job.gradScale = 1.0f / static_cast<float>(indices.size());
  job.step = step;
  runJob(job);

  StepResult res;
  double maxBackwardEnd = 0;
  for (const auto& r : replicas_) maxBackwardEnd = std::max(maxBackwardEnd, r->backwardEnd);
  for (const auto& r : replicas_) {
    res.lossSum += r->lossSum;
    res.metricSum += r->metricSum;
    res.samples += r->samples;
    ReplicaStep rs;
    rs.replica = r->rank;
    rs.samples = r->samples;
    rs.start = r->start;
    rs.phases = r->phases;
    const double exposed = std::max(0.0, r->commEnd - r->backwardEnd);
    rs.phases.wait = std::clamp(maxBackwardEnd - r->backwardEnd, 0.0, exposed);
    rs.phases.allreduce = exposed - rs.phases.wait + r->inlineComm;
    res.replicas.push_back(rs);
    if (!r->finite && res.finite) {
      res.finite = false;
      res.badReplica = r->rank;
      res.badWhat = r->badWhat;
    }
  }
  return res;
}

void MirroredStrategy::evalReplica(Replica& r, const Job& job) {
  r.lossSum = r.metricSum = 0;
  r.samples = 0;
  const int64_t N = static_cast<int64_t>(job.indices.size());
  const auto [lo, hi] = shardRange(N, r.rank, replicas());
  const int64_t k = r.model->outFeatures();
  constexpr int64_t kChunk = 1024;
  for (int64_t a = lo; a < hi; a += kChunk) {
    const int64_t rows = std::min(kChunk, hi - a);
    gather(r, *job.data, job.indices.subspan(static_cast<size_t>(a), static_cast<size_t>(rows)));
    StepContext ctx{false, seed_, 0, r.ids.data()};
    const float* out = r.model->forward(r.x.data(), rows, ctx);
    r.lossSum += loss_.compute(out, r.y.data(), rows, k, nullptr);
    r.metricSum += metricSum(metric_, out, r.y.data(), rows, k, job.data->targetDim);
    r.samples += rows;
    if (job.outputs) std::copy(out, out + rows * k, job.outputs + a * k);
  }
}

EvalResult MirroredStrategy::evaluate(const Dataset& data, std::span<const int64_t> indices, float* outputs) {
  Job job;
  job.kind = JobKind::Eval;
  job.data = &data;
  job.indices = indices;
  job.outputs = outputs;
  runJob(job);
  EvalResult res;
  for (const auto& r : replicas_) {
    res.lossSum += r->lossSum;
    res.metricSum += r->metricSum;
    res.samples += r->samples;
  }
  return res;
}

}  // namespace ml
