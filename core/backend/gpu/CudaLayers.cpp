// The CUDA backend's layers: the host model translated once into what the plugin runs, and the
// forward and backward passes of one replica on its compute stream. Convolutions go through cuDNN
// in the plugin; pooling, global average pooling and BatchNormalization are the plugin's own
// kernels. BatchNormalization's statistics take a trip through the host: the per-channel sums come
// back, the strategy's ReplicaSum adds them across replicas (the same one the CPU devices use), the
// host derives the mean and 1/sqrt(var + eps) exactly as nn/BatchNorm.cpp does, and they go back
// for the normalisation. That costs one synchronisation of the compute stream per BatchNormalization
// layer and pass, and keeps the GPU's statistics, moving averages and synchronized mode the CPU's.
#include <cmath>
#include <stdexcept>

#include "backend/gpu/CudaBackend.h"
#include "backend/gpu/CudaReplica.h"
#include "nn/BatchNorm.h"
#include "nn/Conv2D.h"
#include "nn/Dense.h"
#include "nn/Pooling.h"
#include "nn/SimpleLayers.h"

namespace ml {

namespace {
void ok(const mlcuda_status& s) { throwIfFailed(s); }

mlcuda_conv_geometry convGeometry(const Geometry& g, const Window& w, int64_t filters) {
  mlcuda_conv_geometry c{};
  c.h = g.h;
  c.w = g.w;
  c.c = g.c;
  c.oh = g.oh;
  c.ow = g.ow;
  c.filters = filters;
  c.kh = w.kh;
  c.kw = w.kw;
  c.sh = w.sh;
  c.sw = w.sw;
  c.pad_top = g.padTop;
  c.pad_left = g.padLeft;
  // TensorFlow's "same" puts the odd padding row/column after: what the last window needs past the input.
  c.pad_bottom = std::max<int64_t>(0, (g.oh - 1) * w.sh + w.kh - g.h - g.padTop);
  c.pad_right = std::max<int64_t>(0, (g.ow - 1) * w.sw + w.kw - g.w - g.padLeft);
  return c;
}
}  // namespace

// Long: one branch per layer kind, each copying that layer's few fields into the plugin's form.
void CudaBackend::translateLayers(const Sequential& m) {
  paramCount_ = m.paramCount();
  inFeatures_ = m.inFeatures();
  outFeatures_ = m.outFeatures();
  std::vector<int64_t> offsets(m.layerCount(), 0);
  for (const auto& r : m.paramRanges()) offsets[r.layer] = r.offset;
  // The output activation the loss fuses with (Sequential::configureLoss): softmax with the
  // categorical cross-entropies, sigmoid with the binary one.
  const Act fusable = loss_.kind() == LossKind::BinaryCrossentropy ? Act::Sigmoid : Act::Softmax;
  bool below = false;
  for (size_t i = 0; i < m.layerCount(); ++i) {
    const ml::Layer& src = m.layer(i);
    auto l = std::make_unique<Layer>();
    l->in = src.inFeatures();
    l->out = src.outFeatures();
    l->offset = offsets[i];
    l->count = src.paramCount();
    l->needsInputGrad = below;
    const bool lastLayer = i + 1 == m.layerCount();
    if (auto* d = dynamic_cast<const Dense*>(&src)) {
      l->kind = Layer::Kind::Dense;
      l->act = static_cast<int>(d->activation());
      l->bias = d->paramCount() > l->in * l->out;
      l->fusedSoftmax = lastLayer && loss_.fusedSoftmax() && d->activation() == fusable;
    } else if (auto* a = dynamic_cast<const ActivationLayer*>(&src)) {
      l->kind = Layer::Kind::Activation;
      l->act = static_cast<int>(a->activation());
      l->fusedSoftmax = lastLayer && loss_.fusedSoftmax() && a->activation() == fusable;
    } else if (src.isReshape()) {
      l->kind = Layer::Kind::Reshape;
    } else if (auto* dr = dynamic_cast<const Dropout*>(&src)) {
      l->kind = Layer::Kind::Dropout;
      l->rate = dr->rate();
      l->salt = dr->salt();
    } else if (auto* cv = dynamic_cast<const Conv2D*>(&src)) {
      l->kind = Layer::Kind::Conv2D;
      l->act = static_cast<int>(cv->activation());
      l->bias = cv->useBias();
      l->geo = convGeometry(cv->geometry(), cv->window(), cv->filters());
    } else if (auto* pl = dynamic_cast<const Pool2D*>(&src)) {
      l->kind = Layer::Kind::Pool2D;
      l->max = pl->isMax();
      l->geo = convGeometry(pl->geometry(), pl->window(), pl->geometry().c);
    } else if (dynamic_cast<const GlobalAveragePooling2D*>(&src)) {
      l->kind = Layer::Kind::GlobalAvgPool;
      l->geo.c = l->out;
    } else if (auto* bn = dynamic_cast<const BatchNorm*>(&src)) {
      l->kind = Layer::Kind::BatchNorm;
      const int64_t C = bn->channels();
      l->channels = C;
      l->momentum = bn->momentum();
      l->epsilon = bn->epsilon();
      l->synchronized = bn->synchronized();
      // BatchNorm::bind's order: gamma (scale), beta (center), moving mean, moving variance.
      int64_t at = l->offset;
      if (bn->scale()) l->gamma = at, at += C;
      if (bn->center()) l->beta = at, at += C;
      l->movingMean = at;
      l->movingVar = at + C;
    } else {
      throw std::logic_error("CudaBackend: layer type " + src.type() + " passed gpuRefusal() but has no translation");
    }
    if (src.paramCount() > 0) below = true;
    layers_.push_back(std::move(l));
  }
}

// Sequential::forward on the device: a Flatten or Reshape passes its input on, every other layer
// writes its own buffer.
const float* CudaBackend::forward(Replica& rep, int64_t rows, const StepContext* ctx, uint64_t seed, uint64_t step) {
  const float* in = rep.x.get();
  mlcuda_context* c = rep.ctx.get();
  const float* params = rep.params.get();
  const bool training = ctx != nullptr;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = *layers_[i];
    float* y = l.kind == Layer::Kind::Reshape ? const_cast<float*>(in) : rep.acts[i].get();
    // An empty shard (a model with BatchNormalization runs every replica in every micro-batch)
    // only joins BatchNormalization's cross-replica sums.
    if (rows == 0 && l.kind != Layer::Kind::BatchNorm) {
      rep.out[i] = y;
      in = y;
      continue;
    }
    switch (l.kind) {
      case Layer::Kind::Reshape: break;
      case Layer::Kind::Dense: {
        const float* b = l.bias ? params + l.offset + l.in * l.out : nullptr;
        if (precision_ != MLCUDA_PRECISION_FLOAT32)
          ok(P_->denseForwardLow(c, precision_, in, params + l.offset, b, y, rows, l.in, l.out, l.act));
        else
          ok(P_->denseForward(c, in, params + l.offset, b, y, rows, l.in, l.out, l.act));
        break;
      }
      case Layer::Kind::Activation: ok(P_->activationForward(c, l.act, in, y, rows, l.out)); break;
      case Layer::Kind::Dropout:
        ok(P_->dropoutForward(c, in, y, rep.masks[i].get(), rows, l.out, l.rate, seed, l.salt, step, rep.ids.get(),
                              training ? 1 : 0));
        break;
      case Layer::Kind::Conv2D: {
        const int64_t kernel = l.geo.kh * l.geo.kw * l.geo.c * l.geo.filters;
        const float* b = l.bias ? params + l.offset + kernel : nullptr;
        if (precision_ != MLCUDA_PRECISION_FLOAT32)
          ok(P_->conv2dForwardLow(c, precision_, &l.geo, in, params + l.offset, b, y, rows, l.act));
        else
          ok(P_->conv2dForward(c, &l.geo, in, params + l.offset, b, y, rows, l.act));
        break;
      }
      case Layer::Kind::Pool2D: ok(P_->pool2dForward(c, &l.geo, l.max ? 1 : 0, in, y, rep.argmax[i].get(), rows)); break;
      case Layer::Kind::GlobalAvgPool: ok(P_->globalAvgPoolForward(c, in, y, rows, l.in / l.out, l.out)); break;
      case Layer::Kind::BatchNorm: normForward(rep, i, in, y, rows, ctx); break;
    }
    rep.out[i] = y;
    in = y;
  }
  return in;
}

