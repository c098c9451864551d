// A Keras-style Sequential model: an ordered list of layers over ONE flat parameter buffer and
// ONE flat gradient buffer (per-layer views into both), so zeroing is one call and the all-reduce
// sees one contiguous array. Each replica of the mirrored strategy owns one Sequential.
#pragma once
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nn/Layer.h"
#include "nn/Loss.h"
#include "nn/Specs.h"

namespace ml {

struct LayerSummary {
  std::string name, type;
  Shape outputShape;
  int64_t params = 0;
};

class Sequential {
 public:
  // Builds the layers and checks the shapes; throws UserError naming the layer that does not fit.
  explicit Sequential(const ModelSpec& spec);
  Sequential(const Sequential&) = delete;
  Sequential& operator=(const Sequential&) = delete;

  const ModelSpec& spec() const { return spec_; }  // with generated names filled in
  size_t layerCount() const { return layers_.size(); }
  Layer& layer(size_t i) { return *layers_[i]; }
  const Layer& layer(size_t i) const { return *layers_[i]; }
  const Shape& inputShape() const { return spec_.inputShape; }
  const Shape& outputShape() const { return outputShape_; }
  int64_t inFeatures() const { return numel(spec_.inputShape); }
  int64_t outFeatures() const { return numel(outputShape_); }

  int64_t paramCount() const { return static_cast<int64_t>(params_.size()); }
  // Of paramCount(), the values no optimizer changes (BatchNormalization's moving statistics).
  int64_t nonTrainableCount() const;
  std::span<float> params() { return params_; }
  std::span<const float> params() const { return params_; }
  std::span<float> grads() { return grads_; }
  std::span<const float> grads() const { return grads_; }
  // Where each layer's parameters sit in the flat buffers (offset in floats), in layer order.
  struct ParamRange {
    size_t layer;
    int64_t offset, count;
  };
  const std::vector<ParamRange>& paramRanges() const { return ranges_; }

  void initialize(uint64_t seed);
  void zeroGrads();
  // zeroGrads without touching the buffer: the next backward writes the gradients (layers that
  // overwrite) or zeroes each layer's slice just before its pass (the rest). A step saves a pass
  // over every gradient (3% of a cpu:2 step of the wide MLP) where oneDNN computes Dense's products;
  // OpenBLAS zeroes a product's output itself before adding (beta = 0), so there the pass only moves
  // into sgemm. Until that backward the buffer holds stale values: settleGrads() zeroes it for
  // anyone who reads it first (a replica with no rows this step, a fault that poisons it).
  void discardGrads() { discarded_ = true; }
  void settleGrads();
  // Lets the loss fuse with a softmax output layer (exact p - y gradient, no Jacobian pass).
  void configureLoss(Loss& loss);

  // x (n, inFeatures) -> returns the output (n, outFeatures); valid until the next forward.
  const float* forward(const float* x, int64_t n, const StepContext& ctx);
  // Writable buffer (n, outFeatures) for the loss to put d(sum loss)/d(output) in.
  float* outputGrad(int64_t n);
  // Backward from outputGrad(): parameter gradients ACCUMULATE (the first pass after discardGrads
  // writes them). onLayerDone(i) is called as soon
  // as layer i's parameter gradients are final for this pass (the all-reduce starts buckets then).
  void backward(const float* x, int64_t n, const StepContext& ctx, const std::function<void(size_t)>& onLayerDone = {});

  // Every layer's gradient witness is finite (see Layer::gradientsFinite).
  bool gradientsFinite() const;

  std::vector<LayerSummary> summary() const;
  // Bytes a replica needs for a batch of `batch`: params, grads, activations and their gradients.
  int64_t activationBytes(int64_t batch) const;
  // What the activation and activation-gradient buffers hold now (bytes): forward alone (an
  // evaluation) allocates no gradients.
  int64_t bufferBytes() const;
  // The low-precision working copies of a mixed policy (Layer::lowPrecisionBytes), summed.
  int64_t lowPrecisionBytes(int64_t batch) const;
  // FNV-1a over the parameter bytes: equal checksums = bit-identical replicas.
  uint64_t checksum() const;

 private:
  void ensureCapacity(int64_t n);      // activations for n samples
  void ensureGradCapacity(int64_t n);  // and their gradients
  void maskReluUnderPooling();

  ModelSpec spec_;
  std::vector<std::unique_ptr<Layer>> layers_;
  Shape outputShape_;
  std::vector<float> params_, grads_;
  std::vector<ParamRange> ranges_;
  std::vector<std::vector<float>> acts_, dacts_;  // per layer output and its gradient
  std::vector<const float*> out_;                 // per layer output pointer of the last forward
  std::vector<bool> needsInputGrad_;              // does anything below layer i have parameters?
  int64_t capacity_ = 0, gradCapacity_ = 0;
  bool discarded_ = false;  // discardGrads() since the last backward
};

// FNV-1a 64: the standard offset basis, and the one files written before it (weights version 1,
// checkpoints version 1) were checksummed with, a digit short; kept so that they still load.
inline constexpr uint64_t kFnvOffsetBasis = 14695981039346656037ull;
inline constexpr uint64_t kFnvLegacyBasis = 1469598103934665603ull;
uint64_t fnv1a(const void* data, size_t bytes, uint64_t h = kFnvOffsetBasis);

}  // namespace ml
