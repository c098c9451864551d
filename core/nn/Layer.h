// A layer is a pair of functions, forward and backward, over batch-major matrices.
// Conventions (as in llm.c): parameter gradients ACCUMULATE (+=) so that micro-batches and
// replicas can add into one buffer; activation gradients OVERWRITE (=).
// Parameters live in the model's one flat buffer; a layer only holds views into it (bind).
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "nn/LayerSpecs.h"
#include "tensor/Shape.h"

namespace ml {

struct StepContext;

// Sums a few numbers across the replicas of one mirrored step (synchronized BatchNormalization
// statistics). Every replica that has rows in the micro-batch calls it the same number of times
// with vectors of the same length; each call returns the sum (added in replica order, so every
// replica gets the same bits). The strategy provides it; the layers know nothing of threads.
class ReplicaSum {
 public:
  virtual ~ReplicaSum() = default;
  virtual void sum(const StepContext& ctx, std::span<double> values) = 0;
};

struct StepContext {
  bool training = false;
  uint64_t seed = 0;
  uint64_t step = 0;                   // optimizer step (randomness key)
  const int64_t* sampleIds = nullptr;  // global sample index of each row (randomness key)
  // Cross-replica sums for the layers that need them; null outside a mirrored step of 2+ replicas
  // in all (the layer's own rows are then the whole batch).
  ReplicaSum* replicaSum = nullptr;
  int replica = 0;  // this replica's rank
  int micro = 0;    // the micro-batch (gradient accumulation)
  int peers = 1;    // this worker's replicas, which call replicaSum in this micro-batch
  // Set by Sequential for a layer whose overwritesGrads() is true, on the first backward after
  // discardGrads(): the pass WRITES its parameter gradients (=) instead of adding to stale values.
  bool overwriteGrads = false;
  // Sums v across the replicas of the step (in place), every worker's; a no-op with one replica.
  void sumAcrossReplicas(std::span<double> v) const {
    if (replicaSum) replicaSum->sum(*this, v);
  }
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string type() const = 0;
  // Sets input/output shapes; throws UserError naming the layer when the input does not fit.
  virtual Shape build(const Shape& input) = 0;
  virtual int64_t paramCount() const { return 0; }
  // Of paramCount(), the values no optimizer changes (BatchNormalization's moving statistics, the
  // last ones of its slice): their gradient stays zero, so every optimizer leaves them as they are.
  virtual int64_t nonTrainableCount() const { return 0; }
  // Points the layer at its slice of the flat parameter and gradient buffers.
  virtual void bind(float* /*params*/, float* /*grads*/) {}
  virtual void initialize(uint64_t /*seed*/) {}
  // x (n, in) -> y (n, out)
  virtual void forward(const float* x, float* y, int64_t n, const StepContext& ctx) = 0;
  // dy (n, out) -> dx (n, in), dx may be null (nothing below needs it); param grads += (= when
  // ctx.overwriteGrads).
  // dy is scratch: the layer may overwrite it (e.g. with the pre-activation gradient).
  virtual void backward(const float* x, const float* y, float* dy, float* dx, int64_t n, const StepContext& ctx) = 0;
  // True when backward honours ctx.overwriteGrads (writes every parameter gradient of its slice);
  // for the others Sequential zeroes the slice before their first backward after discardGrads().
  virtual bool overwritesGrads() const { return false; }
  // True when training calls ctx.sumAcrossReplicas (BatchNormalization): every replica then runs
  // each micro-batch, an empty shard included, so that all of them join every sum.
  virtual bool needsReplicaSum() const { return false; }
  // False when this pass left a non-finite parameter gradient.
  virtual bool gradientsFinite() const { return true; }
  // What a mixed-precision policy adds per replica at this batch: the layer's low-precision working
  // copies (rounded or bfloat16 inputs, kernel and gradients); 0 under float32. And the bytes its
  // working copies hold now (tests compare the two after a step).
  virtual int64_t lowPrecisionBytes(int64_t /*batch*/) const { return 0; }
  virtual int64_t lowPrecisionBytesInUse() const { return 0; }
  // A layer whose output is its input (Flatten): the model skips the copy.
  virtual bool isReshape() const { return false; }
  // The arguments the layer was made from and its registry entry (makeLayer sets both, pointing at
  // the spec, which outlives the layer: the model keeps it); a layer made by hand (a test's) has no
  // kind, and every exporter refuses it by name.
  const LayerArgs& args() const;
  const LayerKind* kind() const { return kind_; }
  void setOrigin(const LayerKind& kind, const LayerArgs& args) {
    kind_ = &kind;
    args_ = &args;
  }

  std::string name;
  Shape inputShape, outputShape;
  int64_t inFeatures() const { return numel(inputShape); }
  int64_t outFeatures() const { return numel(outputShape); }

 private:
  const LayerKind* kind_ = nullptr;
  const LayerArgs* args_ = nullptr;
};

}  // namespace ml
