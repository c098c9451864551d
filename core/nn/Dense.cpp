// Dense forward/backward on nn/Sgemm.h's products (oneDNN matmul or OpenBLAS sgemm).
#include "nn/Dense.h"

#include <algorithm>
#include <atomic>
#include <utility>
#include <vector>

#include "Error.h"
#include "Limits.h"
#include "nn/Bf16Gemm.h"
#include "nn/Initializers.h"
#include "nn/Sgemm.h"
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
// Below this many rows (samples) per thread a split costs more than it saves.
constexpr int64_t kMinRowsPerThread = 8;
// A team splits each product by rows of its result: samples for the output and the input gradient,
// inputs for the weight gradient. Every part is then a whole-width product with dense operands,
// which oneDNN's blocked kernel needs (a block of columns of a wider matrix gets its generic
// kernel, measured 2x slower); the weight gradient's part packs its columns of x first (n x part
// values against 2 n x part x units flops). Split products sum in another order than the whole one
// (OpenBLAS and oneDNN alike block the inner dimension by the shape), so a team agrees with the
// serial path to float rounding, and gives the same bits every time.
bool useTeam(const ThreadTeam* team, int64_t rows) {
  return team && team->size() > 1 && rows >= kMinRowsPerThread * team->size();
}

// Part i of parts of [0, count), as ThreadTeam::split cuts it.
std::pair<int64_t, int64_t> partOf(int64_t count, int i, int parts) { return {count * i / parts, count * (i + 1) / parts}; }

// Columns [lo, hi) of the row-major n x width matrix m: m itself when that is all of it, else a
// dense copy in `block`.
template <typename T>
const T* columnBlock(const T* m, int64_t n, int64_t width, int64_t lo, int64_t hi, std::vector<T>& block) {
  if (lo == 0 && hi == width) return m;
  const int64_t w = hi - lo;
  block.resize(static_cast<size_t>(n * w));
  for (int64_t r = 0; r < n; ++r) std::copy(m + r * width + lo, m + r * width + hi, block.data() + r * w);
  return block.data();
}
thread_local std::vector<float> tBlock;
thread_local std::vector<uint16_t> tBlockBf16;
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

// x (n, in) -> y (n, out): y = x W + b (the bias added by the product), then the activation, by
// rows: on a team each thread computes a block of samples.
void Dense::forward(const float* x, float* y, int64_t n, const StepContext&) {
  if (n == 0) return;
  if (precision_ != Precision::Float32) return forwardLow(x, y, n);
  const int64_t in = inFeatures(), out = units_;
  auto rows = [&](int64_t lo, int64_t hi) {
    sgemm::gemm(false, false, hi - lo, out, in, x + lo * in, in, w_, out, y + lo * out, out, false, useBias_ ? b_ : nullptr);
    activationForward(act_, y + lo * out, hi - lo, out);
  };
  if (ThreadTeam* team = ThreadTeam::current(); useTeam(team, n))
    team->split(n, rows);
  else
    rows(0, n);
}

// Rows [lo, hi) of dW += x^T dz (= when overwrite_): x's columns lo..hi against all of dz.
void Dense::weightGrad(const float* x, const float* dz, int64_t n, int64_t lo, int64_t hi) {
  const int64_t in = inFeatures(), out = units_;
  const float* a = columnBlock(x, n, in, lo, hi, tBlock);
  sgemm::gemm(true, false, hi - lo, out, n, a, a == x ? in : hi - lo, dz, out, dw_ + lo * out, out, !overwrite_);
}

// Columns [lo, hi) of db += the column sums of dz (each column's sum in row order, as serially).
void Dense::biasGrad(const float* dz, int64_t n, int64_t lo, int64_t hi) {
  if (!useBias_) return;
  const int64_t out = units_;
  if (overwrite_) std::fill(db_ + lo, db_ + hi, 0.0f);
  for (int64_t r = 0; r < n; ++r) {
    const float* row = dz + r * out;
    for (int64_t j = lo; j < hi; ++j) db_[j] += row[j];
  }
}

// Rows (samples) [lo, hi) of dx = dz W^T.
void Dense::inputGrad(const float* dz, float* dx, int64_t lo, int64_t hi) {
  const int64_t in = inFeatures(), out = units_;
  sgemm::gemm(false, true, hi - lo, in, out, dz + lo * out, out, w_, out, dx + lo * in, in);
}

