// A contiguous float32 buffer with a batch-major shape (first dimension = samples).
#pragma once
#include <cassert>
#include <span>
#include <vector>

#include "tensor/Shape.h"

namespace ml {

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Shape shape, float fill = 0.0f) : shape_(std::move(shape)), data_(numel(shape_), fill) {}

  const Shape& shape() const { return shape_; }
  int64_t size() const { return static_cast<int64_t>(data_.size()); }
  int64_t rows() const { return shape_.empty() ? 0 : shape_[0]; }
  int64_t cols() const { return rows() == 0 ? 0 : size() / rows(); }
  float* data() { return data_.data(); }
  const float* data() const { return data_.data(); }
  float& operator[](int64_t i) { return data_[static_cast<size_t>(i)]; }
  float operator[](int64_t i) const { return data_[static_cast<size_t>(i)]; }
  float& at(int64_t r, int64_t c) { return data_[static_cast<size_t>(r * cols() + c)]; }
  float at(int64_t r, int64_t c) const { return data_[static_cast<size_t>(r * cols() + c)]; }
  std::span<float> span() { return data_; }
  std::span<const float> span() const { return data_; }
  std::vector<float>& vec() { return data_; }
  const std::vector<float>& vec() const { return data_; }

  // Grows the buffer (never shrinks capacity) and sets the shape.
  void resize(Shape shape) {
    shape_ = std::move(shape);
    data_.resize(static_cast<size_t>(numel(shape_)));
  }

 private:
  Shape shape_;
  std::vector<float> data_;
};

}  // namespace ml
