// The CUDA backend's operations. One step, per replica thread r (the strategy's own threads):
// stage each micro-batch shard (its row indices through a pinned slot to the device, its rows
// gathered there from the data set kept in device memory; or, for a data set too large for the GPU,
// its rows gathered on the host into the pinned slot and copied), forward, loss and metric
// into device words, backward; on the last micro-batch each layer's gradients are counted for
// inf/NaN before its buckets are handed to the collective (GpuCollective.cpp); after the
// all-reduce the fused optimizer runs, and one copy brings back the loss, metric and non-finite
// count (which also waits for the step to end). Phase times come from events on the compute
// stream, placed on the host clock by the step's first event (recorded on an idle stream).
#include "backend/gpu/CudaBackend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "Error.h"
#include "backend/DeviceProbe.h"
#include "backend/gpu/CudaReplica.h"
#include "nn/LayerKind.h"

namespace ml {

namespace {
void ok(const mlcuda_status& s) { throwIfFailed(s); }

std::string plural(int64_t n, const char* word) { return std::to_string(n) + " " + word + (n == 1 ? "" : "s"); }

// "" when the GPU runs op, else why not, in words for the user.
std::string gpuRefusal(const BackendOp& op) {
  using K = BackendOp::Kind;
  const auto in = [&](std::initializer_list<const char*> names) {
    return std::any_of(names.begin(), names.end(), [&](const char* n) { return op.name == n; });
  };
  switch (op.kind) {
    case K::Layer: {  // the registry says which kinds the plugin has kernels for
      const LayerKind* kind = findLayerKind(op.name);
      return kind && kind->gpu ? "" : "has no GPU implementation yet: train this model on CPU devices (--devices cpu:N)";
    }
    case K::Optimizer: return in({"sgd", "adam", "rmsprop"}) ? "" : "has no GPU implementation (sgd, adam, rmsprop)";
    case K::Loss:
    case K::Metric: return {};  // every loss and metric of core/nn has its kernel
  }
  return {};
}
}  // namespace

CudaBackend::CudaBackend(const BackendConfig& config)
    : hosts_(config.hosts),
      loss_(config.loss),
      metric_(config.metric),
      optSpec_(config.optimizer),
      logical_(config.devices.logical),
      tf32_(config.tf32) {
  checkDevices(config.devices);
  std::string why;
  P_ = cudaPlugin(&why);
  if (!P_) throw UserError("GPU devices need the CUDA plugin: " + why);
  // replica 0's host model: configureLoss has run, so the loss knows about fusion.
  requireOps(requiredOps(*hosts_.at(0), loss_, metric_, optSpec_), gpuRefusal);
  opt_ = optSpec_.kind == OptimizerKind::Sgd ? Opt::Sgd : optSpec_.kind == OptimizerKind::Adam ? Opt::Adam : Opt::RmsProp;
  precision_ = config.precision == Precision::MixedBfloat16  ? MLCUDA_PRECISION_BFLOAT16
               : config.precision == Precision::MixedFloat16 ? MLCUDA_PRECISION_FLOAT16
                                                             : MLCUDA_PRECISION_FLOAT32;
  translateLayers(*hosts_.at(0));
  const DeviceList& devices = config.devices;
  for (int r = 0; r < devices.size(); ++r) createReplica(devices.devices[static_cast<size_t>(r)], r, config.buckets.size());
  if (reps_.size() > 1 && !logical_) {
    std::vector<int> ids;
    for (const auto& r : reps_) ids.push_back(r->device);
    mlcuda_nccl* comm = nullptr;
    ok(P_->ncclCreate(ids.data(), static_cast<int>(ids.size()), &comm));
    nccl_ = NcclComm(comm, NcclDestroy{P_});
  }
  caps_.kind = "cuda";
  caps_.threadPolicy = replicas() == 1 ? "one host thread enqueuing on the GPU's compute and comm streams"
                                       : "one host thread per replica, each enqueuing on its own compute and comm streams";
  for (const auto& r : reps_)
    caps_.deviceNames.push_back(r->device < static_cast<int>(gpuNames_.size()) ? gpuNames_[static_cast<size_t>(r->device)]
                                                                               : std::string());
  caps_.collectives = this;
}

// NCCL's order: a communicator is finalized and destroyed only once the streams that ran its
// collectives are idle, and while those streams (the contexts) and the buffers it reduced still
// exist. So every replica's streams are waited for first (the plugin's bounded wait, which aborts a
// stuck all-reduce instead of hanging), then the communicator goes, and then the replicas with their
// buffers, events and, last, contexts (the members, in reverse order of declaration).
CudaBackend::~CudaBackend() {
  if (nccl_ || crossNccl_) {
    for (const auto& r : reps_)
      if (r && r->ctx) (void)P_->synchronize(r->ctx.get());  // teardown reports nothing
    nccl_.reset();
    crossNccl_.reset();
  }
}

// Which GPUs exist: the probe's words when there are none, the machine's GPUs when one is missing.
void CudaBackend::checkDevices(const DeviceList& devices) {
  const DeviceReport report = probeDevices();
  if (report.gpus.empty())
    throw UserError("device list '" + devices.spec + "' asks for GPUs, but this machine has none usable: " + report.noGpuReason +
                    ". Use cpu:N (simulated CPU devices), e.g. --devices cpu:2");
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
      throw UserError("gpu:" + std::to_string(d.physical) + " (" + g.name + ") has compute capability " +
                      std::to_string(g.ccMajor) + "." + std::to_string(g.ccMinor) +
                      ", but the CUDA plugin is built for 8.0 and 9.0 (A100, H100/H200): use cpu:N");
  }
}