// dy (n, out) -> dz (in place) -> dW += x^T dz, db += sum(dz) (= for both when ctx.overwriteGrads),
// dx = dz W^T
void Dense::backward(const float* x, const float* y, float* dy, float* dx, int64_t n, const StepContext& ctx) {
  if (n == 0) return;
  overwrite_ = ctx.overwriteGrads;
  if (precision_ != Precision::Float32) {
    if (overwrite_) {  // the low-precision paths add their rounded products: start from zero
      std::fill_n(dw_, inFeatures() * units_, 0.0f);
      if (useBias_) std::fill_n(db_, units_, 0.0f);
      overwrite_ = false;
    }
    return backwardLow(y, dy, dx, n);
  }
  const int64_t out = units_;
  if (ThreadTeam* team = ThreadTeam::current(); team && team->size() > 1 && n >= 2 * team->size())
    return backwardOnTeam(y, x, dy, dx, n);
  if (!fusedSoftmax_) activationBackward(act_, y, dy, dy, n, out);
  weightGrad(x, dy, n, 0, inFeatures());
  biasGrad(dy, n, 0, out);
  if (dx) inputGrad(dy, dx, 0, n);
}

// The activation's gradient by rows; then either both products at once, one per thread (the bias
// gradient with the input gradient; the serial calls), or each split: every thread a block of
// dW's rows and of db's columns, then a block of dx's rows.
void Dense::backwardOnTeam(const float* y, const float* x, float* dz, float* dx, int64_t n) {
  ThreadTeam& team = *ThreadTeam::current();
  const int64_t in = inFeatures(), out = units_;
  if (!fusedSoftmax_)
    team.split(
        n, [&](int64_t lo, int64_t hi) { activationBackward(act_, y + lo * out, dz + lo * out, dz + lo * out, hi - lo, out); });
  if (dx && choosePlan(in, out, n, team.size()) == BackwardPlan::SideBySide) {
    // The bias gradient goes with the input gradient: the weight gradient, accumulated, is the
    // longer product of the two (oneDNN, 512x512 at batch 256: 799 against 748 us).
    team.run(2, [&](int t) {
      if (t == 0) {
        weightGrad(x, dz, n, 0, in);
      } else {
        inputGrad(dz, dx, 0, n);
        biasGrad(dz, n, 0, out);
      }
    });
    return;
  }
  const int parts = team.size();
  team.run(parts, [&](int t) {
    if (const auto [lo, hi] = partOf(in, t, parts); hi > lo) weightGrad(x, dz, n, lo, hi);
    if (const auto [lo, hi] = partOf(out, t, parts); hi > lo) biasGrad(dz, n, lo, hi);
  });
  if (dx) team.split(n, [&](int64_t lo, int64_t hi) { inputGrad(dz, dx, lo, hi); });
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
  sgemm::gemm(false, false, n, out, in, xq_.data(), in, wq_.data(), out, y, out, false, useBias_ ? b_ : nullptr);
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
  sgemm::gemm(true, false, in, out, n, xq_.data(), in, dz, out, dwq_.data(), out);
  roundTo(precision_, dwq_.data(), dwq_.size());
  for (size_t i = 0; i < dwq_.size(); ++i) dw_[i] += dwq_[i];
  if (useBias_) {
    std::vector<float> sum(static_cast<size_t>(out), 0.0f);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < out; ++j) sum[static_cast<size_t>(j)] += dz[r * out + j];
    for (int64_t j = 0; j < out; ++j) db_[j] += roundOne(precision_, sum[static_cast<size_t>(j)]);
  }
  if (!dx) return;
  sgemm::gemm(false, true, n, in, out, dz, out, wq_.data(), out, dx, in);
  roundTo(precision_, dx, static_cast<size_t>(n * in));
}