// nn/BatchNorm.cpp's forward: in training, this shard's per-channel sums, summed across the
// replicas (every replica joins, an empty shard too); the shard's own statistics normalise unless
// the layer is synchronized, the global batch's always move the moving averages. In evaluation,
// the moving statistics.
void CudaBackend::normForward(Replica& rep, size_t i, const float* x, float* y, int64_t rows, const StepContext* ctx) {
  const Layer& l = *layers_[i];
  NormState& st = rep.norms[i];
  mlcuda_context* c = rep.ctx.get();
  float* params = rep.params.get();
  const int64_t C = l.channels, values = rows * l.in / C;
  const float* gamma = l.gamma >= 0 ? params + l.gamma : nullptr;
  const float* beta = l.beta >= 0 ? params + l.beta : nullptr;
  if (!ctx) {
    ok(P_->batchnormEvalStats(c, params + l.movingMean, params + l.movingVar, C, l.epsilon, st.stats.get()));
    ok(P_->batchnormForward(c, x, y, values, C, st.stats.get(), gamma, beta));
    return;
  }
  const auto n = static_cast<size_t>(C);
  std::vector<double>&local = st.local, &global = st.global, &moving = st.moving;
  std::vector<float>& stats = st.hostStats;
  local.assign(2 * n + 1, 0.0);
  if (values > 0) {
    ok(P_->batchnormMoments(c, x, values, C, st.sums.get()));
    ok(P_->copyToHost(c, local.data(), st.sums.get(), 2 * n * sizeof(double)));
  }
  local[2 * n] = static_cast<double>(values);
  global = local;
  ctx->sumAcrossReplicas(global);
  const std::vector<double>& use = l.synchronized ? global : local;
  st.count = use[2 * n];
  const double gCount = global[2 * n];
  stats.resize(2 * n);
  moving.resize(2 * n);  // the global batch's mean and variance
  for (size_t k = 0; k < n; ++k) {
    const double m = use[k] / st.count, var = std::max(0.0, use[n + k] / st.count - m * m);
    stats[k] = static_cast<float>(m);
    stats[n + k] = static_cast<float>(1.0 / std::sqrt(var + l.epsilon));
    const double gm = global[k] / gCount;
    moving[k] = gm;
    moving[n + k] = std::max(0.0, global[n + k] / gCount - gm * gm);
  }
  ok(P_->copyToDevice(c, st.stats.get(), stats.data(), 2 * n * sizeof(float)));
  ok(P_->copyToDevice(c, st.sums.get(), moving.data(), 2 * n * sizeof(double)));
  ok(P_->batchnormUpdateMoving(c, params + l.movingMean, params + l.movingVar, st.sums.get(), C, l.momentum));
  if (values > 0) ok(P_->batchnormForward(c, x, y, values, C, st.stats.get(), gamma, beta));
}

