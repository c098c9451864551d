// The GPU replicas of the mirrored step. One step, per replica thread r (the strategy's own threads):
//   A. stage each micro-batch shard (gather on the host, copy to the device), forward, loss and
//      metric, backward; on the last micro-batch each layer's gradients are counted for inf/NaN and
//      the buckets that layer completes get an event on the compute stream;
//   barrier; replica 0's thread enqueues the all-reduce of every bucket, in order, on the comm
//      streams (each waits for its bucket's events, so it overlaps the rest of backward on the GPU);
//   barrier; B. the compute stream waits for the all-reduce, the fused optimizer runs, and one copy
//      brings back the loss, metric and non-finite count (which also waits for the step to end).
// Phase times come from CUDA events on the compute stream, placed on the host clock by the step's
// first event (recorded on an idle stream at the host time the strategy notes as the step's start).
#include "distribute/GpuReplicas.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "Error.h"
#include "backend/CudaPlugin.h"
#include "backend/DeviceProbe.h"
#include "distribute/MirroredStrategy.h"
#include "nn/Dense.h"
#include "nn/SimpleLayers.h"

namespace ml {

namespace {
void ok(const mlcuda_status& s) { throwIfFailed(s); }

std::string plural(int64_t n, const char* word) { return std::to_string(n) + " " + word + (n == 1 ? "" : "s"); }
}  // namespace

// One layer as the GPU runs it (translated once from the host model).
struct GpuReplicas::Layer {
  enum class Kind { Dense, Activation, Flatten, Dropout } kind = Kind::Flatten;
  int64_t in = 0, out = 0;
  int act = MLCUDA_ACT_LINEAR;
  bool bias = false;
  bool fusedSoftmax = false;    // the loss gives d/d(softmax input) (as Sequential::configureLoss decides)
  double rate = 0;
  uint64_t salt = 0;
  int64_t offset = 0, count = 0;  // parameters in the flat buffers
  bool needsInputGrad = false;    // a layer below has parameters
};

struct GpuReplicas::Replica {
  int rank = 0, device = 0;
  std::string label;
  mlcuda_context* ctx = nullptr;
  float* params = nullptr;
  float* grads = nullptr;
  float* slot1 = nullptr;  // Adam m, SGD velocity, RMSprop v
  float* slot2 = nullptr;  // Adam v, RMSprop momentum
  int64_t iterations = 0;
  // Batch buffers, grown on demand.
  int64_t capRows = 0, capTargets = 0;
  float* x = nullptr;
  float* y = nullptr;
  int64_t* ids = nullptr;
  std::vector<float*> acts, dacts;
  std::vector<uint8_t*> masks;
  std::vector<const float*> out;  // each layer's output in the last forward
  // Per step: [loss_0, metric_0, ..., loss_{K-1}, metric_{K-1}, non-finite count] as 8-byte words.
  double* words = nullptr;
  int64_t capWords = 0;
  std::vector<double> hostWords;
  // Events: the step's start, three per micro-batch (start, forward end, backward end), one per
  // bucket, the all-reduce done (comm stream), the compute stream past it, the optimizer's end.
  mlcuda_event* start = nullptr;
  std::vector<mlcuda_event*> micro, bucket;
  mlcuda_event* commDone = nullptr;
  mlcuda_event* commEnd = nullptr;
  mlcuda_event* optEnd = nullptr;
  std::vector<float> hx, hy, hostSlot1, hostSlot2;
  std::vector<int64_t> hids;
};

GpuReplicas::GpuReplicas(const DeviceList& devices, std::vector<Sequential*> hosts, const Loss& loss, MetricKind metric,
                         const OptimizerSpec& optimizer, std::vector<GpuBucket> buckets)
    : hosts_(std::move(hosts)), buckets_(std::move(buckets)), loss_(loss), metric_(metric), opt_(optimizer),
      logical_(devices.logical), barrier_(devices.size()) {
  // Which GPUs exist: the probe's words when there are none, the machine's GPUs when one is missing.
  const DeviceReport report = probeDevices();
  if (report.gpus.empty())
    throw UserError("device list '" + devices.spec + "' asks for GPUs, but this machine has none usable: " +
                    report.noGpuReason + ". Use cpu:N (simulated CPU devices), e.g. --devices cpu:2");
  std::string have;
  for (const auto& g : report.gpus) {
    have += (have.empty() ? "" : ", ") + ("gpu:" + std::to_string(g.index)) + " " + g.name;
    gpuNames_.push_back(g.name);
  }
  const int count = static_cast<int>(report.gpus.size());
  for (const auto& d : devices.devices) {
    if (d.physical >= count)
      throw UserError("gpu:" + std::to_string(d.physical) + " does not exist: this machine has " + plural(count, "GPU") + " (" +
                      have + "); use gpu:0" + (count > 1 ? "..gpu:" + std::to_string(count - 1) : std::string()) + " or cpu:N");
    const GpuInfo& g = report.gpus[static_cast<size_t>(d.physical)];
    if (g.ccMajor < 8)
      throw UserError("gpu:" + std::to_string(d.physical) + " (" + g.name + ") has compute capability " + std::to_string(g.ccMajor) +
                      "." + std::to_string(g.ccMinor) + ", but the CUDA plugin is built for 8.0 and 9.0 (A100, H100/H200): use cpu:N");
  }
  std::string why;
  P_ = cudaPlugin(&why);
  if (!P_) throw UserError("GPU devices need the CUDA plugin: " + why);

  // The layers, from replica 0's host model (configureLoss has run, so the loss knows about fusion).
  Sequential& m = *hosts_.at(0);
  paramCount_ = m.paramCount();
  inFeatures_ = m.inFeatures();
  outFeatures_ = m.outFeatures();
  std::vector<int64_t> offsets(m.layerCount(), 0);
  for (const auto& r : m.paramRanges()) offsets[r.layer] = r.offset;
  bool below = false;
  for (size_t i = 0; i < m.layerCount(); ++i) {
    ml::Layer& src = m.layer(i);
    auto l = std::make_unique<Layer>();
    l->in = src.inFeatures();
    l->out = src.outFeatures();
    l->offset = offsets[i];
    l->count = src.paramCount();
    l->needsInputGrad = below;
    const bool lastLayer = i + 1 == m.layerCount();
    if (auto* d = dynamic_cast<Dense*>(&src)) {
      l->kind = Layer::Kind::Dense;
      l->act = static_cast<int>(d->activation());
      l->bias = d->bias() != nullptr;
      l->fusedSoftmax = lastLayer && loss_.fusedSoftmax() && d->activation() == Act::Softmax;
    } else if (auto* a = dynamic_cast<ActivationLayer*>(&src)) {
      l->kind = Layer::Kind::Activation;
      l->act = static_cast<int>(a->activation());
      l->fusedSoftmax = lastLayer && loss_.fusedSoftmax() && a->activation() == Act::Softmax;
    } else if (dynamic_cast<Flatten*>(&src)) {
      l->kind = Layer::Kind::Flatten;
    } else if (auto* dr = dynamic_cast<Dropout*>(&src)) {
      l->kind = Layer::Kind::Dropout;
      l->rate = dr->rate();
      l->salt = dr->salt();
    } else {
      throw UserError("layer '" + src.name + "' (" + src.type() +
                      ") has no GPU implementation yet: train this model on CPU devices (--devices cpu:N)");
    }
    if (src.paramCount() > 0) below = true;
    layers_.push_back(std::move(l));
  }

  try {
    for (int r = 0; r < devices.size(); ++r) {
      const Device& d = devices.devices[static_cast<size_t>(r)];
      auto rep = std::make_unique<Replica>();
      rep->rank = r;
      rep->device = d.physical;
      rep->label = d.label();
      Replica& p = *rep;
      reps_.push_back(std::move(rep));  // owned from here on, so destroy() frees whatever follows
      ok(P_->contextCreate(p.device, p.label.c_str(), 0, &p.ctx));
      const size_t bytes = static_cast<size_t>(paramCount_) * sizeof(float);
      auto alloc = [&](float*& f) {
        void* q = nullptr;
        ok(P_->allocate(p.ctx, bytes, &q));
        f = static_cast<float*>(q);
        if (f) ok(P_->fillZero(p.ctx, f, bytes));
      };
      alloc(p.params);
      alloc(p.grads);
      const bool two = opt_.name == "adam" || (opt_.name == "rmsprop" && opt_.momentum != 0.0);
      const bool one = opt_.name != "sgd" || opt_.momentum != 0.0;
      if (one) alloc(p.slot1);
      if (two) alloc(p.slot2);
      ok(P_->eventCreate(p.ctx, &p.start));
      ok(P_->eventCreate(p.ctx, &p.commDone));
      ok(P_->eventCreate(p.ctx, &p.commEnd));
      ok(P_->eventCreate(p.ctx, &p.optEnd));
      p.bucket.assign(buckets_.size(), nullptr);
      for (auto& e : p.bucket) ok(P_->eventCreate(p.ctx, &e));
      p.acts.assign(layers_.size(), nullptr);
      p.dacts.assign(layers_.size(), nullptr);
      p.masks.assign(layers_.size(), nullptr);
      p.out.assign(layers_.size(), nullptr);
      ok(P_->synchronize(p.ctx));
    }
    if (reps_.size() > 1 && !logical_) {
      std::vector<int> ids;
      for (const auto& r : reps_) ids.push_back(r->device);
      ok(P_->ncclCreate(ids.data(), static_cast<int>(ids.size()), &nccl_));
    }
  } catch (...) {
    destroy();
    throw;
  }
}

GpuReplicas::~GpuReplicas() { destroy(); }

void GpuReplicas::destroy() {
  if (!P_) return;
  // Teardown reports nothing: it also runs after a failure, and there is nothing left to do about one.
  if (nccl_) P_->ncclDestroy(nccl_);
  nccl_ = nullptr;
  for (auto& rp : reps_) {
    Replica& r = *rp;
    if (!r.ctx) continue;
    P_->synchronize(r.ctx);
    auto freeIt = [&](void* p) {
      if (p) P_->release(r.ctx, p);
    };
    freeIt(r.params);
    freeIt(r.grads);
    freeIt(r.slot1);
    freeIt(r.slot2);
    freeIt(r.x);
    freeIt(r.y);
    freeIt(r.ids);
    freeIt(r.words);
    for (size_t i = 0; i < r.acts.size(); ++i) {
      freeIt(r.acts[i]);
      freeIt(r.dacts[i]);
      freeIt(r.masks[i]);
    }
    for (mlcuda_event* e : {r.start, r.commDone, r.commEnd, r.optEnd}) P_->eventDestroy(e);
    for (mlcuda_event* e : r.micro) P_->eventDestroy(e);
    for (mlcuda_event* e : r.bucket) P_->eventDestroy(e);
    P_->contextDestroy(r.ctx);
    r.ctx = nullptr;
  }
  reps_.clear();
}

std::string GpuReplicas::allReduceName() const {
  if (reps_.size() == 1) return "none (one replica)";
  return logical_ ? "device-memory" : "nccl";
}

std::string GpuReplicas::allReducePath() const {
  const int n = replicas();
  if (n == 1) return "none (one replica)";
  if (logical_)
    return "logical GPUs share GPU " + std::to_string(reps_[0]->device) +
           ": NCCL refuses two ranks on one GPU, so Mirrorlab's device-memory all-reduce is used";
  std::string list;
  for (const auto& r : reps_) list += (list.empty() ? "" : ",") + r->label;
  return "NCCL over " + std::to_string(n) + " GPUs (" + list + "), one communicator, grouped per bucket";
}

std::string GpuReplicas::threadPolicy() const {
  return replicas() == 1 ? "one host thread enqueuing on the GPU's compute and comm streams"
                         : "one host thread per replica, each enqueuing on its own compute and comm streams";
}

std::string GpuReplicas::deviceName(int r) const {
  const int d = reps_[static_cast<size_t>(r)]->device;
  return d < static_cast<int>(gpuNames_.size()) ? gpuNames_[static_cast<size_t>(d)] : std::string();
}

void GpuReplicas::pushParameters() {
  for (size_t r = 0; r < reps_.size(); ++r) {
    auto p = hosts_[r]->params();
    ok(P_->copyToDevice(reps_[r]->ctx, reps_[r]->params, p.data(), p.size() * sizeof(float)));
  }
  paramsNewer_.store(false);
}

void GpuReplicas::pullParameters() {
  if (!paramsNewer_.load()) return;
  for (size_t r = 0; r < reps_.size(); ++r) {
    auto p = hosts_[r]->params();
    ok(P_->copyToHost(reps_[r]->ctx, p.data(), reps_[r]->params, p.size() * sizeof(float)));
  }
  paramsNewer_.store(false);
}

std::vector<std::span<const float>> GpuReplicas::optimizerSlots(int r) {
  Replica& rep = *reps_[static_cast<size_t>(r)];
  const size_t n = static_cast<size_t>(paramCount_);
  auto get = [&](float* dev, std::vector<float>& host) {
    host.assign(dev ? n : 0, 0.0f);
    if (dev) ok(P_->copyToHost(rep.ctx, host.data(), dev, n * sizeof(float)));
  };
  get(rep.slot1, rep.hostSlot1);
  get(rep.slot2, rep.hostSlot2);
  // The order of Optimizer::stateBuffers: SGD {velocity}, Adam {m, v}, RMSprop {v, momentum}.
  if (opt_.name == "sgd") return {rep.hostSlot1};
  return {rep.hostSlot1, rep.hostSlot2};
}

void GpuReplicas::fail(const std::string& message) {
  std::lock_guard lock(failMu_);
  if (failure_.empty()) failure_ = message.empty() ? "GPU step failed" : message;
  failed_.store(true, std::memory_order_release);
}

std::string GpuReplicas::takeFailure() {
  std::lock_guard lock(failMu_);
  std::string f = std::move(failure_);
  failure_.clear();
  failed_.store(false, std::memory_order_release);
  return f;
}

void GpuReplicas::ensureCapacity(Replica& rep, int64_t rows, int64_t targetDim) {
  rows = std::max<int64_t>(rows, 1);
  if (rows <= rep.capRows && rows * targetDim <= rep.capTargets) return;
  const int64_t cap = std::max(rows, rep.capRows);
  const int64_t targets = std::max(cap * targetDim, rep.capTargets);
  ok(P_->synchronize(rep.ctx));  // work in flight may still read the old buffers
  auto regrow = [&](auto*& p, size_t bytes) {
    if (p) ok(P_->release(rep.ctx, p));
    p = nullptr;
    void* q = nullptr;
    ok(P_->allocate(rep.ctx, bytes, &q));
    p = static_cast<std::remove_reference_t<decltype(p)>>(q);
  };
  regrow(rep.x, static_cast<size_t>(cap * inFeatures_) * sizeof(float));
  regrow(rep.y, static_cast<size_t>(targets) * sizeof(float));
  regrow(rep.ids, static_cast<size_t>(cap) * sizeof(int64_t));
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = *layers_[i];
    const size_t elems = static_cast<size_t>(cap * l.out);
    if (l.kind != Layer::Kind::Flatten) regrow(rep.acts[i], elems * sizeof(float));
    regrow(rep.dacts[i], elems * sizeof(float));
    if (l.kind == Layer::Kind::Dropout) regrow(rep.masks[i], elems);
  }
  rep.capRows = cap;
  rep.capTargets = targets;
}

