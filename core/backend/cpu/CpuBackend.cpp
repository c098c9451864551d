// The CPU backend's operations: each is the host layer code of the replica's own model.
#include "backend/cpu/CpuBackend.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>

#include "Error.h"
#include "tensor/Finite.h"

extern "C" void openblas_set_num_threads(int);

namespace ml {

namespace {
double seconds() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

CpuBackend::CpuBackend(std::vector<Sequential*> hosts, const Loss& loss, MetricKind metric, const OptimizerSpec& optimizer,
                       int blasThreads)
    : loss_(loss), metric_(metric), optimizer_(optimizer), blasThreads_(blasThreads) {
  // One replica with several threads splits its own work across a team, each part a single-threaded
  // BLAS call: OpenBLAS' own pool would spin beside the team on the same cores.
  if (hosts.size() == 1 && blasThreads_ > 1) team_ = std::make_unique<ThreadTeam>(blasThreads_);
  openblas_set_num_threads(team_ ? 1 : blasThreads_);
  for (Sequential* m : hosts) {
    auto r = std::make_unique<Replica>();
    r->model = m;
    r->opt = Optimizer::make(optimizer, m->paramCount());
    reps_.push_back(std::move(r));
  }
  caps_.kind = "cpu";
  caps_.deviceNames.assign(reps_.size(), std::string());  // simulated: no device name
  caps_.hostGradients = this;
  caps_.sharded = this;
  const int n = static_cast<int>(reps_.size());
  if (n == 1 && team_)
    caps_.threadPolicy = "1 replica using " + std::to_string(blasThreads_) +
                         " threads: each layer splits its work across them (Dense backward runs its two GEMMs side by side "
                         "where that is faster), BLAS single-threaded in each";
  else if (n == 1)
    caps_.threadPolicy = "1 replica using 1 BLAS thread";
  else
    caps_.threadPolicy =
        std::to_string(n) + " replicas, one worker thread each, BLAS single-threaded per replica (one core each)";
}

void CpuBackend::prepare(int r, int micro, int64_t, int64_t targetDim, bool training) {
  Replica& p = rep(r);
  p.targetDim = targetDim;
  p.micro.assign(static_cast<size_t>(4 * micro), 0.0);
  if (!training) return;
  p.sums = {};
  p.model->discardGrads();  // the first backward writes them
}

void CpuBackend::mark(int r, Mark m, int micro) {
  Replica& p = rep(r);
  const double t = seconds();
  const size_t i = static_cast<size_t>(4 * micro);
  switch (m) {
    case Mark::StepStart: p.start = t; break;
    case Mark::MicroStart: p.micro[i] = t; break;
    case Mark::InputEnd: p.micro[i + 1] = t; break;
    case Mark::ForwardEnd: p.micro[i + 2] = t; break;
    case Mark::BackwardEnd: p.micro[i + 3] = t; break;
    case Mark::CommEnd: p.commEnd = t; break;
    case Mark::UpdateEnd: p.updateEnd = t; break;
  }
}

void CpuBackend::stage(int r, const Dataset& data, std::span<const int64_t> idx) {
  Replica& p = rep(r);
  const int64_t f = data.featureCount(), t = data.targetDim, n = static_cast<int64_t>(idx.size());
  if (static_cast<int64_t>(p.x.size()) < n * f) p.x.resize(static_cast<size_t>(n * f));
  if (static_cast<int64_t>(p.y.size()) < n * t) p.y.resize(static_cast<size_t>(n * t));
  p.ids.assign(idx.begin(), idx.end());
  auto rows = [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      std::memcpy(p.x.data() + i * f, data.sample(idx[static_cast<size_t>(i)]), static_cast<size_t>(f) * sizeof(float));
      std::memcpy(p.y.data() + i * t, data.target(idx[static_cast<size_t>(i)]), static_cast<size_t>(t) * sizeof(float));
    }
  };
  // One replica on several cores copies its batch on all of them, as N replicas copy theirs: the
  // copy runs at the memory bandwidth one core gets, so a team copies it faster.
  if (team_ && n >= 16 * team_->size())
    team_->split(n, rows);
  else
    rows(0, n);
}

void CpuBackend::forwardLoss(int r, int, int64_t rows, const StepContext& ctx) {
  Replica& p = rep(r);
  StepContext c = ctx;
  c.sampleIds = p.ids.data();
  const int64_t k = p.model->outFeatures();
  ThreadTeam::Scope team(team_.get());
  const float* out = p.model->forward(p.x.data(), rows, c);
  float* dout = p.model->outputGrad(rows);
  p.sums.lossSum += loss_.compute(out, p.y.data(), rows, k, dout);
  if (p.lossScale != 1.0f)
    for (int64_t i = 0; i < rows * k; ++i) dout[i] *= p.lossScale;
  p.sums.metricSum += metricSum(metric_, out, p.y.data(), rows, k, p.targetDim);
}

void CpuBackend::backward(int r, int64_t rows, const StepContext& ctx, const std::function<void(size_t)>& onLayerDone) {
  Replica& p = rep(r);
  StepContext c = ctx;
  c.sampleIds = p.ids.data();
  ThreadTeam::Scope team(team_.get());
  if (!onLayerDone) return p.model->backward(p.x.data(), rows, c);
  if (!layerChecks_) return p.model->backward(p.x.data(), rows, c, onLayerDone);
  // Checked on this thread before the bucket is released: after that the collective owns it.
  p.model->backward(p.x.data(), rows, c, [&](size_t layer) {
    if (!p.model->layer(layer).gradientsFinite()) p.sums.gradientsFinite = false;
    onLayerDone(layer);
  });
}

void CpuBackend::checkGradients(int r) {
  rep(r).model->settleGrads();  // no backward ran this step: the gradients are zero
  if (!rep(r).model->gradientsFinite()) rep(r).sums.gradientsFinite = false;
}

bool CpuBackend::reducedFinite(int, int64_t offset, int64_t count, int from) {
  return allFinite(rep(from).model->grads().data() + offset, static_cast<size_t>(count));
}

size_t CpuBackend::stateOffset(const Replica& p, int64_t offset) const {
  if (p.stateAt.empty()) return static_cast<size_t>(offset);
  // Sharded: where this owned range's state starts in the compact slots.
  auto it = std::upper_bound(p.stateAt.begin(), p.stateAt.end(), std::pair{offset, INT64_MAX});
  if (it == p.stateAt.begin()) throw UserError("internal: update of a range this replica does not own");
  --it;
  return static_cast<size_t>(it->second + (offset - it->first));
}

void CpuBackend::update(int r, int64_t offset, int64_t count, int from, float gradScale) {
  Replica& p = rep(r);
  const size_t at = static_cast<size_t>(offset);
  const float* g = rep(from).model->grads().data() + at;
  const size_t state = stateOffset(p, offset);
  // Element-wise: any split across the team gives the same bits. With the checks, each tile of the
  // gradient is checked and then used while it is in the cache.
  std::atomic<bool> bad{false};
  const int64_t tile = updateChecks_ ? 4096 : std::max<int64_t>(count, 1);
  auto part = [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; t += tile) {
      const size_t a = static_cast<size_t>(t), m = static_cast<size_t>(std::min(tile, hi - t));
      if (updateChecks_ && !allFinite(g + a, m)) bad.store(true, std::memory_order_relaxed);
      p.opt->update(state + a, p.model->params().subspan(at + a, m), std::span<const float>(g + a, m), gradScale);
    }
  };
  if (team_ && count >= 4096)
    team_->split(count, part);
  else
    part(0, count);
  if (bad.load(std::memory_order_relaxed)) p.sums.gradientsFinite = false;
}

