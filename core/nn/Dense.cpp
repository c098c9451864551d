// Dense forward/backward with OpenBLAS sgemm; bias and activation are fused into one pass.
#include "nn/Dense.h"

#include <cblas.h>

#include <atomic>
#include <vector>

#include "Error.h"
#include "Limits.h"
#include "nn/Bf16Gemm.h"
#include "nn/Initializers.h"
#include "nn/ThreadTeam.h"
#include "tensor/Finite.h"

namespace ml {

Dense::Dense(int64_t units, Act act, bool useBias, std::string kernelInit, std::string biasInit)
    : units_(units), act_(act), useBias_(useBias), kernelInit_(std::move(kernelInit)), biasInit_(std::move(biasInit)) {}

Shape Dense::build(const Shape& input) {
  if (input.size() != 1)
    throw UserError("layer '" + name + "' (Dense) expects a flat input but gets shape " + shapeToString(input) +
                    ": add a Flatten layer before it");
  if (units_ <= 0) throw UserError("layer '" + name + "' (Dense): its Units must be positive, got " + std::to_string(units_));
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

namespace {
std::atomic<Dense::BackwardPlan> gForced{Dense::BackwardPlan::Auto};
// Below this many columns per thread a split costs more than it saves.
constexpr int64_t kMinColumnsPerThread = 8;
// A team splits GEMMs by columns of the result only: OpenBLAS blocks the inner dimension according
// to the number of rows, so a split by rows changes the sums' order (measured: not the serial
// bits), while every column block is computed exactly as in the whole product.
bool useTeam(const ThreadTeam* team, int64_t columns) {
  return team && team->size() > 1 && columns >= kMinColumnsPerThread * team->size();
}
}  // namespace

void Dense::forcePlan(BackwardPlan plan) { gForced.store(plan, std::memory_order_relaxed); }

// Measured with bench_kernels (BM_DenseBackwardPlan) on the 2-core machines of BUILDING.md: side
// by side wins while each GEMM is small enough that halving it leaves too little work per thread
// for the kernel's blocking (the packing of x^T and the edges dominate); split wins for big ones.
Dense::BackwardPlan Dense::choosePlan(int64_t in, int64_t out, int64_t n, int threads) {
  if (const BackwardPlan f = gForced.load(std::memory_order_relaxed); f != BackwardPlan::Auto) return f;
  if (threads < 2) return BackwardPlan::Split;
  const double flopsPerGemm = 2.0 * static_cast<double>(in) * static_cast<double>(out) * static_cast<double>(n);
  return threads == 2 && flopsPerGemm <= 4.2e8 ? BackwardPlan::SideBySide : BackwardPlan::Split;
}

// x (n, in) -> y (n, out). On a team each thread computes a block of output columns (bias, then
// GEMM), then the activation by rows (softmax needs whole rows).
void Dense::forward(const float* x, float* y, int64_t n, const StepContext&) {
  if (n == 0) return;
  if (precision_ != Precision::Float32) return forwardLow(x, y, n);
  const int64_t in = inFeatures(), out = units_;
  auto columns = [&](int64_t lo, int64_t hi) {
    if (useBias_) {
      for (int64_t r = 0; r < n; ++r) std::copy(b_ + lo, b_ + hi, y + r * out + lo);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(n), static_cast<int>(hi - lo), static_cast<int>(in),
                1.0f, x, static_cast<int>(in), w_ + lo, static_cast<int>(out), useBias_ ? 1.0f : 0.0f, y + lo,
                static_cast<int>(out));
  };
  ThreadTeam* team = ThreadTeam::current();
  if (!useTeam(team, out)) {
    columns(0, out);
    activationForward(act_, y, n, out);
    return;
  }
  team->split(out, columns);
  team->split(n, [&](int64_t lo, int64_t hi) { activationForward(act_, y + lo * out, hi - lo, out); });
}

// Columns [lo, hi) of dW += x^T dz and db += column sums of dz: the same kernel and the same order
// per element as the whole matrix, so any split gives the serial bits.
void Dense::weightGrad(const float* x, const float* dz, int64_t n, int64_t lo, int64_t hi) {
  const int64_t in = inFeatures(), out = units_;
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(in), static_cast<int>(hi - lo), static_cast<int>(n), 1.0f,
              x, static_cast<int>(in), dz + lo, static_cast<int>(out), 1.0f, dw_ + lo, static_cast<int>(out));
  if (useBias_) {
    for (int64_t r = 0; r < n; ++r) {
      const float* row = dz + r * out;
      for (int64_t j = lo; j < hi; ++j) db_[j] += row[j];
    }
  }
}

// Columns [lo, hi) of dx = dz W^T (rows lo..hi of W).
void Dense::inputGrad(const float* dz, float* dx, int64_t n, int64_t lo, int64_t hi) {
  const int64_t in = inFeatures(), out = units_;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n), static_cast<int>(hi - lo), static_cast<int>(out),
              1.0f, dz, static_cast<int>(out), w_ + lo * out, static_cast<int>(out), 0.0f, dx + lo, static_cast<int>(in));
}

