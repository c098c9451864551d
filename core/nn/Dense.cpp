// Dense forward/backward with OpenBLAS sgemm; bias and activation are fused into one pass.
#include "nn/Dense.h"

#include <cblas.h>

#include "Error.h"
#include "Limits.h"
#include "nn/Initializers.h"
#include "tensor/Finite.h"

namespace ml {

Dense::Dense(int64_t units, Act act, bool useBias, std::string kernelInit, std::string biasInit)
    : units_(units), act_(act), useBias_(useBias), kernelInit_(std::move(kernelInit)), biasInit_(std::move(biasInit)) {}

Shape Dense::build(const Shape& input) {
  if (input.size() != 1)
    throw UserError("layer '" + name + "' (Dense) expects a flat input but gets shape " + shapeToString(input) +
                    ": add a Flatten layer before it");
  if (units_ <= 0) throw UserError("layer '" + name + "' (Dense): units must be positive, got " + std::to_string(units_));
  // in x units (+ units) must fit int64 before paramCount() multiplies them.
  const auto weights = mulChecked(input[0], units_);
  if (input[0] <= 0 || !weights || !addChecked(*weights, units_))
    throw UserError("layer '" + name + "' (Dense): " + std::to_string(input[0]) + " inputs x " + std::to_string(units_) +
                    " units is more weights than any machine holds: use fewer units");
  inputShape = input;
  outputShape = {units_};
  return outputShape;
}

void Dense::bind(float* params, float* grads) {
  w_ = params;
  dw_ = grads;
  b_ = useBias_ ? params + inFeatures() * units_ : nullptr;
  db_ = useBias_ ? grads + inFeatures() * units_ : nullptr;
}

void Dense::initialize(uint64_t seed) {
  ml::initialize(kernelInit_, w_, inFeatures() * units_, inFeatures(), units_, seed);
  if (useBias_) ml::initialize(biasInit_, b_, units_, inFeatures(), units_, seed ^ 0xB1A5ull);
}

// x (n, in) -> y (n, out)
void Dense::forward(const float* x, float* y, int64_t n, const StepContext&) {
  if (n == 0) return;
  const int64_t in = inFeatures(), out = units_;
  if (useBias_) {
    for (int64_t r = 0; r < n; ++r) std::copy(b_, b_ + out, y + r * out);
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(n), static_cast<int>(out),
              static_cast<int>(in), 1.0f, x, static_cast<int>(in), w_, static_cast<int>(out), useBias_ ? 1.0f : 0.0f, y,
              static_cast<int>(out));
  activationForward(act_, y, n, out);
}

// dy (n, out) -> dz (in place) -> dW += x^T dz, db += sum(dz), dx = dz W^T
void Dense::backward(const float* x, const float* y, float* dy, float* dx, int64_t n, const StepContext&) {
  if (n == 0) return;
  const int64_t in = inFeatures(), out = units_;
  if (!fusedSoftmax_) activationBackward(act_, y, dy, dy, n, out);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(in), static_cast<int>(out),
              static_cast<int>(n), 1.0f, x, static_cast<int>(in), dy, static_cast<int>(out), 1.0f, dw_,
              static_cast<int>(out));
  if (useBias_) {
    for (int64_t r = 0; r < n; ++r) {
      const float* row = dy + r * out;
      for (int64_t j = 0; j < out; ++j) db_[j] += row[j];
    }
  }
  if (dx)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n), static_cast<int>(in),
                static_cast<int>(out), 1.0f, dy, static_cast<int>(out), w_, static_cast<int>(out), 0.0f, dx,
                static_cast<int>(in));
}

bool Dense::gradientsFinite() const {
  // The whole kernel gradient: a NaN input swallowed by a relu (NaN > 0 is false) leaves the loss
  // and the bias gradient finite but poisons dW = x^T dz.
  return allFinite(dw_, static_cast<size_t>(inFeatures() * units_)) && (!useBias_ || allFinite(db_, static_cast<size_t>(units_)));
}

nlohmann::json Dense::args() const {
  nlohmann::json j{{"units", units_}, {"activation", toString(act_)}};
  if (!useBias_) j["use_bias"] = false;
  if (kernelInit_ != "glorot_uniform") j["kernel_initializer"] = kernelInit_;
  if (biasInit_ != "zeros") j["bias_initializer"] = biasInit_;
  return j;
}

}  // namespace ml