void GpuReplicas::ensureStepBuffers(Replica& rep, int accumulate) {
  const int64_t words = 2 * static_cast<int64_t>(accumulate) + 1;
  if (words > rep.capWords) {
    ok(P_->synchronize(rep.ctx));
    if (rep.words) ok(P_->release(rep.ctx, rep.words));
    rep.words = nullptr;
    void* q = nullptr;
    ok(P_->allocate(rep.ctx, static_cast<size_t>(words) * sizeof(double), &q));
    rep.words = static_cast<double*>(q);
    rep.capWords = words;
  }
  while (rep.micro.size() < static_cast<size_t>(3 * accumulate)) {
    mlcuda_event* e = nullptr;
    ok(P_->eventCreate(rep.ctx, &e));
    rep.micro.push_back(e);
  }
}

// Gathers the shard's rows on the host and copies them to the device (the copy waits for the
// compute stream, so the previous micro-batch's backward no longer reads x).
void GpuReplicas::stage(Replica& rep, const Dataset& data, std::span<const int64_t> idx, bool withIds) {
  const int64_t f = data.featureCount(), t = data.targetDim, n = static_cast<int64_t>(idx.size());
  rep.hx.resize(static_cast<size_t>(n * f));
  rep.hy.resize(static_cast<size_t>(n * t));
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(rep.hx.data() + i * f, data.sample(idx[static_cast<size_t>(i)]), static_cast<size_t>(f) * sizeof(float));
    std::memcpy(rep.hy.data() + i * t, data.target(idx[static_cast<size_t>(i)]), static_cast<size_t>(t) * sizeof(float));
  }
  ok(P_->copyToDevice(rep.ctx, rep.x, rep.hx.data(), rep.hx.size() * sizeof(float)));
  ok(P_->copyToDevice(rep.ctx, rep.y, rep.hy.data(), rep.hy.size() * sizeof(float)));
  if (withIds) {
    rep.hids.assign(idx.begin(), idx.end());
    ok(P_->copyToDevice(rep.ctx, rep.ids, rep.hids.data(), rep.hids.size() * sizeof(int64_t)));
  }
}