// Each replica's optimizer is remade over its owned ranges alone, laid end to end: 1/N of the
// state (Adam's m and v) per replica. Done before the first step, so no state is lost.
void CpuBackend::shard(const std::vector<std::vector<GradBucket>>& owned) {
  for (size_t r = 0; r < reps_.size(); ++r) {
    Replica& p = *reps_[r];
    std::vector<GradBucket> ranges = owned[r];
    std::sort(ranges.begin(), ranges.end(), [](const GradBucket& a, const GradBucket& b) { return a.offset < b.offset; });
    p.stateAt.clear();
    int64_t total = 0;
    for (const GradBucket& b : ranges) {
      p.stateAt.emplace_back(b.offset, total);
      total += b.count;
    }
    p.opt = Optimizer::make(optimizer_, total);
    if (p.stateAt.empty()) p.stateAt.emplace_back(INT64_MAX, 0);  // owns nothing: still sharded
  }
}

void CpuBackend::gatherParameters(int r, int64_t offset, int64_t count, int from) {
  const float* src = rep(from).model->params().data() + offset;
  std::copy(src, src + count, rep(r).model->params().data() + offset);
}

// 4096 floats: the sum (16 KiB) and the tile of parameters it updates stay in L1/L2 between the
// three passes. Every replica has its own thread here (several replicas: no team).
void CpuBackend::sumUpdatePush(int r, int64_t offset, int64_t count, std::span<const int> from, float gradScale, uint8_t* bad,
                               double& sum, double& push) {
  constexpr int64_t kTile = 4096;
  constexpr int kMost = 64;
  Replica& p = rep(r);
  const size_t state = stateOffset(p, offset);
  const int n = static_cast<int>(from.size());
  if (n < 1 || n > kMost) throw UserError("internal: the fused exchange takes 1 to 64 replicas");
  const float* src[kMost];
  int32_t srcBad[kMost] = {};
  float* peers[kMost];
  int np = 0;
  for (int i = 0; i < n; ++i) src[i] = rep(from[static_cast<size_t>(i)]).model->grads().data() + offset;
  for (int q = 0; q < static_cast<int>(reps_.size()); ++q)
    if (q != r) peers[np++] = rep(q).model->params().data() + offset;
  float* params = p.model->params().data() + offset;
  alignas(64) float acc[kTile];
  using Clock = std::chrono::steady_clock;
  Clock::duration tSum{}, tPush{};
  for (int64_t t = 0; t < count; t += kTile) {
    const int64_t m = std::min(kTile, count - t);
    const auto t0 = Clock::now();
    {
      const float* __restrict s0 = src[0] + t;
      int32_t b = 0;
      for (int64_t i = 0; i < m; ++i) {
        b |= nonFiniteBit(s0[i]);
        acc[i] = s0[i];
      }
      srcBad[0] |= b;
    }
    for (int k = 1; k < n; ++k) {  // acc = x_k + acc: IEEE addition commutes, so these are the ring's bits
      const float* __restrict s = src[k] + t;
      int32_t b = 0;
      for (int64_t i = 0; i < m; ++i) {
        b |= nonFiniteBit(s[i]);
        acc[i] = s[i] + acc[i];
      }
      srcBad[k] |= b;
    }
    const auto t1 = Clock::now();
    p.opt->update(state + static_cast<size_t>(t), std::span<float>(params + t, static_cast<size_t>(m)),
                  std::span<const float>(acc, static_cast<size_t>(m)), gradScale);
    const auto t2 = Clock::now();
    for (int q = 0; q < np; ++q) std::copy(params + t, params + t + m, peers[q] + t);
    tSum += t1 - t0;
    tPush += Clock::now() - t2;
  }
  for (int i = 0; i < n; ++i)
    if (srcBad[i]) bad[from[static_cast<size_t>(i)]] = 1;
  sum += std::chrono::duration<double>(tSum).count();
  push += std::chrono::duration<double>(tPush).count();
}

