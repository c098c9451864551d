// Pooling over channels-last images: MaxPooling2D and AveragePooling2D (Keras' pool_size,
// strides = pool_size by default, padding valid|same; "same" windows average only the positions
// inside the image, as TensorFlow does) and GlobalAveragePooling2D (h, w, c) -> (c).
#pragma once
#include <vector>

#include "nn/Layer.h"
#include "nn/Spatial.h"

namespace ml {

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

 private:
  bool max_;
  Window win_;
  Geometry g_;
  std::vector<int32_t> argmax_;  // max pooling: the input position each output came from (last forward)
};

class GlobalAveragePooling2D : public Layer {
 public:
  std::string type() const override { return "GlobalAveragePooling2D"; }
  Shape build(const Shape& input) override;
  void forward(const float* x, float* y, int64_t n, const StepContext& ctx) override;
  void backward(const float* x, const float* y, float* dy, float* dx, int64_t n, const StepContext& ctx) override;
};

}  // namespace ml