template <typename T>
DeviceBuffer<T> CudaBackend::allocate(Replica& rep, size_t count, bool zero) {
  void* q = nullptr;
  ok(P_->allocate(rep.ctx.get(), count * sizeof(T), &q));
  DeviceBuffer<T> b(static_cast<T*>(q), DeviceFree{P_, rep.ctx.get()});
  if (zero && q) ok(P_->fillZero(rep.ctx.get(), q, count * sizeof(T)));
  return b;
}

void CudaBackend::createReplica(const Device& d, int rank, size_t buckets) {
  auto rep = std::make_unique<Replica>();
  Replica& p = *rep;
  reps_.push_back(std::move(rep));  // owned from here on: a throw below frees whatever was made
  p.rank = rank;
  p.device = d.physical;
  p.label = d.label();
  mlcuda_context* c = nullptr;
  ok(P_->contextCreate(p.device, p.label.c_str(), tf32_ ? 1 : 0, &c));
  p.ctx = GpuContext(c, ContextDestroy{P_});
  const size_t n = static_cast<size_t>(paramCount_);
  p.params = allocate<float>(p, n, true);
  p.grads = allocate<float>(p, n, true);
  const bool two = opt_ == Opt::Adam || (opt_ == Opt::RmsProp && optSpec_.momentum != 0.0);
  const bool one = opt_ != Opt::Sgd || optSpec_.momentum != 0.0;
  if (one) p.slot1 = allocate<float>(p, n, true);
  if (two) p.slot2 = allocate<float>(p, n, true);
  auto event = [&] {
    mlcuda_event* e = nullptr;
    ok(P_->eventCreate(p.ctx.get(), &e));
    return GpuEvent(e, EventDestroy{P_});
  };
  p.check = allocate<unsigned long long>(p, 1, true);
  p.start = event();
  p.commDone = event();
  p.commEnd = event();
  p.optEnd = event();
  for (size_t k = 0; k < buckets; ++k) p.bucket.push_back(event());
  for (auto& s : p.slots) s.copied = event();
  p.acts.resize(layers_.size());
  p.dacts.resize(layers_.size());
  p.masks.resize(layers_.size());
  p.argmax.resize(layers_.size());
  p.norms.resize(layers_.size());
  for (size_t i = 0; i < layers_.size(); ++i)
    if (layers_[i]->kind == Layer::Kind::BatchNorm) {
      const auto c = static_cast<size_t>(layers_[i]->channels);
      p.norms[i].stats = allocate<float>(p, 2 * c, true);
      p.norms[i].sums = allocate<double>(p, 2 * c, true);
    }
  p.out.assign(layers_.size(), nullptr);
  ok(P_->synchronize(p.ctx.get()));
}