// nn/BatchNorm.cpp's backward: dgamma and dbeta from this shard; the sums of dy and dy*xhat over
// the rows the statistics came from (all-reduced when they are synchronized) give dx.
void CudaBackend::normBackward(Replica& rep, size_t i, const float* x, float* dy, float* dx, int64_t rows,
                               const StepContext& ctx) {
  const Layer& l = *layers_[i];
  NormState& st = rep.norms[i];
  mlcuda_context* c = rep.ctx.get();
  const int64_t C = l.channels, values = rows * l.in / C;
  float* grads = rep.grads.get();
  if (values > 0)
    ok(P_->batchnormBackwardSums(c, x, dy, values, C, st.stats.get(), st.sums.get(), l.gamma >= 0 ? grads + l.gamma : nullptr,
                                 l.beta >= 0 ? grads + l.beta : nullptr));
  if (!dx) return;
  if (l.synchronized && ctx.replicaSum) {
    const auto n = static_cast<size_t>(2 * C);
    st.global.assign(n, 0.0);
    if (values > 0) ok(P_->copyToHost(c, st.global.data(), st.sums.get(), n * sizeof(double)));
    ctx.sumAcrossReplicas(st.global);
    ok(P_->copyToDevice(c, st.sums.get(), st.global.data(), n * sizeof(double)));
  }
  if (values > 0)
    ok(P_->batchnormBackwardData(c, x, dy, dx, values, C, st.stats.get(), l.gamma >= 0 ? rep.params.get() + l.gamma : nullptr,
                                 st.sums.get(), st.count, 1));
}