// dy (n, out) -> dz (in place) -> dW += x^T dz, db += sum(dz), dx = dz W^T
void Dense::backward(const float* x, const float* y, float* dy, float* dx, int64_t n, const StepContext&) {
  if (n == 0) return;
  if (precision_ != Precision::Float32) return backwardLow(y, dy, dx, n);
  const int64_t out = units_;
  if (ThreadTeam* team = ThreadTeam::current(); team && team->size() > 1 && n >= 2 * team->size())
    return backwardOnTeam(y, x, dy, dx, n);
  if (!fusedSoftmax_) activationBackward(act_, y, dy, dy, n, out);
  weightGrad(x, dy, n, 0, out);
  if (dx) inputGrad(dy, dx, n, 0, inFeatures());
}

// The activation's gradient by rows; then either both GEMMs at once, one per thread (the bias
// gradient with the weight gradient), or each GEMM split by columns: dW (with db), then dx.
void Dense::backwardOnTeam(const float* y, const float* x, float* dz, float* dx, int64_t n) {
  ThreadTeam& team = *ThreadTeam::current();
  const int64_t in = inFeatures(), out = units_;
  if (!fusedSoftmax_)
    team.split(
        n, [&](int64_t lo, int64_t hi) { activationBackward(act_, y + lo * out, dz + lo * out, dz + lo * out, hi - lo, out); });
  if (dx && choosePlan(in, out, n, team.size()) == BackwardPlan::SideBySide) {
    team.run(2, [&](int t) {
      if (t == 0)
        weightGrad(x, dz, n, 0, out);
      else
        inputGrad(dz, dx, n, 0, in);
    });
    return;
  }
  if (useTeam(&team, out))
    team.split(out, [&](int64_t lo, int64_t hi) { weightGrad(x, dz, n, lo, hi); });
  else
    weightGrad(x, dz, n, 0, out);
  if (dx && useTeam(&team, in))
    team.split(in, [&](int64_t lo, int64_t hi) { inputGrad(dz, dx, n, lo, hi); });
  else if (dx)
    inputGrad(dz, dx, n, 0, in);
}

// Mixed precision, as a GPU computing in the low format: the rounded input and kernel multiplied
// with float32 accumulation (a product of two bfloat16 or two float16 values is exact in float32),
// plus the bias, rounded once; the activation in float32, its output rounded again except softmax's
// (its probabilities feed the float32 loss). bfloat16: forwardBf16. float16: sgemm on the rounded
// values, on one thread.
void Dense::forwardLow(const float* x, float* y, int64_t n) {
  if (precision_ == Precision::MixedBfloat16) return forwardBf16(x, y, n);
  const int64_t in = inFeatures(), out = units_;
  xq_.resize(static_cast<size_t>(n * in));
  wq_.resize(static_cast<size_t>(in * out));
  roundCopy(precision_, x, xq_.data(), xq_.size());
  roundCopy(precision_, w_, wq_.data(), wq_.size());
  if (useBias_)
    for (int64_t r = 0; r < n; ++r) std::copy(b_, b_ + out, y + r * out);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(n), static_cast<int>(out), static_cast<int>(in), 1.0f,
              xq_.data(), static_cast<int>(in), wq_.data(), static_cast<int>(out), useBias_ ? 1.0f : 0.0f, y,
              static_cast<int>(out));
  roundTo(precision_, y, static_cast<size_t>(n * out));
  activationForward(act_, y, n, out);
  if (act_ != Act::Softmax) roundTo(precision_, y, static_cast<size_t>(n * out));
}

// dz = act'(dy) rounded to the low format (where float16 loses gradients below 2^-24: loss scaling
// lifts them); the micro-batch's dW = x^T dz and db = sum(dz) come out rounded, as a low-precision
// GEMM's would, and are added to the float32 gradients; dx = dz W^T rounded. Uses forward's
// rounded input and kernel (the weights do not change between a forward and its backward).
void Dense::backwardLow(const float* y, float* dz, float* dx, int64_t n) {
  if (precision_ == Precision::MixedBfloat16) return backwardBf16(y, dz, dx, n);
  const int64_t in = inFeatures(), out = units_;
  if (!fusedSoftmax_) activationBackward(act_, y, dz, dz, n, out);
  roundTo(precision_, dz, static_cast<size_t>(n * out));
  dwq_.resize(static_cast<size_t>(in * out));
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(in), static_cast<int>(out), static_cast<int>(n), 1.0f,
              xq_.data(), static_cast<int>(in), dz, static_cast<int>(out), 0.0f, dwq_.data(), static_cast<int>(out));
  roundTo(precision_, dwq_.data(), dwq_.size());
  for (size_t i = 0; i < dwq_.size(); ++i) dw_[i] += dwq_[i];
  if (useBias_) {
    std::vector<float> sum(static_cast<size_t>(out), 0.0f);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < out; ++j) sum[static_cast<size_t>(j)] += dz[r * out + j];
    for (int64_t j = 0; j < out; ++j) db_[j] += roundOne(precision_, sum[static_cast<size_t>(j)]);
  }
  if (!dx) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n), static_cast<int>(in), static_cast<int>(out), 1.0f, dz,
              static_cast<int>(out), wq_.data(), static_cast<int>(out), 0.0f, dx, static_cast<int>(in));
  roundTo(precision_, dx, static_cast<size_t>(n * in));
}

