// Pooling over channels-last images: MaxPooling2D and AveragePooling2D (Keras' pool_size,
// strides = pool_size by default, padding valid|same; "same" windows average only the positions
// inside the image, as TensorFlow does) and GlobalAveragePooling2D (h, w, c) -> (c).
#pragma once
#include <vector>

#include "nn/Layer.h"
#include "nn/Spatial.h"

namespace ml {

class Conv2D;

class Pool2D : public Layer {
 public:
  Pool2D(bool max, Window win) : max_(max), win_(win) {}
  std::string type() const override { return max_ ? "MaxPooling2D" : "AveragePooling2D"; }
  Shape build(const Shape& input) override;
  void forward(const float* x, float* y, int64_t n, const StepContext& ctx) override;
  void backward(const float* x, const float* y, float* dy, float* dx, int64_t n, const StepContext& ctx) override;
  bool isMax() const { return max_; }
  const Window& window() const { return win_; }
  const Geometry& geometry() const { return g_; }
  // Max pooling: the input position, (iy * w + ix) * c + channel within its sample, each output of
  // the last forward came from (the GPU's argmax is held against it).
  const std::vector<int32_t>& argmax() const { return argmax_; }
  // Max pooling right above a ReLU (Sequential sets it, with the layer below's
  // Conv2D::setGradientMasked): backward passes no gradient where the pooled value is not
  // positive, which is ReLU's gradient at the winning position, so the layer below skips its own
  // pass over the whole input. Only the pairing changes where the mask is applied, not the bits.
  void setReluBelow(bool on) { reluBelow_ = on && max_; }
  // With a ReLU below and tiling windows, backward also sums the gradient it passes down per
  // channel (the convolution's bias gradient, which oneDNN would compute again from the whole
  // output gradient, mostly zeros): one row of channels per part of the samples, in part order.
  bool givesBiasGradient() const { return reluBelow_ && windowsTile(); }
  const std::vector<float>& biasGradientParts() const { return biasParts_; }
  // The windows lie inside the image (valid padding, or same padding that pads nothing).
  bool windowsInside() const;
  // Max pooling whose windows tile the image (strides = pool size, inside it): backward writes
  // every input position once, without a zeroing pass.
  bool windowsTile() const;
  void backwardTiled(const float* y, const float* dy, float* dx, int64_t n);
  // Max pooling fused with the Conv2D below (Conv2D::fusePoolAbove): forward asks the convolution
  // for the pooled output; backward keeps the gradient and the output for the convolution's
  // backward, which comes next, and writes no input gradient (the convolution computes none).
  void setFusedBelow(Conv2D* conv) { fusedBelow_ = conv; }
  const float* pendingGradient() const { return pendingGrad_; }
  const float* pendingOutput() const { return pendingOut_; }

 private:
  bool fused() const;
  Conv2D* fusedBelow_ = nullptr;
  const float *pendingGrad_ = nullptr, *pendingOut_ = nullptr;
  bool reluBelow_ = false;
  bool max_;
  Window win_;
  Geometry g_;
  std::vector<int32_t> argmax_;   // max pooling: the input position each output came from (last forward)
  std::vector<float> biasParts_;  // givesBiasGradient: the channel sums of the last backward, per part
};

class GlobalAveragePooling2D : public Layer {
 public:
  std::string type() const override { return "GlobalAveragePooling2D"; }
  Shape build(const Shape& input) override;
  void forward(const float* x, float* y, int64_t n, const StepContext& ctx) override;
  void backward(const float* x, const float* y, float* dy, float* dx, int64_t n, const StepContext& ctx) override;
};

}  // namespace ml