// Sequential::forward on the device: a Flatten passes its input on, every other layer writes its own buffer.
const float* GpuReplicas::forward(Replica& rep, int64_t rows, bool training, uint64_t seed, uint64_t step) {
  const float* in = rep.x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = *layers_[i];
    float* y = rep.acts[i];
    switch (l.kind) {
      case Layer::Kind::Flatten: rep.out[i] = in; break;
      case Layer::Kind::Dense:
        ok(P_->denseForward(rep.ctx, in, rep.params + l.offset, l.bias ? rep.params + l.offset + l.in * l.out : nullptr, y,
                            rows, l.in, l.out, l.act));
        rep.out[i] = y;
        break;
      case Layer::Kind::Activation:
        ok(P_->activationForward(rep.ctx, l.act, in, y, rows, l.out));
        rep.out[i] = y;
        break;
      case Layer::Kind::Dropout:
        ok(P_->dropoutForward(rep.ctx, in, y, rep.masks[i], rows, l.out, l.rate, seed, l.salt, step, rep.ids, training ? 1 : 0));
        rep.out[i] = y;
        break;
    }
    in = rep.out[i];
  }
  return in;
}

void GpuReplicas::backward(Replica& rep, int64_t rows, bool last, unsigned long long* nonfinite, size_t& signalled) {
  float* dy = rep.dacts.back();
  for (size_t i = layers_.size(); i-- > 0;) {
    const Layer& l = *layers_[i];
    const float* in = i == 0 ? rep.x : rep.out[i - 1];
    float* dx = nullptr;
    if (l.needsInputGrad) dx = l.kind == Layer::Kind::Flatten ? dy : rep.dacts[i - 1];
    switch (l.kind) {
      case Layer::Kind::Flatten: break;
      case Layer::Kind::Dense:
        ok(P_->denseBackward(rep.ctx, in, rep.params + l.offset, rep.out[i], dy, dx, rep.grads + l.offset,
                             l.bias ? rep.grads + l.offset + l.in * l.out : nullptr, rows, l.in, l.out, l.act,
                             l.fusedSoftmax ? 1 : 0));
        break;
      case Layer::Kind::Activation:
        if (!dx) break;
        if (l.fusedSoftmax && l.act == MLCUDA_ACT_SOFTMAX)
          ok(P_->copyOnDevice(rep.ctx, dx, dy, static_cast<size_t>(rows * l.out) * sizeof(float)));
        else
          ok(P_->activationBackward(rep.ctx, l.act, rep.out[i], dy, dx, rows, l.out));
        break;
      case Layer::Kind::Dropout:
        if (dx) ok(P_->dropoutBackward(rep.ctx, dy, dx, rep.masks[i], rows * l.out, l.rate, 1));
        break;
    }
    if (last && l.count > 0) {
      // Counted before the bucket is released: after that the all-reduce owns the buffer.
      ok(P_->countNonfinite(rep.ctx, rep.grads + l.offset, l.count, nonfinite));
      if (reps_.size() > 1) {
        for (; signalled < buckets_.size() && buckets_[signalled].readyAfterLayer >= i; ++signalled)
          ok(P_->eventRecord(rep.ctx, MLCUDA_STREAM_COMPUTE, rep.bucket[signalled]));
      }
    }
    if (!l.needsInputGrad) break;
    dy = dx;
  }
}