void CudaBackend::pushParameters() {
  for (size_t r = 0; r < reps_.size(); ++r) {
    auto p = hosts_[r]->params();
    ok(P_->copyToDevice(reps_[r]->ctx.get(), reps_[r]->params.get(), p.data(), p.size() * sizeof(float)));
  }
  paramsNewer_.store(false);
}

void CudaBackend::pullParameters() {
  if (!paramsNewer_.load()) return;
  for (size_t r = 0; r < reps_.size(); ++r) {
    auto p = hosts_[r]->params();
    ok(P_->copyToHost(reps_[r]->ctx.get(), p.data(), reps_[r]->params.get(), p.size() * sizeof(float)));
  }
  paramsNewer_.store(false);
}

std::vector<std::span<const float>> CudaBackend::optimizerSlots(int r) {
  Replica& p = rep(r);
  const size_t n = static_cast<size_t>(paramCount_);
  auto get = [&](const DeviceBuffer<float>& dev, std::vector<float>& host) {
    host.assign(dev ? n : 0, 0.0f);
    if (dev) ok(P_->copyToHost(p.ctx.get(), host.data(), dev.get(), n * sizeof(float)));
  };
  get(p.slot1, p.hostSlot1);
  get(p.slot2, p.hostSlot2);
  // The order of Optimizer::stateBuffers: SGD {velocity}, Adam {m, v}, RMSprop {v, momentum}.
  if (opt_ == Opt::Sgd) return {p.hostSlot1};
  return {p.hostSlot1, p.hostSlot2};
}

int64_t CudaBackend::optimizerIterations(int r) { return rep(r).iterations; }

void CudaBackend::restoreOptimizer(int r, const std::vector<std::vector<float>>& slots, int64_t iterations) {
  Replica& p = rep(r);
  const size_t n = static_cast<size_t>(paramCount_);
  const size_t want = opt_ == Opt::Sgd ? 1 : 2;
  if (slots.size() != want)
    throw UserError("the checkpoint holds " + std::to_string(slots.size()) + " optimizer slot(s), this optimizer " +
                    std::to_string(want));
  auto put = [&](DeviceBuffer<float>& dev, const std::vector<float>& host) {
    if (host.size() != (dev ? n : 0)) throw UserError("an optimizer slot of the checkpoint has the wrong size");
    if (dev) ok(P_->copyToDevice(p.ctx.get(), dev.get(), host.data(), n * sizeof(float)));
  };
  put(p.slot1, slots[0]);
  if (want == 2) put(p.slot2, slots[1]);
  p.iterations = iterations;
}