// mixed_bfloat16: the same rounding as forwardLow, with bfloat16 operands multiplied by Bf16Gemm
// (oneDNN's native kernel where the CPU has one). On a team, the element-wise passes split by rows
// and each product by columns of its result, as float32's forward and backward do.
void Dense::forwardBf16(const float* x, float* y, int64_t n) {
  const int64_t in = inFeatures(), out = units_;
  xb_.resize(static_cast<size_t>(n * in));
  wb_.resize(static_cast<size_t>(in * out));
  parallelSplit(
      n, [&](int64_t lo, int64_t hi) { bf16::pack(x + lo * in, xb_.data() + lo * in, static_cast<size_t>((hi - lo) * in)); });
  parallelSplit(in, [&](int64_t lo, int64_t hi) {
    bf16::pack(w_ + lo * out, wb_.data() + lo * out, static_cast<size_t>((hi - lo) * out));
  });
  auto columns = [&](int64_t lo, int64_t hi) {
    bf16::gemm(false, false, n, hi - lo, in, xb_.data(), in, wb_.data() + lo, out, y + lo, out, useBias_ ? b_ + lo : nullptr);
  };
  if (ThreadTeam* team = ThreadTeam::current(); useTeam(team, out))
    team->split(out, columns);
  else
    columns(0, out);
  parallelSplit(n, [&](int64_t lo, int64_t hi) {
    float* rows = y + lo * out;
    const auto count = static_cast<size_t>((hi - lo) * out);
    bf16::roundInPlace(rows, count);
    activationForward(act_, rows, hi - lo, out);
    if (act_ != Act::Softmax && act_ != Act::Relu && act_ != Act::Linear)  // relu and linear keep bfloat16 values
      bf16::roundInPlace(rows, count);
  });
}

void Dense::backwardBf16(const float* y, float* dz, float* dx, int64_t n) {
  const int64_t in = inFeatures(), out = units_;
  dzb_.resize(static_cast<size_t>(n * out));
  parallelSplit(n, [&](int64_t lo, int64_t hi) {
    float* rows = dz + lo * out;
    if (!fusedSoftmax_) activationBackward(act_, y + lo * out, rows, rows, hi - lo, out);
    const auto count = static_cast<size_t>((hi - lo) * out);
    bf16::roundInPlace(rows, count);
    bf16::pack(rows, dzb_.data() + lo * out, count);  // exact: already rounded
  });
  dwb_.resize(static_cast<size_t>(in * out));
  // Columns [lo, hi) of the micro-batch's dW = x^T dz, rounded and added; db's the same columns.
  auto weightColumns = [&](int64_t lo, int64_t hi) {
    bf16::gemm(true, false, in, hi - lo, n, xb_.data(), in, dzb_.data() + lo, out, dwb_.data() + lo, out);  // rounded
    for (int64_t r = 0; r < in; ++r)
      bf16::addUnpacked(dwb_.data() + r * out + lo, dw_ + r * out + lo, static_cast<size_t>(hi - lo));
    if (!useBias_) return;
    std::vector<float> sum(static_cast<size_t>(hi - lo), 0.0f);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = lo; j < hi; ++j) sum[static_cast<size_t>(j - lo)] += dz[r * out + j];
    for (int64_t j = lo; j < hi; ++j) db_[j] += roundToBfloat16(sum[static_cast<size_t>(j - lo)]);
  };
  // Columns [lo, hi) of dx = dz W^T (rows lo..hi of W), rounded.
  auto inputColumns = [&](int64_t lo, int64_t hi) {
    bf16::gemm(false, true, n, hi - lo, out, dzb_.data(), out, wb_.data() + lo * out, out, dx + lo, in);
    for (int64_t r = 0; r < n; ++r) bf16::roundInPlace(dx + r * in + lo, static_cast<size_t>(hi - lo));
  };
  ThreadTeam* team = ThreadTeam::current();
  if (useTeam(team, out))
    team->split(out, weightColumns);
  else
    weightColumns(0, out);
  if (!dx) return;
  if (useTeam(team, in))
    team->split(in, inputColumns);
  else
    inputColumns(0, in);
}

int64_t Dense::lowPrecisionBytes(int64_t batch) const {
  const int64_t in = inFeatures(), out = units_;
  switch (precision_) {
    case Precision::Float32: return 0;
    case Precision::MixedBfloat16: return 2 * (batch * in + in * out + batch * out + in * out);  // xb, wb, dzb, dwb
    case Precision::MixedFloat16: return 4 * (batch * in + 2 * in * out);                        // xq, wq, dwq
  }
  return 0;
}

int64_t Dense::lowPrecisionBytesInUse() const {
  return static_cast<int64_t>(4 * (xq_.size() + wq_.size() + dwq_.size()) +
                              2 * (xb_.size() + wb_.size() + dzb_.size() + dwb_.size()));
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
