#include "nn/Sequential.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <set>
#include <utility>

#include "Error.h"
#include "Field.h"
#include "Limits.h"
#include "nn/Conv2D.h"
#include "nn/Dense.h"
#include "nn/LayerKind.h"
#include "nn/Pooling.h"
#include "nn/SimpleLayers.h"
#include "random/Rng.h"

namespace ml {

uint64_t fnv1a(const void* data, size_t bytes, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

// Long: the input-shape checks, the Keras-style naming and the building of every layer with its
// parameter range happen in this order once, and each depends on the one before.
Sequential::Sequential(const ModelSpec& spec) : spec_(spec) {
  if (spec_.inputShape.empty())
    throw fieldError("model.input_shape", " is missing: give the shape of one sample, e.g. [28, 28] or [2]");
  for (int64_t d : spec_.inputShape)
    if (d <= 0)
      throw fieldError("model.input_shape", " is " + shapeToString(spec_.inputShape, false) + ": every size must be positive");
  int64_t features = 1;
  for (int64_t d : spec_.inputShape) {
    const auto f = mulChecked(features, d);
    if (!f || *f > kMaxFeatures)
      throw fieldError("model.input_shape", " is " + shapeToString(spec_.inputShape, false) + ": more than " +
                                                std::to_string(kMaxFeatures) +
                                                " values per sample: give the shape of one sample, e.g. [28, 28]");
    features = *f;
  }
  if (spec_.layers.empty()) throw fieldError("model.layers", " is empty: add at least one layer (e.g. Dense)");
  // Keras-style names: dense, dense_1, dense_2...
  std::vector<std::string> types, names;
  for (const auto& l : spec_.layers) {
    types.emplace_back(l.type());
    names.push_back(l.name);
  }
  names = layerNames(types, names);
  for (size_t i = 0; i < names.size(); ++i) spec_.layers[i].name = names[i];
  std::set<std::string> seen;
  Shape shape = spec_.inputShape;
  int64_t total = 0;
  for (size_t i = 0; i < spec_.layers.size(); ++i) {
    if (!seen.insert(spec_.layers[i].name).second)
      throw UserError(layerArgInWords(i, "", std::string(spec_.layers[i].type()), "name") + ": the name '" +
                          spec_.layers[i].name + "' is used twice: give each layer its own name",
                      layerPath(i, "name"));
    auto layer = makeLayer(spec_.layers[i], i);
    try {
      shape = layer->build(shape);
    } catch (const UserError& e) {
      // A layer names itself "layer 'dense' (Dense)"; the words add its position (and screen).
      const LayerSpec& l = spec_.layers[i];
      std::string msg = e.what();
      const std::string own = "layer '" + l.name + "' (" + std::string(l.type()) + ")";
      if (msg.rfind(own, 0) == 0)
        throw UserError(layerBrief(i, l.name, std::string(l.type())) + msg.substr(own.size()),
                        e.field().empty() ? layerPath(i) : e.field());
      throw;
    }
    if (layer->paramCount() > 0) ranges_.push_back({i, total, layer->paramCount()});
    const auto sum = addChecked(total, layer->paramCount());
    if (!sum) throw UserError("the model has more parameters than any machine holds: use fewer or smaller layers");
    total = *sum;
    layers_.push_back(std::move(layer));
  }
  // Weights and their gradients, before allocating them (a Dense of 2e9 units asks for terabytes).
  requireMemory(static_cast<double>(total) * 2 * sizeof(float),
                "the model's " + std::to_string(total) + " parameters (weights and gradients, per replica)",
                "use fewer or smaller layers");
  outputShape_ = shape;
  params_.assign(static_cast<size_t>(total), 0.0f);
  grads_.assign(static_cast<size_t>(total), 0.0f);
  for (const auto& r : ranges_) layers_[r.layer]->bind(params_.data() + r.offset, grads_.data() + r.offset);
  acts_.resize(layers_.size());
  dacts_.resize(layers_.size());
  out_.assign(layers_.size(), nullptr);
  needsInputGrad_.assign(layers_.size(), false);
  bool below = false;
  for (size_t i = 0; i < layers_.size(); ++i) {
    needsInputGrad_[i] = below;
    if (layers_[i]->paramCount() > 0) below = true;
  }
  maskReluUnderPooling();
}

// A ReLU convolution under max pooling. Where nothing below the convolution needs an input
// gradient (the first layer with parameters) and the shapes fit, the two run fused (nn/ConvPool.h:
// the convolution's output is never written). Otherwise the pooling's backward applies ReLU's
// gradient at the one position each output came from (where the pooled value is positive), so the
// convolution does not read its whole output again to mask a gradient that is zero almost everywhere.
void Sequential::maskReluUnderPooling() {
  for (size_t i = 1; i < layers_.size(); ++i) {
    auto* pool = dynamic_cast<Pool2D*>(layers_[i].get());
    auto* conv = dynamic_cast<Conv2D*>(layers_[i - 1].get());
    if (!pool || !conv || !pool->isMax() || conv->activation() != Act::Relu) continue;
    if (!needsInputGrad_[i - 1] && conv->fusePoolAbove(pool)) {
      pool->setFusedBelow(conv);
      continue;
    }
    pool->setReluBelow(true);
    conv->setGradientMasked(pool);
  }
}

void Sequential::initialize(uint64_t seed) {
  for (size_t i = 0; i < layers_.size(); ++i) layers_[i]->initialize(hashKeys(seed, 0x1417ull, i));
}

int64_t Sequential::nonTrainableCount() const {
  int64_t n = 0;
  for (const auto& l : layers_) n += l->nonTrainableCount();
  return n;
}

void Sequential::zeroGrads() {
  std::fill(grads_.begin(), grads_.end(), 0.0f);
  discarded_ = false;
}

void Sequential::settleGrads() {
  if (discarded_) zeroGrads();
}

void Sequential::configureLoss(Loss& loss) {
  const bool wants = loss.isClassification() && !loss.fromLogits();
  // Softmax with a categorical cross-entropy, sigmoid with the binary one: dL/dlogits = p - t.
  const Act fusable = loss.kind() == LossKind::BinaryCrossentropy ? Act::Sigmoid : Act::Softmax;
  bool fuse = false;
  Layer& last = *layers_.back();
  // Set (or clear) the flag every time: a model reconfigured with another loss must unfuse.
  if (auto* d = dynamic_cast<Dense*>(&last)) {
    fuse = wants && d->activation() == fusable;
    d->setFusedSoftmax(fuse);
  } else if (auto* a = dynamic_cast<ActivationLayer*>(&last)) {
    fuse = wants && a->activation() == fusable;
    a->setFusedSoftmax(fuse);
  }
  loss.setFusedSoftmax(fuse);
}

// Activations for forward; their gradients only once a backward wants them, so evaluation (in
// chunks of up to 1024 samples, forward only) does not allocate gradient buffers for a chunk: for
// fashion-cnn that was ~150 MB per replica never written.
void Sequential::ensureCapacity(int64_t n) {
  if (n <= capacity_) return;
  for (size_t i = 0; i < layers_.size(); ++i)
    if (!layers_[i]->isReshape()) acts_[i].resize(static_cast<size_t>(n * layers_[i]->outFeatures()));
  capacity_ = n;
}

void Sequential::ensureGradCapacity(int64_t n) {
  ensureCapacity(n);
  if (n <= gradCapacity_) return;
  for (size_t i = 0; i < layers_.size(); ++i) dacts_[i].resize(static_cast<size_t>(n * layers_[i]->outFeatures()));
  gradCapacity_ = n;
}

const float* Sequential::forward(const float* x, int64_t n, const StepContext& ctx) {
  ensureCapacity(std::max<int64_t>(n, 1));
  const float* in = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (layers_[i]->isReshape()) {
      out_[i] = in;
    } else {
      layers_[i]->forward(in, acts_[i].data(), n, ctx);
      out_[i] = acts_[i].data();
    }
    in = out_[i];
  }
  return in;
}

float* Sequential::outputGrad(int64_t n) {
  ensureGradCapacity(std::max<int64_t>(n, 1));
  return dacts_.back().data();
}

void Sequential::backward(const float* x, int64_t n, const StepContext& ctx, const std::function<void(size_t)>& onLayerDone) {
  if (discarded_ && n == 0) settleGrads();  // a pass over no rows writes nothing
  const bool fresh = std::exchange(discarded_, false);
  StepContext overwrite = ctx;
  overwrite.overwriteGrads = true;
  float* dy = dacts_.back().data();
  size_t range = ranges_.size();  // ranges_ are in layer order: walked down with the layers
  for (size_t i = layers_.size(); i-- > 0;) {
    const float* in = i == 0 ? x : out_[i - 1];
    float* dx = nullptr;
    if (needsInputGrad_[i]) dx = layers_[i]->isReshape() ? dy : dacts_[i - 1].data();
    bool writes = false;
    if (fresh && layers_[i]->paramCount() > 0) {
      while (range > 0 && ranges_[range - 1].layer > i) --range;
      writes = layers_[i]->overwritesGrads();
      if (!writes && range > 0 && ranges_[range - 1].layer == i) {
        const ParamRange& pr = ranges_[range - 1];
        std::fill_n(grads_.data() + pr.offset, pr.count, 0.0f);
      }
    }
    if (!layers_[i]->isReshape()) layers_[i]->backward(in, out_[i], dy, dx, n, writes ? overwrite : ctx);
    if (onLayerDone && layers_[i]->paramCount() > 0) onLayerDone(i);
    if (!needsInputGrad_[i]) {
      // Nothing below needs gradients; still report the remaining layers (none have params).
      break;
    }
    dy = dx;
  }
}

bool Sequential::gradientsFinite() const {
  for (const auto& l : layers_)
    if (!l->gradientsFinite()) return false;
  return true;
}

std::vector<LayerSummary> Sequential::summary() const {
  std::vector<LayerSummary> rows;
  for (const auto& l : layers_) rows.push_back({l->name, l->type(), l->outputShape, l->paramCount()});
  return rows;
}

int64_t Sequential::activationBytes(int64_t batch) const {
  // In double, saturated: an estimate for `summary --batch 2^62` must not overflow.
  double floats = 0;
  for (const auto& l : layers_)
    floats += (l->isReshape() ? 1.0 : 2.0) * static_cast<double>(batch) * static_cast<double>(l->outFeatures());
  const double bytes = floats * sizeof(float);
  return bytes >= 9.2e18 ? INT64_MAX : static_cast<int64_t>(bytes);
}

int64_t Sequential::bufferBytes() const {
  size_t floats = 0;
  for (size_t i = 0; i < layers_.size(); ++i) floats += acts_[i].size() + dacts_[i].size();
  return static_cast<int64_t>(floats * sizeof(float));
}

int64_t Sequential::lowPrecisionBytes(int64_t batch) const {
  int64_t bytes = 0;
  for (const auto& l : layers_) bytes += l->lowPrecisionBytes(batch);
  return bytes;
}

uint64_t Sequential::checksum() const { return fnv1a(params_.data(), params_.size() * sizeof(float)); }

}  // namespace ml