void CudaBackend::ensureCapacity(Replica& rep, int64_t rows, int64_t targetDim) {
  rows = std::max<int64_t>(rows, 1);
  if (rows <= rep.capRows && rows * targetDim <= rep.capTargets) return;
  const int64_t cap = std::max(rows, rep.capRows);
  const int64_t targets = std::max(cap * targetDim, rep.capTargets);
  ok(P_->synchronize(rep.ctx.get()));  // work in flight may still read the old buffers
  rep.x.reset();
  rep.x = allocate<float>(rep, static_cast<size_t>(cap * inFeatures_), false);
  rep.y.reset();
  rep.y = allocate<float>(rep, static_cast<size_t>(targets), false);
  rep.ids.reset();
  rep.ids = allocate<int64_t>(rep, static_cast<size_t>(cap), false);
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = *layers_[i];
    const size_t elems = static_cast<size_t>(cap * l.out);
    rep.acts[i].reset();
    rep.dacts[i].reset();
    rep.masks[i].reset();
    rep.argmax[i].reset();
    if (l.kind != Layer::Kind::Reshape) rep.acts[i] = allocate<float>(rep, elems, false);
    rep.dacts[i] = allocate<float>(rep, elems, false);
    if (l.kind == Layer::Kind::Dropout) rep.masks[i] = allocate<uint8_t>(rep, elems, false);
    if (l.kind == Layer::Kind::Pool2D && l.max) rep.argmax[i] = allocate<int32_t>(rep, elems, false);
  }
  rep.capRows = cap;
  rep.capTargets = targets;
}

void CudaBackend::ensureStepBuffers(Replica& rep, int accumulate) {
  const int64_t words = 2 * static_cast<int64_t>(accumulate) + 1;
  if (words > rep.capWords) {
    ok(P_->synchronize(rep.ctx.get()));
    rep.words.reset();
    rep.words = allocate<double>(rep, static_cast<size_t>(words), false);
    rep.capWords = words;
  }
  while (rep.micro.size() < static_cast<size_t>(4 * accumulate)) {
    mlcuda_event* e = nullptr;
    ok(P_->eventCreate(rep.ctx.get(), &e));
    rep.micro.emplace_back(e, EventDestroy{P_});
  }
}

void CudaBackend::prepare(int r, int micro, int64_t maxRows, int64_t targetDim, bool training) {
  Replica& p = rep(r);
  ensureCapacity(p, maxRows, targetDim);
  ensureStepBuffers(p, micro);
  p.targetDim = targetDim;
  if (!training) return;
  p.nonfinite = reinterpret_cast<unsigned long long*>(p.words.get() + 2 * micro);
  ok(P_->fillZero(p.ctx.get(), p.grads.get(), static_cast<size_t>(paramCount_) * sizeof(float)));
  ok(P_->fillZero(p.ctx.get(), p.words.get(), static_cast<size_t>(2 * micro + 1) * sizeof(double)));
}

void CudaBackend::mark(int r, Mark m, int micro) {
  Replica& p = rep(r);
  mlcuda_event* e = nullptr;
  const size_t i = static_cast<size_t>(4 * micro);
  switch (m) {
    case Mark::StepStart: e = p.start.get(); break;
    case Mark::MicroStart: e = p.micro[i].get(); break;
    case Mark::InputEnd: e = p.micro[i + 1].get(); break;
    case Mark::ForwardEnd: e = p.micro[i + 2].get(); break;
    case Mark::BackwardEnd: e = p.micro[i + 3].get(); break;
    case Mark::CommEnd: e = p.commEnd.get(); break;
    case Mark::UpdateEnd: e = p.optEnd.get(); break;
  }
  ok(P_->eventRecord(p.ctx.get(), MLCUDA_STREAM_COMPUTE, e));
}