// Replica 0's thread, between the barriers (every other replica waits): the buckets in their fixed
// order, each after its events on every replica.
void GpuReplicas::allReduce() {
  const int n = replicas();
  std::vector<float*> bufs(static_cast<size_t>(n));
  std::vector<mlcuda_event*> ready(static_cast<size_t>(n));
  std::vector<mlcuda_context*> ctxs(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) ctxs[static_cast<size_t>(r)] = reps_[static_cast<size_t>(r)]->ctx;
  for (size_t k = 0; k < buckets_.size(); ++k) {
    const GpuBucket& b = buckets_[k];
    for (int r = 0; r < n; ++r) {
      bufs[static_cast<size_t>(r)] = reps_[static_cast<size_t>(r)]->grads + b.offset;
      ready[static_cast<size_t>(r)] = reps_[static_cast<size_t>(r)]->bucket[k];
    }
    if (logical_) {
      ok(P_->localAllReduce(reps_[0]->ctx, bufs.data(), n, b.count, ready.data(), n, nullptr));
    } else {
      for (int r = 0; r < n; ++r) ok(P_->streamWaitEvent(ctxs[static_cast<size_t>(r)], MLCUDA_STREAM_COMM, ready[static_cast<size_t>(r)]));
      ok(P_->ncclAllReduce(nccl_, ctxs.data(), bufs.data(), b.count));
    }
  }
  if (logical_) ok(P_->eventRecord(reps_[0]->ctx, MLCUDA_STREAM_COMM, reps_[0]->commDone));
  else
    for (auto& r : reps_) ok(P_->eventRecord(r->ctx, MLCUDA_STREAM_COMM, r->commDone));
}