ReplicaSums CpuBackend::finishStep(int r, int) { return rep(r).sums; }

ReplicaTimes CpuBackend::times(int r, int micro) {
  const Replica& p = rep(r);
  ReplicaTimes t;
  for (int m = 0; m < micro; ++m) {
    const double* e = p.micro.data() + 4 * m;
    t.phases.input += e[1] - e[0];
    t.phases.forward += e[2] - e[1];
    t.phases.backward += e[3] - e[2];
  }
  t.backwardEnd = p.micro[static_cast<size_t>(4 * micro - 1)] - p.start;
  t.commEnd = p.commEnd - p.start;
  t.phases.optimizer = p.updateEnd - p.commEnd;
  return t;
}

void CpuBackend::evaluate(int r, int64_t rows, const StepContext& ctx, float* outputs, double& lossSum, double& metricSum) {
  Replica& p = rep(r);
  StepContext c = ctx;
  c.sampleIds = p.ids.data();
  const int64_t k = p.model->outFeatures();
  ThreadTeam::Scope team(team_.get());
  const float* out = p.model->forward(p.x.data(), rows, c);
  lossSum += loss_.compute(out, p.y.data(), rows, k, nullptr);
  metricSum += ml::metricSum(metric_, out, p.y.data(), rows, k, p.targetDim);
  if (outputs) std::copy(out, out + rows * k, outputs);
}

}  // namespace ml