// The data set in this replica's GPU memory, uploaded by the first replica on that GPU to ask
// (one copy, once per run); null when it would take more than half of the free device memory, or
// MIRRORLAB_GPU_DATA=host asks for host staging, and then every micro-batch is staged. A replica
// that uses another's upload orders its stream after it with the upload's event (the copy is
// synchronous today, but an order only the host knows is one the GPU may not keep).
const CudaBackend::ResidentData* CudaBackend::residentData(Replica& rep, const Dataset& data) {
  std::lock_guard<std::mutex> lock(residentMutex_);
  for (const auto& d : resident_)
    if (d->device == rep.device && d->hostX == data.x.data() && d->size == data.size && d->features == data.featureCount() &&
        d->targetDim == data.targetDim) {
      if (!d->x) return nullptr;
      if (std::find(rep.waited.begin(), rep.waited.end(), d.get()) == rep.waited.end()) {
        ok(P_->streamWaitEvent(rep.ctx.get(), MLCUDA_STREAM_COMPUTE, d->uploaded.get()));
        rep.waited.push_back(d.get());
      }
      return d.get();
    }
  auto d = std::make_unique<ResidentData>();
  d->device = rep.device;
  d->hostX = data.x.data();
  d->size = data.size;
  d->features = data.featureCount();
  d->targetDim = data.targetDim;
  const char* mode = std::getenv("MIRRORLAB_GPU_DATA");
  const size_t bytes = (data.x.size() + data.y.size()) * sizeof(float);
  size_t freeBytes = 0, totalBytes = 0;
  ok(P_->memoryInfo(rep.ctx.get(), &freeBytes, &totalBytes));
  if (!(mode && std::string(mode) == "host") && bytes <= freeBytes / 2 && !data.x.empty()) {
    d->x = allocate<float>(rep, data.x.size(), false);
    d->y = allocate<float>(rep, data.y.size(), false);
    ok(P_->copyToDevice(rep.ctx.get(), d->x.get(), data.x.data(), data.x.size() * sizeof(float)));
    ok(P_->copyToDevice(rep.ctx.get(), d->y.get(), data.y.data(), data.y.size() * sizeof(float)));
    mlcuda_event* e = nullptr;
    ok(P_->eventCreate(rep.ctx.get(), &e));
    d->uploaded = GpuEvent(e, EventDestroy{P_});
    ok(P_->eventRecord(rep.ctx.get(), MLCUDA_STREAM_COMPUTE, e));
    rep.waited.push_back(d.get());
  }
  resident_.push_back(std::move(d));
  return resident_.back()->x ? resident_.back().get() : nullptr;
}

// The next pinned slot, at least `bytes` large, once the copy that last read it is done.
char* CudaBackend::takeSlot(Replica& rep, size_t bytes) {
  Replica::Slot& s = rep.slots[rep.nextSlot];
  rep.nextSlot ^= 1;
  if (s.inFlight) ok(P_->eventSynchronize(s.copied.get()));
  s.inFlight = false;
  if (s.bytes < bytes) {
    s.host.reset();
    s.bytes = 0;
    const size_t want = std::max(bytes + bytes / 2, size_t{64} << 10);  // room to grow without a new allocation each time
    void* q = nullptr;
    ok(P_->hostAlloc(rep.ctx.get(), want, &q));
    s.host = PinnedBuffer(q, HostFree{P_, rep.ctx.get()});
    s.bytes = want;
  }
  return static_cast<char*>(s.host.get());
}

// The shard's row indices go through a pinned slot to the device (they are also the sample ids of
// Dropout); its rows are gathered there from the resident data set, or on the host into the same
// slot and copied. Everything is on the compute stream, so the previous micro-batch's backward no
// longer reads x when it is overwritten; the host returns without waiting for the copies.
void CudaBackend::stage(int r, const Dataset& data, std::span<const int64_t> idx) {
  Replica& p = rep(r);
  mlcuda_context* c = p.ctx.get();
  const int64_t f = data.featureCount(), t = data.targetDim, n = static_cast<int64_t>(idx.size());
  for (int64_t i : idx)
    if (i < 0 || i >= data.size)
      throw std::logic_error("CudaBackend::stage: sample " + std::to_string(i) + " is outside " + data.name + " (" +
                             std::to_string(data.size) + " samples)");
  const ResidentData* res = residentData(p, data);
  const size_t idBytes = static_cast<size_t>(n) * sizeof(int64_t);
  const size_t xBytes = res ? 0 : static_cast<size_t>(n * f) * sizeof(float);
  const size_t yBytes = res ? 0 : static_cast<size_t>(n * t) * sizeof(float);
  char* h = takeSlot(p, idBytes + xBytes + yBytes);
  std::memcpy(h, idx.data(), idBytes);
  ok(P_->copyToDeviceAsync(c, p.ids.get(), h, idBytes));
  if (res) {
    ok(P_->gatherRows(c, res->x.get(), p.ids.get(), n, f, p.x.get()));
    ok(P_->gatherRows(c, res->y.get(), p.ids.get(), n, t, p.y.get()));
  } else {
    auto* hx = reinterpret_cast<float*>(h + idBytes);
    auto* hy = reinterpret_cast<float*>(h + idBytes + xBytes);
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(hx + i * f, data.sample(idx[static_cast<size_t>(i)]), static_cast<size_t>(f) * sizeof(float));
      std::memcpy(hy + i * t, data.target(idx[static_cast<size_t>(i)]), static_cast<size_t>(t) * sizeof(float));
    }
    ok(P_->copyToDeviceAsync(c, p.x.get(), hx, xBytes));
    ok(P_->copyToDeviceAsync(c, p.y.get(), hy, yBytes));
  }
  Replica::Slot& used = p.slots[p.nextSlot ^ 1];
  ok(P_->eventRecord(c, MLCUDA_STREAM_COMPUTE, used.copied.get()));
  used.inFlight = true;
}