void GpuReplicas::optimizerStep(Replica& rep, float gradScale, float lr) {
  ++rep.iterations;
  const std::string& name = opt_.name;
  if (name == "sgd")
    ok(P_->sgdStep(rep.ctx, rep.params, rep.grads, rep.slot1, paramCount_, gradScale, lr, static_cast<float>(opt_.momentum),
                   opt_.nesterov ? 1 : 0));
  else if (name == "adam")
    ok(P_->adamStep(rep.ctx, rep.params, rep.grads, rep.slot1, rep.slot2, paramCount_, gradScale, lr, opt_.beta1, opt_.beta2,
                    static_cast<float>(opt_.epsilon), rep.iterations));
  else if (name == "rmsprop")
    ok(P_->rmspropStep(rep.ctx, rep.params, rep.grads, rep.slot1, rep.slot2, paramCount_, gradScale, lr,
                       static_cast<float>(opt_.rho), static_cast<float>(opt_.momentum), static_cast<float>(opt_.epsilon)));
  else
    throw UserError("optimizer '" + name + "' has no GPU implementation (sgd, adam, rmsprop)");
}

void GpuReplicas::train(int r, const GpuStepArgs& a, GpuReplicaResult& res) {
  Replica& rep = *reps_[static_cast<size_t>(r)];
  const int n = replicas();
  const int K = a.accumulate;
  const int64_t B = static_cast<int64_t>(a.indices.size());
  res = GpuReplicaResult{};
  unsigned long long* nonfinite = nullptr;
  // A. Forward and backward of every micro-batch, on the compute stream.
  try {
    // The stream is idle here (the last job ended with a copy to the host), so this event marks
    // the host time the strategy noted as the step's start: phase times are placed from it.
    ok(P_->eventRecord(rep.ctx, MLCUDA_STREAM_COMPUTE, rep.start));
    int64_t most = 0;
    for (int m = 0; m < K; ++m) {
      const auto [mlo, mhi] = shardRange(B, m, K);
      const auto [lo, hi] = shardRange(mhi - mlo, r, n);
      most = std::max(most, hi - lo);
    }
    ensureCapacity(rep, most, a.data->targetDim);
    ensureStepBuffers(rep, K);
    nonfinite = reinterpret_cast<unsigned long long*>(rep.words + 2 * K);
    ok(P_->fillZero(rep.ctx, rep.grads, static_cast<size_t>(paramCount_) * sizeof(float)));
    ok(P_->fillZero(rep.ctx, rep.words, static_cast<size_t>(2 * K + 1) * sizeof(double)));
    size_t signalled = 0;
    for (int m = 0; m < K; ++m) {
      const auto [mlo, mhi] = shardRange(B, m, K);
      const auto [lo, hi] = shardRange(mhi - mlo, r, n);
      const int64_t rows = hi - lo;
      const bool last = m == K - 1;
      mlcuda_event* const* ev = rep.micro.data() + 3 * m;
      ok(P_->eventRecord(rep.ctx, MLCUDA_STREAM_COMPUTE, ev[0]));
      if (rows > 0) {
        stage(rep, *a.data, a.indices.subspan(static_cast<size_t>(mlo + lo), static_cast<size_t>(rows)), true);
        const float* pred = forward(rep, rows, true, a.seed, a.step);
        ok(P_->loss(rep.ctx, static_cast<int>(loss_.kind()), loss_.fromLogits() ? 1 : 0, loss_.fusedSoftmax() ? 1 : 0, pred,
                    rep.y, rows, outFeatures_, rep.dacts.back(), rep.words + 2 * m));
        if (metric_ != MetricKind::None)
          ok(P_->metricSum(rep.ctx, static_cast<int>(metric_), pred, rep.y, rows, outFeatures_, a.data->targetDim,
                           rep.words + 2 * m + 1));
        res.samples += rows;
      }
      ok(P_->eventRecord(rep.ctx, MLCUDA_STREAM_COMPUTE, ev[1]));
      if (rows > 0) backward(rep, rows, last, nonfinite, signalled);
      if (last) {
        // An empty shard (or a last pass with no callbacks) still checks the accumulated gradients
        // and releases every bucket, so that nobody waits for it.
        if (rows == 0) ok(P_->countNonfinite(rep.ctx, rep.grads, paramCount_, nonfinite));
        if (n > 1)
          for (; signalled < buckets_.size(); ++signalled)
            ok(P_->eventRecord(rep.ctx, MLCUDA_STREAM_COMPUTE, rep.bucket[signalled]));
      }
      ok(P_->eventRecord(rep.ctx, MLCUDA_STREAM_COMPUTE, ev[2]));
    }
  } catch (const std::exception& e) {
    fail(e.what());
  } catch (...) {
    fail("unknown error in the GPU forward/backward of " + rep.label);
  }
  // The all-reduce: enqueued once every replica has enqueued its backward and bucket events.
  barrier_.arriveAndWait();
  if (r == 0 && n > 1 && !failed_.load(std::memory_order_acquire)) {
    try {
      allReduce();
    } catch (const std::exception& e) {
      fail(e.what());
    } catch (...) {
      fail("unknown error in the GPU all-reduce");
    }
  }
  barrier_.arriveAndWait();
  if (failed_.load(std::memory_order_acquire)) return;
  // B. The update, after the all-reduce; then the step's numbers and times.
  try {
    if (n > 1)
      ok(P_->streamWaitEvent(rep.ctx, MLCUDA_STREAM_COMPUTE, logical_ ? reps_[0]->commDone : rep.commDone));
    ok(P_->eventRecord(rep.ctx, MLCUDA_STREAM_COMPUTE, rep.commEnd));
    optimizerStep(rep, a.gradScale, a.lr);
    ok(P_->eventRecord(rep.ctx, MLCUDA_STREAM_COMPUTE, rep.optEnd));
    rep.hostWords.resize(static_cast<size_t>(2 * K + 1));
    ok(P_->copyToHost(rep.ctx, rep.hostWords.data(), rep.words, rep.hostWords.size() * sizeof(double)));
    paramsNewer_.store(true);
    for (int m = 0; m < K; ++m) {
      res.lossSum += rep.hostWords[static_cast<size_t>(2 * m)];
      res.metricSum += rep.hostWords[static_cast<size_t>(2 * m + 1)];
    }
    unsigned long long bad = 0;
    std::memcpy(&bad, &rep.hostWords[static_cast<size_t>(2 * K)], sizeof bad);
    if (!std::isfinite(res.lossSum)) {
      res.finite = false;
      res.badWhat = "loss";
    } else if (bad != 0) {
      res.finite = false;
      res.badWhat = "gradient";
    }
    auto seconds = [&](mlcuda_event* from, mlcuda_event* to) {
      float ms = 0;
      ok(P_->eventElapsedMs(from, to, &ms));
      return static_cast<double>(ms) * 1e-3;
    };
    for (int m = 0; m < K; ++m) {
      mlcuda_event* const* ev = rep.micro.data() + 3 * m;
      res.phases.forward += seconds(ev[0], ev[1]);
      res.phases.backward += seconds(ev[1], ev[2]);
    }
    res.backwardEnd = seconds(rep.start, rep.micro[static_cast<size_t>(3 * K - 1)]);
    res.commEnd = seconds(rep.start, rep.commEnd);
    res.phases.optimizer = seconds(rep.commEnd, rep.optEnd);
  } catch (const std::exception& e) {
    fail(e.what());
  } catch (...) {
    fail("unknown error in the GPU optimizer step of " + rep.label);
  }
}