// mixed_bfloat16: the same rounding as forwardLow, with bfloat16 operands multiplied by Bf16Gemm
// (oneDNN's native kernel where the CPU has one). On a team the work splits as float32's does: by
// samples, except the weight gradient (by its rows) and the bias gradient (by its columns).
void Dense::forwardBf16(const float* x, float* y, int64_t n) {
  const int64_t in = inFeatures(), out = units_;
  xb_.resize(static_cast<size_t>(n * in));
  wb_.resize(static_cast<size_t>(in * out));
  parallelSplit(in, [&](int64_t lo, int64_t hi) {
    bf16::pack(w_ + lo * out, wb_.data() + lo * out, static_cast<size_t>((hi - lo) * out));
  });
  auto rows = [&](int64_t lo, int64_t hi) {
    bf16::pack(x + lo * in, xb_.data() + lo * in, static_cast<size_t>((hi - lo) * in));
    float* yr = y + lo * out;
    bf16::gemm(false, false, hi - lo, out, in, xb_.data() + lo * in, in, wb_.data(), out, yr, out, useBias_ ? b_ : nullptr);
    const auto count = static_cast<size_t>((hi - lo) * out);
    bf16::roundInPlace(yr, count);
    activationForward(act_, yr, hi - lo, out);
    if (act_ != Act::Softmax && act_ != Act::Relu && act_ != Act::Linear)  // relu and linear keep bfloat16 values
      bf16::roundInPlace(yr, count);
  };
  if (ThreadTeam* team = ThreadTeam::current(); useTeam(team, n))
    team->split(n, rows);
  else
    rows(0, n);
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
  // Rows [lo, hi) of the micro-batch's dW = x^T dz (xb's columns lo..hi), rounded and added.
  auto weightRows = [&](int64_t lo, int64_t hi) {
    const uint16_t* a = columnBlock(xb_.data(), n, in, lo, hi, tBlockBf16);
    bf16::gemm(true, false, hi - lo, out, n, a, a == xb_.data() ? in : hi - lo, dzb_.data(), out, dwb_.data() + lo * out,
               out);  // rounded
    bf16::addUnpacked(dwb_.data() + lo * out, dw_ + lo * out, static_cast<size_t>((hi - lo) * out));
  };
  // Columns [lo, hi) of db += the column sums of dz, each rounded.
  auto biasColumns = [&](int64_t lo, int64_t hi) {
    if (!useBias_) return;
    std::vector<float> sum(static_cast<size_t>(hi - lo), 0.0f);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = lo; j < hi; ++j) sum[static_cast<size_t>(j - lo)] += dz[r * out + j];
    for (int64_t j = lo; j < hi; ++j) db_[j] += roundToBfloat16(sum[static_cast<size_t>(j - lo)]);
  };
  // Rows (samples) [lo, hi) of dx = dz W^T, rounded.
  auto inputRows = [&](int64_t lo, int64_t hi) {
    bf16::gemm(false, true, hi - lo, in, out, dzb_.data() + lo * out, out, wb_.data(), out, dx + lo * in, in);
    bf16::roundInPlace(dx + lo * in, static_cast<size_t>((hi - lo) * in));
  };
  ThreadTeam* team = ThreadTeam::current();
  if (!team || team->size() < 2 || n < 2 * team->size()) {
    weightRows(0, in);
    biasColumns(0, out);
    if (dx) inputRows(0, n);
    return;
  }
  if (dx && choosePlan(in, out, n, team->size()) == BackwardPlan::SideBySide) {
    team->run(2, [&](int t) {
      if (t == 0) {
        weightRows(0, in);
        biasColumns(0, out);
      } else {
        inputRows(0, n);
      }
    });
    return;
  }
  const int parts = team->size();
  team->run(parts, [&](int t) {
    if (const auto [lo, hi] = partOf(in, t, parts); hi > lo) weightRows(lo, hi);
    if (const auto [lo, hi] = partOf(out, t, parts); hi > lo) biasColumns(lo, hi);
  });
  if (dx) team->split(n, inputRows);
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
  // On a team (one replica on several cores, checked between backward's layers) each thread reads
  // a block: the check is one pass over the gradient, as long as the memory it streams.
  std::atomic<bool> finite{!useBias_ || allFinite(db_, static_cast<size_t>(units_))};
  parallelSplit(inFeatures() * units_, [&](int64_t lo, int64_t hi) {
    if (!allFinite(dw_ + lo, static_cast<size_t>(hi - lo))) finite.store(false, std::memory_order_relaxed);
  });
  return finite.load(std::memory_order_relaxed);
}

}  // namespace ml