void CudaBackend::forwardLoss(int r, int micro, int64_t rows, const StepContext& ctx) {
  Replica& p = rep(r);
  const float* pred = forward(p, rows, &ctx, ctx.seed, ctx.step);
  if (rows == 0) return;  // an empty shard joined BatchNormalization's sums; its loss words stay zero
  double* words = p.words.get() + 2 * micro;
  ok(P_->loss(p.ctx.get(), static_cast<int>(loss_.kind()), loss_.fromLogits() ? 1 : 0, loss_.fusedSoftmax() ? 1 : 0, pred,
              p.y.get(), rows, outFeatures_, p.dacts.back().get(), words));
  if (p.lossScale != 1.0f) ok(P_->scale(p.ctx.get(), p.dacts.back().get(), rows * outFeatures_, p.lossScale));
  if (metric_ != MetricKind::None)
    ok(P_->metricSum(p.ctx.get(), static_cast<int>(metric_), pred, p.y.get(), rows, outFeatures_, p.targetDim, words + 1));
}

void CudaBackend::checkGradients(int r) {
  Replica& p = rep(r);
  ok(P_->countNonfinite(p.ctx.get(), p.grads.get(), paramCount_, p.nonfinite));
}

void CudaBackend::setLossScale(int r, float scale) { rep(r).lossScale = scale; }

// The summed gradients this replica's update will read (a device collective leaves the whole sum
// with every replica), counted for inf/NaN on the device; the copy waits for the all-reduce.
bool CudaBackend::reducedFinite(int r, int64_t offset, int64_t count, int from) {
  if (from != r) throw std::logic_error("CudaBackend::reducedFinite: the GPU replicas each hold the whole sum");
  Replica& p = rep(r);
  mlcuda_context* c = p.ctx.get();
  ok(P_->fillZero(c, p.check.get(), sizeof(unsigned long long)));
  ok(P_->countNonfinite(c, p.grads.get() + offset, count, p.check.get()));
  unsigned long long bad = 0;
  ok(P_->copyToHost(c, &bad, p.check.get(), sizeof bad));
  return bad == 0;
}

void CudaBackend::beginUpdate(int r, float lr) {
  ++rep(r).iterations;
  rep(r).lr = lr;
}