void GpuReplicas::evaluate(int r, const Dataset& data, std::span<const int64_t> indices, float* outputs, uint64_t seed,
                           double& lossSum, double& metricSum, int64_t& samples) {
  lossSum = metricSum = 0;
  samples = 0;
  Replica& rep = *reps_[static_cast<size_t>(r)];
  try {
    const int64_t N = static_cast<int64_t>(indices.size());
    const auto [lo, hi] = shardRange(N, r, replicas());
    constexpr int64_t kChunk = 1024;
    ensureCapacity(rep, std::min(kChunk, hi - lo), data.targetDim);
    ensureStepBuffers(rep, 1);
    double two[2];
    for (int64_t a = lo; a < hi; a += kChunk) {
      const int64_t rows = std::min(kChunk, hi - a);
      stage(rep, data, indices.subspan(static_cast<size_t>(a), static_cast<size_t>(rows)), false);
      const float* pred = forward(rep, rows, false, seed, 0);
      ok(P_->loss(rep.ctx, static_cast<int>(loss_.kind()), loss_.fromLogits() ? 1 : 0, loss_.fusedSoftmax() ? 1 : 0, pred,
                  rep.y, rows, outFeatures_, nullptr, rep.words));
      if (metric_ != MetricKind::None)
        ok(P_->metricSum(rep.ctx, static_cast<int>(metric_), pred, rep.y, rows, outFeatures_, data.targetDim, rep.words + 1));
      else
        ok(P_->fillZero(rep.ctx, rep.words + 1, sizeof(double)));
      ok(P_->copyToHost(rep.ctx, two, rep.words, sizeof two));
      lossSum += two[0];
      metricSum += two[1];
      samples += rows;
      if (outputs)
        ok(P_->copyToHost(rep.ctx, outputs + a * outFeatures_, pred, static_cast<size_t>(rows * outFeatures_) * sizeof(float)));
    }
  } catch (const std::exception& e) {
    fail(e.what());
  } catch (...) {
    fail("unknown error in the GPU evaluation on " + rep.label);
  }
}

}  // namespace ml