void CudaBackend::backward(int r, int64_t rows, const StepContext& ctx, const std::function<void(size_t)>& onLayerDone) {
  Replica& p = rep(r);
  mlcuda_context* c = p.ctx.get();
  float* dy = p.dacts.back().get();
  for (size_t i = layers_.size(); i-- > 0;) {
    const Layer& l = *layers_[i];
    const float* in = i == 0 ? p.x.get() : p.out[i - 1];
    float* dx = nullptr;
    if (l.needsInputGrad) dx = l.kind == Layer::Kind::Reshape ? dy : p.dacts[i - 1].get();
    float* grads = p.grads.get() + l.offset;
    switch (rows == 0 && l.kind != Layer::Kind::BatchNorm ? Layer::Kind::Reshape : l.kind) {  // an empty shard: as forward
      case Layer::Kind::Reshape: break;
      case Layer::Kind::Dense: {
        float* db = l.bias ? grads + l.in * l.out : nullptr;
        if (precision_ != MLCUDA_PRECISION_FLOAT32)
          ok(P_->denseBackwardLow(c, precision_, in, p.params.get() + l.offset, p.out[i], dy, dx, grads, db, rows, l.in, l.out,
                                  l.act, l.fusedSoftmax ? 1 : 0));
        else
          ok(P_->denseBackward(c, in, p.params.get() + l.offset, p.out[i], dy, dx, grads, db, rows, l.in, l.out, l.act,
                               l.fusedSoftmax ? 1 : 0));
        break;
      }
      case Layer::Kind::Activation:
        if (!dx) break;
        if (l.fusedSoftmax)
          ok(P_->copyOnDevice(c, dx, dy, static_cast<size_t>(rows * l.out) * sizeof(float)));
        else
          ok(P_->activationBackward(c, l.act, p.out[i], dy, dx, rows, l.out));
        break;
      case Layer::Kind::Dropout:
        if (dx) ok(P_->dropoutBackward(c, dy, dx, p.masks[i].get(), rows * l.out, l.rate, 1));
        break;
      case Layer::Kind::Conv2D: {
        const int64_t kernel = l.geo.kh * l.geo.kw * l.geo.c * l.geo.filters;
        float* db = l.bias ? grads + kernel : nullptr;
        if (precision_ != MLCUDA_PRECISION_FLOAT32)
          ok(P_->conv2dBackwardLow(c, precision_, &l.geo, in, p.params.get() + l.offset, p.out[i], dy, dx, grads, db, rows,
                                   l.act));
        else
          ok(P_->conv2dBackward(c, &l.geo, in, p.params.get() + l.offset, p.out[i], dy, dx, grads, db, rows, l.act));
        break;
      }
      case Layer::Kind::Pool2D:
        if (dx) ok(P_->pool2dBackward(c, &l.geo, l.max ? 1 : 0, dy, p.argmax[i].get(), dx, rows));
        break;
      case Layer::Kind::GlobalAvgPool:
        if (dx) ok(P_->globalAvgPoolBackward(c, dy, dx, rows, l.in / l.out, l.out));
        break;
      case Layer::Kind::BatchNorm: normBackward(p, i, in, dy, dx, rows, ctx); break;
    }
    if (onLayerDone && l.count > 0) {
      // Counted before the bucket is released: after that the all-reduce owns the buffer.
      ok(P_->countNonfinite(c, p.grads.get() + l.offset, l.count, p.nonfinite));
      onLayerDone(i);
    }
    if (!l.needsInputGrad) break;
    dy = dx;
  }
}

}  // namespace ml