// The fused update kernels take the whole buffer: a device collective never leaves chunks with owners.
void CudaBackend::update(int r, int64_t offset, int64_t count, int from, float gradScale) {
  if (offset != 0 || count != paramCount_ || from != r)
    throw std::logic_error("CudaBackend::update: the GPU optimizer updates the whole buffer of its own replica");
  Replica& p = rep(r);
  const OptimizerSpec& o = optSpec_;
  mlcuda_context* c = p.ctx.get();
  switch (opt_) {
    case Opt::Sgd:
      ok(P_->sgdStep(c, p.params.get(), p.grads.get(), p.slot1.get(), paramCount_, gradScale, p.lr,
                     static_cast<float>(o.momentum), o.nesterov ? 1 : 0));
      break;
    case Opt::Adam:
      ok(P_->adamStep(c, p.params.get(), p.grads.get(), p.slot1.get(), p.slot2.get(), paramCount_, gradScale, p.lr, o.beta1,
                      o.beta2, static_cast<float>(o.epsilon), p.iterations));
      break;
    case Opt::RmsProp:
      ok(P_->rmspropStep(c, p.params.get(), p.grads.get(), p.slot1.get(), p.slot2.get(), paramCount_, gradScale, p.lr, o.rho,
                         static_cast<float>(o.momentum), static_cast<float>(o.epsilon)));
      break;
  }
}

ReplicaSums CudaBackend::finishStep(int r, int micro) {
  Replica& p = rep(r);
  p.hostWords.resize(static_cast<size_t>(2 * micro + 1));
  ok(P_->copyToHost(p.ctx.get(), p.hostWords.data(), p.words.get(), p.hostWords.size() * sizeof(double)));
  paramsNewer_.store(true);
  ReplicaSums s;
  for (int m = 0; m < micro; ++m) {
    s.lossSum += p.hostWords[static_cast<size_t>(2 * m)];
    s.metricSum += p.hostWords[static_cast<size_t>(2 * m + 1)];
  }
  unsigned long long bad = 0;
  std::memcpy(&bad, &p.hostWords[static_cast<size_t>(2 * micro)], sizeof bad);
  s.gradientsFinite = bad == 0;
  return s;
}

ReplicaTimes CudaBackend::times(int r, int micro) {
  Replica& p = rep(r);
  auto seconds = [&](const GpuEvent& from, const GpuEvent& to) {
    float ms = 0;
    ok(P_->eventElapsedMs(from.get(), to.get(), &ms));
    return static_cast<double>(ms) * 1e-3;
  };
  ReplicaTimes t;
  for (int m = 0; m < micro; ++m) {
    const GpuEvent* ev = p.micro.data() + 4 * m;
    t.phases.input += seconds(ev[0], ev[1]);
    t.phases.forward += seconds(ev[1], ev[2]);
    t.phases.backward += seconds(ev[2], ev[3]);
  }
  t.backwardEnd = seconds(p.start, p.micro[static_cast<size_t>(4 * micro - 1)]);
  t.commEnd = seconds(p.start, p.commEnd);
  t.phases.optimizer = seconds(p.commEnd, p.optEnd);
  return t;
}

void CudaBackend::evaluate(int r, int64_t rows, const StepContext& ctx, float* outputs, double& lossSum, double& metricSum) {
  Replica& p = rep(r);
  mlcuda_context* c = p.ctx.get();
  const float* pred = forward(p, rows, nullptr, ctx.seed, 0);
  ok(P_->loss(c, static_cast<int>(loss_.kind()), loss_.fromLogits() ? 1 : 0, loss_.fusedSoftmax() ? 1 : 0, pred, p.y.get(), rows,
              outFeatures_, nullptr, p.words.get()));
  if (metric_ != MetricKind::None)
    ok(P_->metricSum(c, static_cast<int>(metric_), pred, p.y.get(), rows, outFeatures_, p.targetDim, p.words.get() + 1));
  else
    ok(P_->fillZero(c, p.words.get() + 1, sizeof(double)));
  double two[2];
  ok(P_->copyToHost(c, two, p.words.get(), sizeof two));
  lossSum += two[0];
  metricSum += two[1];
  if (outputs) ok(P_->copyToHost(c, outputs, pred, static_cast<size_t>(rows * outFeatures_) * sizeof(float)));
}

}  // namespace ml
