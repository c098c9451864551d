// Conv2D forward/backward: im2col (each output position's window as one row, in the kernel's
// (kh, kw, c) order) and OpenBLAS sgemm against the kernel viewed as a (kh*kw*c, filters) matrix.
// Samples are processed in chunks so the column buffer stays a few MiB whatever the batch.
#include "nn/Conv2D.h"

#include <cblas.h>
#include <algorithm>
#include <cstring>
#include <functional>

#include "Error.h"
#include "Limits.h"
#include "nn/Bf16Gemm.h"
#include "nn/ConvPool.h"
#include "nn/Initializers.h"
#include "nn/OneDnnConv.h"
#include "nn/Pooling.h"
#include "nn/ThreadTeam.h"
#include "tensor/Finite.h"

namespace ml {

void im2col(const float* x, int64_t n, const Geometry& g, const Window& win, float* cols) {
  const int64_t patch = win.kh * win.kw * g.c;
  for (int64_t i = 0; i < n; ++i) {
    const float* img = x + i * g.h * g.w * g.c;
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        float* row = cols + ((i * g.oh + oy) * g.ow + ox) * patch;
        for (int64_t ky = 0; ky < win.kh; ++ky) {
          const int64_t iy = oy * win.sh - g.padTop + ky;
          float* dst = row + ky * win.kw * g.c;
          if (iy < 0 || iy >= g.h) {
            std::fill(dst, dst + win.kw * g.c, 0.0f);
            continue;
          }
          for (int64_t kx = 0; kx < win.kw; ++kx) {
            const int64_t ix = ox * win.sw - g.padLeft + kx;
            if (ix < 0 || ix >= g.w)
              std::fill(dst + kx * g.c, dst + (kx + 1) * g.c, 0.0f);
            else
              std::memcpy(dst + kx * g.c, img + (iy * g.w + ix) * g.c, static_cast<size_t>(g.c) * sizeof(float));
          }
        }
      }
  }
}

void col2imAdd(const float* dcols, int64_t n, const Geometry& g, const Window& win, float* dx) {
  const int64_t patch = win.kh * win.kw * g.c;
  for (int64_t i = 0; i < n; ++i) {
    float* img = dx + i * g.h * g.w * g.c;
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        const float* row = dcols + ((i * g.oh + oy) * g.ow + ox) * patch;
        for (int64_t ky = 0; ky < win.kh; ++ky) {
          const int64_t iy = oy * win.sh - g.padTop + ky;
          if (iy < 0 || iy >= g.h) continue;
          for (int64_t kx = 0; kx < win.kw; ++kx) {
            const int64_t ix = ox * win.sw - g.padLeft + kx;
            if (ix < 0 || ix >= g.w) continue;
            const float* src = row + (ky * win.kw + kx) * g.c;
            float* dst = img + (iy * g.w + ix) * g.c;
            for (int64_t ch = 0; ch < g.c; ++ch) dst[ch] += src[ch];
          }
        }
      }
  }
}

Conv2D::Conv2D(int64_t filters, Window win, Act act, bool useBias, std::string kernelInit, std::string biasInit)
    : filters_(filters),
      win_(win),
      act_(act),
      useBias_(useBias),
      kernelInit_(std::move(kernelInit)),
      biasInit_(std::move(biasInit)) {}

Shape Conv2D::build(const Shape& input) {
  if (act_ == Act::Softmax)
    throw UserError("layer '" + name +
                    "' (Conv2D): its Activation softmax is not offered on a convolution: use relu (or linear) "
                    "and put the softmax on the last Dense layer");
  g_ = spatialGeometry(name, type(), input, win_, "kernel");
  const auto k = mulChecked(patch(), filters_);
  if (!k || *k > kMaxFeatures)
    throw UserError("layer '" + name + "' (Conv2D): " + std::to_string(filters_) + " filters of " + std::to_string(patch()) +
                    " weights each is more than any machine holds: use fewer filters or a smaller kernel");
  const auto out = mulChecked(g_.oh * g_.ow, filters_);
  if (!out || *out > kMaxFeatures)
    throw UserError("layer '" + name + "' (Conv2D): its output " + std::to_string(g_.oh) + "x" + std::to_string(g_.ow) + "x" +
                    std::to_string(filters_) + " is too large: use strides, pooling or fewer filters");
  inputShape = input;
  outputShape = {g_.oh, g_.ow, filters_};
  return outputShape;
}

void Conv2D::bind(float* params, float* grads) {
  w_ = params;
  dw_ = grads;
  b_ = useBias_ ? params + kernelSize() : nullptr;
  db_ = useBias_ ? grads + kernelSize() : nullptr;
}

void Conv2D::initialize(uint64_t seed) {
  // Keras' fans for a convolution kernel: receptive field x input / output channels.
  const int64_t field = win_.kh * win_.kw;
  ml::initialize(kernelInit_, w_, kernelSize(), field * g_.c, field * filters_, seed);
  if (useBias_) ml::initialize(biasInit_, b_, filters_, field * g_.c, field * filters_, seed ^ 0xB1A5ull);
}

int64_t Conv2D::chunkRows(int64_t n) const {
  const int64_t perSample = std::max<int64_t>(1, g_.oh * g_.ow * patch());
  return std::clamp<int64_t>((int64_t{1} << 21) / perSample, 1, std::max<int64_t>(n, 1));
}

namespace {
// Below this many columns per thread a split of a product costs more than it saves.
constexpr int64_t kMinColumnsPerThread = 8;

// The team of the replica on this thread when it has several threads (float32 only), else null.
// As Dense on a team (tests/core/nn/ThreadTeamTest.cpp): im2col, col2im and the element-wise passes
// split by samples or rows, which keeps every value's bits; whole products side by side (backward
// on two threads) are the serial calls, the same bits; a product split by columns of its result
// agrees to float rounding (OpenBLAS' blocking follows the block's shape), and is the same from
// run to run.
ThreadTeam* floatTeam(Precision p) {
  ThreadTeam* team = ThreadTeam::current();
  return p == Precision::Float32 && team && team->size() > 1 ? team : nullptr;
}

// The team of the replica on this thread when it has several threads, for the oneDNN paths of
// either type (the same splits by samples and rows), else null.
ThreadTeam* anyTeam() {
  ThreadTeam* team = ThreadTeam::current();
  return team && team->size() > 1 ? team : nullptr;
}

void forRows(ThreadTeam* team, int64_t count, const std::function<void(int64_t, int64_t)>& part) {
  if (team && count >= team->size())
    team->split(count, part);
  else
    part(0, count);
}

void forColumns(ThreadTeam* team, int64_t columns, const std::function<void(int64_t, int64_t)>& part) {
  if (team && columns >= kMinColumnsPerThread * team->size())
    team->split(columns, part);
  else
    part(0, columns);
}
}  // namespace

bool Conv2D::fusePoolAbove(Pool2D* pool) {
  const bool fits =
      pool && pool->isMax() && act_ == Act::Relu && convpool::fits({g_, win_, pool->geometry(), pool->window(), filters_});
  pool_ = fits ? pool : nullptr;
  return fits;
}

// Fused with the pooling above: this layer's forward only keeps its input; the pooling's forward
// computes both layers here. On a team each thread takes its own samples. mixed_bfloat16: the
// input and kernel rounded first (the products of bfloat16 values are exact in float32).
void Conv2D::forwardPooled(float* pooled, int32_t* argmax, int64_t n) {
  const convpool::Shapes s{g_, win_, pool_->geometry(), pool_->window(), filters_};
  const int64_t in = inFeatures(), out = pool_->outFeatures();
  const bool bf = precision_ == Precision::MixedBfloat16;
  const float* x = fusedX_;
  const float* w = w_;
  if (bf) {
    wq_.resize(static_cast<size_t>(kernelSize()));
    roundCopy(precision_, w_, wq_.data(), wq_.size());
    w = wq_.data();
    xr_.resize(static_cast<size_t>(n * in));
  }
  forRows(anyTeam(), n, [&](int64_t lo, int64_t hi) {
    const float* xs = x + lo * in;
    if (bf) {
      roundCopy(precision_, xs, xr_.data() + lo * in, static_cast<size_t>((hi - lo) * in));
      xs = xr_.data() + lo * in;
    }
    convpool::forward(s, hi - lo, xs, w, useBias_ ? b_ : nullptr, pooled + lo * out, argmax + lo * out, bf);
  });
}

// Fused with the pooling above: the kernel and bias gradients from the pooling's gradient, its
// output and argmax, by parts of the samples (one per team thread) added in part order, as
// backwardOneDnn adds them; mixed_bfloat16 rounds the summed gradients once, as its other paths.
void Conv2D::backwardPooled(const float* x, int64_t n) {
  const convpool::Shapes s{g_, win_, pool_->geometry(), pool_->window(), filters_};
  const int64_t K = kernelSize(), F = filters_, in = inFeatures(), out = pool_->outFeatures();
  const bool bf = precision_ == Precision::MixedBfloat16;
  ThreadTeam* team = anyTeam();
  const int parts = team && n >= team->size() ? team->size() : 1;
  dwParts_.assign(static_cast<size_t>(parts * K), 0.0f);
  dbParts_.assign(static_cast<size_t>(parts * F), 0.0f);
  const float* xs = bf ? xr_.data() : x;
  const float *g = pool_->pendingGradient(), *pooled = pool_->pendingOutput();
  const int32_t* argmax = pool_->argmax().data();
  auto part = [&](int t) {
    const int64_t lo = n * t / parts, hi = n * (t + 1) / parts;
    convpool::backward(s, hi - lo, xs + lo * in, pooled + lo * out, argmax + lo * out, g + lo * out, dwParts_.data() + t * K,
                       useBias_ ? dbParts_.data() + t * F : nullptr);
  };
  if (parts > 1)
    team->run(parts, part);
  else
    part(0);
  float *dw = dw_, *db = db_;
  if (bf) {
    dwq_.assign(static_cast<size_t>(K), 0.0f);
    dbq_.assign(static_cast<size_t>(F), 0.0f);
    dw = dwq_.data();
    db = dbq_.data();
  }
  for (int t = 0; t < parts; ++t) {
    const float* dwp = dwParts_.data() + t * K;
    for (int64_t i = 0; i < K; ++i) dw[i] += dwp[i];
    if (useBias_)
      for (int64_t f = 0; f < F; ++f) db[f] += dbParts_[static_cast<size_t>(t * F + f)];
  }
  if (!bf) return;
  bf16::addRounded(dwq_.data(), dw_, dwq_.size());
  if (useBias_)
    for (int64_t f = 0; f < F; ++f) db_[f] += roundOne(precision_, dbq_[static_cast<size_t>(f)]);
}

// x (n, h, w, c) -> y (n, oh, ow, filters)
void Conv2D::forward(const float* x, float* y, int64_t n, const StepContext&) {
  if (poolFused()) {
    fusedX_ = x;  // the pooling's forward computes both layers (forwardPooled)
    return;
  }
  const int64_t P = patch(), F = filters_, pos = g_.oh * g_.ow, chunk = chunkRows(n);
  const bool low = precision_ != Precision::Float32, bf = precision_ == Precision::MixedBfloat16;
  ThreadTeam* team = floatTeam(precision_);
  if (!low && dnnconv::available(g_, win_, F)) return forwardOneDnn(x, y, n, team);
  if (bf && dnnconv::availableBf16(g_, win_, F)) return forwardOneDnnBf16(x, y, n, anyTeam());
  const float* w = w_;
  if (bf) {
    wb_.resize(static_cast<size_t>(kernelSize()));
    bf16::pack(w_, wb_.data(), wb_.size());
  } else if (low) {
    wq_.resize(static_cast<size_t>(kernelSize()));
    roundCopy(precision_, w_, wq_.data(), wq_.size());
    w = wq_.data();
  }
  cols_.resize(static_cast<size_t>(chunk * pos * P));
  if (bf) colsb_.resize(cols_.size());
  for (int64_t i0 = 0; i0 < n; i0 += chunk) {
    const int64_t m = std::min(chunk, n - i0), rows = m * pos;
    forRows(team, m, [&](int64_t lo, int64_t hi) {
      im2col(x + (i0 + lo) * inFeatures(), hi - lo, g_, win_, cols_.data() + lo * pos * P);
    });
    float* out = y + i0 * pos * F;
    if (bf) {  // the rounded input's windows times the rounded kernel on Bf16Gemm
      bf16::pack(cols_.data(), colsb_.data(), static_cast<size_t>(rows * P));
      bf16::gemm(false, false, rows, F, P, colsb_.data(), P, wb_.data(), F, out, F, useBias_ ? b_ : nullptr);
      roundTo(precision_, out, static_cast<size_t>(rows * F));
      continue;
    }
    if (low) roundTo(precision_, cols_.data(), static_cast<size_t>(rows * P));  // = the rounded input's windows
    forColumns(team, F, [&](int64_t lo, int64_t hi) {                           // columns [lo, hi): the bias, then the product
      if (useBias_)
        for (int64_t r = 0; r < rows; ++r) std::copy(b_ + lo, b_ + hi, out + r * F + lo);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows), static_cast<int>(hi - lo),
                  static_cast<int>(P), 1.0f, cols_.data(), static_cast<int>(P), w + lo, static_cast<int>(F),
                  useBias_ ? 1.0f : 0.0f, out + lo, static_cast<int>(F));
    });
    if (low) roundTo(precision_, out, static_cast<size_t>(rows * F));
  }
  forRows(team, n * pos, [&](int64_t lo, int64_t hi) { activationForward(act_, y + lo * F, hi - lo, F); });
  if (low && act_ != Act::Softmax) roundTo(precision_, y, static_cast<size_t>(n * pos * F));
}

// dy (n, oh, ow, filters) -> dz (in place); dW += cols^T dz, db += sum dz, dx = col2im(dz W^T)
// Long: the choice of path (oneDNN, bfloat16, the team, one thread) and the low-precision
// rounding around it share the chunk loop's scratch; one place shows which path a precision takes.
void Conv2D::backward(const float* x, const float* y, float* dy, float* dx, int64_t n, const StepContext&) {
  if (poolFused()) return backwardPooled(x, n);
  const int64_t P = patch(), F = filters_, pos = g_.oh * g_.ow, chunk = chunkRows(n);
  ThreadTeam* team = floatTeam(precision_);
  const bool bfDnn = precision_ == Precision::MixedBfloat16 && dnnconv::availableBf16(g_, win_, F);
  if (!maskedBy_)
    forRows(bfDnn ? anyTeam() : team, n * pos,
            [&](int64_t lo, int64_t hi) { activationBackward(act_, y + lo * F, dy + lo * F, dy + lo * F, hi - lo, F); });
  if (precision_ == Precision::Float32 && dnnconv::available(g_, win_, F)) return backwardOneDnn(x, dy, dx, n, team);
  if (bfDnn) return backwardOneDnnBf16(x, dy, dx, n, anyTeam());
  // Low precision: dz rounded, the kernel and bias gradients summed over the chunks into scratch,
  // rounded once and added; the rounded kernel of forward; dx rounded after col2im's sums.
  const bool low = precision_ != Precision::Float32, bf = precision_ == Precision::MixedBfloat16;
  float *dw = dw_, *db = db_;
  const float* w = w_;
  if (low) {
    roundTo(precision_, dy, static_cast<size_t>(n * pos * F));
    dwq_.assign(static_cast<size_t>(kernelSize()), 0.0f);
    dbq_.assign(static_cast<size_t>(F), 0.0f);
    dw = dwq_.data();
    db = dbq_.data();
    w = wq_.data();
  }
  cols_.resize(static_cast<size_t>(chunk * pos * P));
  if (dx) dcols_.resize(static_cast<size_t>(chunk * pos * P));
  if (bf) {
    colsb_.resize(cols_.size());
    dzb_.resize(static_cast<size_t>(chunk * pos * F));
    dwChunk_.resize(static_cast<size_t>(kernelSize()));
  }
  for (int64_t i0 = 0; i0 < n; i0 += chunk) {
    const int64_t m = std::min(chunk, n - i0), rows = m * pos;
    const float* dz = dy + i0 * pos * F;
    forRows(team, m, [&](int64_t lo, int64_t hi) {
      im2col(x + (i0 + lo) * inFeatures(), hi - lo, g_, win_, cols_.data() + lo * pos * P);
    });
    if (team) {
      backwardChunkOnTeam(*team, dz, rows, dx ? dx + i0 * inFeatures() : nullptr, m);
      continue;
    }
    if (bf) {  // exact: dz is already rounded
      bf16::pack(cols_.data(), colsb_.data(), static_cast<size_t>(rows * P));
      bf16::pack(dz, dzb_.data(), static_cast<size_t>(rows * F));
      bf16::gemm(true, false, P, F, rows, colsb_.data(), P, dzb_.data(), F, dwChunk_.data(), F);
      for (size_t i = 0; i < dwChunk_.size(); ++i) dw[i] += dwChunk_[i];
    } else {
      if (low) roundTo(precision_, cols_.data(), static_cast<size_t>(rows * P));
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(P), static_cast<int>(F), static_cast<int>(rows), 1.0f,
                  cols_.data(), static_cast<int>(P), dz, static_cast<int>(F), 1.0f, dw, static_cast<int>(F));
    }
    if (useBias_)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t f = 0; f < F; ++f) db[f] += dz[r * F + f];
    if (dx) {
      if (bf)
        bf16::gemm(false, true, rows, P, F, dzb_.data(), F, wb_.data(), F, dcols_.data(), P);
      else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), static_cast<int>(P), static_cast<int>(F),
                    1.0f, dz, static_cast<int>(F), w, static_cast<int>(F), 0.0f, dcols_.data(), static_cast<int>(P));
      float* dxi = dx + i0 * inFeatures();
      std::fill(dxi, dxi + m * inFeatures(), 0.0f);
      col2imAdd(dcols_.data(), m, g_, win_, dxi);
    }
  }
  if (!low) return;
  roundTo(precision_, dwq_.data(), dwq_.size());
  for (size_t i = 0; i < dwq_.size(); ++i) dw_[i] += dwq_[i];
  if (useBias_)
    for (int64_t f = 0; f < F; ++f) db_[f] += roundOne(precision_, dbq_[static_cast<size_t>(f)]);
  if (dx) roundTo(precision_, dx, static_cast<size_t>(n * inFeatures()));
}

// One chunk's backward on a team (float32; cols_ holds the chunk's windows): dW (with db) and the
// window gradients side by side when the team has two threads and both are wanted, else each
// product split by columns; then col2im by samples.
void Conv2D::backwardChunkOnTeam(ThreadTeam& team, const float* dz, int64_t rows, float* dx, int64_t m) {
  const int64_t P = patch(), F = filters_;
  auto weightGrad = [&](int64_t lo, int64_t hi) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(P), static_cast<int>(hi - lo), static_cast<int>(rows),
                1.0f, cols_.data(), static_cast<int>(P), dz + lo, static_cast<int>(F), 1.0f, dw_ + lo, static_cast<int>(F));
    if (useBias_)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t f = lo; f < hi; ++f) db_[f] += dz[r * F + f];
  };
  auto windowGrad = [&](int64_t lo, int64_t hi) {  // columns [lo, hi) of dcols = dz W^T
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), static_cast<int>(hi - lo), static_cast<int>(F),
                1.0f, dz, static_cast<int>(F), w_ + lo * F, static_cast<int>(F), 0.0f, dcols_.data() + lo, static_cast<int>(P));
  };
  if (dx && team.size() == 2) {
    team.run(2, [&](int t) { t == 0 ? weightGrad(0, F) : windowGrad(0, P); });
  } else {
    forColumns(&team, F, weightGrad);
    if (dx) forColumns(&team, P, windowGrad);
  }
  if (!dx) return;
  const int64_t pos = g_.oh * g_.ow;
  forRows(&team, m, [&](int64_t lo, int64_t hi) {
    float* d = dx + lo * inFeatures();
    std::fill(d, d + (hi - lo) * inFeatures(), 0.0f);
    col2imAdd(dcols_.data() + lo * pos * P, hi - lo, g_, win_, d);
  });
}

// float32 on oneDNN (nn/OneDnnConv.h). On a team each thread convolves its own samples (oneDNN on
// one thread), then the activation by rows.
void Conv2D::forwardOneDnn(const float* x, float* y, int64_t n, ThreadTeam* team) {
  const int64_t F = filters_, pos = g_.oh * g_.ow;
  const bool relu = act_ == Act::Relu;  // a post-op of the convolution: no pass of its own over y
  forRows(team, n, [&](int64_t lo, int64_t hi) {
    dnnconv::forward(g_, win_, F, hi - lo, x + lo * inFeatures(), w_, useBias_ ? b_ : nullptr, y + lo * pos * F, relu);
  });
  if (relu || act_ == Act::Linear) return;
  forRows(team, n * pos, [&](int64_t lo, int64_t hi) { activationForward(act_, y + lo * F, hi - lo, F); });
}

// float32 on oneDNN, dz = the activation's gradient already in dy. Each part (one, or one per team
// thread, by samples) writes its samples' kernel and bias gradients into its own scratch and its
// samples' input gradient; the parts' gradients are then added in part order: the same bits from
// run to run for a given number of threads.
void Conv2D::backwardOneDnn(const float* x, const float* dz, float* dx, int64_t n, ThreadTeam* team) {
  const int64_t K = kernelSize(), F = filters_, pos = g_.oh * g_.ow;
  const bool poolBias = biasFromPool();
  const int parts = team && n >= team->size() ? team->size() : 1;
  dwParts_.resize(static_cast<size_t>(parts * K));
  dbParts_.resize(static_cast<size_t>(parts * F));
  auto part = [&](int t) {
    const int64_t lo = n * t / parts, hi = n * (t + 1) / parts;
    float* dw = dwParts_.data() + t * K;
    float* db = dbParts_.data() + t * F;
    if (hi == lo) {
      std::fill(dw, dw + K, 0.0f);
      std::fill(db, db + F, 0.0f);
      return;
    }
    dnnconv::backwardWeights(g_, win_, F, hi - lo, x + lo * inFeatures(), dz + lo * pos * F, dw,
                             useBias_ && !poolBias ? db : nullptr);
    if (dx) dnnconv::backwardData(g_, win_, F, hi - lo, dz + lo * pos * F, w_, dx + lo * inFeatures());
  };
  if (parts > 1)
    team->run(parts, part);
  else
    part(0);
  for (int t = 0; t < parts; ++t) {
    const float* dw = dwParts_.data() + t * K;
    for (int64_t i = 0; i < K; ++i) dw_[i] += dw[i];
    if (useBias_ && !poolBias)
      for (int64_t f = 0; f < F; ++f) db_[f] += dbParts_[static_cast<size_t>(t * F + f)];
  }
  if (poolBias) addPartSums(maskedBy_->biasGradientParts(), db_);
}

// The pooling above computed the bias gradient (Pool2D::givesBiasGradient) while it wrote dz.
// float32 only: a mixed policy's bias gradient is of dz rounded to the low format, which the
// pooling (that knows no precision) does not round; oneDNN's bfloat16 pass sums it in its kernel.
bool Conv2D::biasFromPool() const {
  return useBias_ && precision_ == Precision::Float32 && maskedBy_ && maskedBy_->givesBiasGradient();
}

// db[f] += each part's sum, in part order.
void Conv2D::addPartSums(const std::vector<float>& parts, float* db) const {
  const int64_t F = filters_;
  for (size_t t = 0; t + static_cast<size_t>(F) <= parts.size(); t += static_cast<size_t>(F))
    for (int64_t f = 0; f < F; ++f) db[f] += parts[t + static_cast<size_t>(f)];
}

// mixed_bfloat16 on oneDNN's bfloat16 convolutions: the input and kernel packed to bfloat16, the
// products summed in float32 with the bias, then rounded as the im2col path rounds them (the
// output, and again after the activation). On a team each thread packs and convolves its samples.
void Conv2D::forwardOneDnnBf16(const float* x, float* y, int64_t n, ThreadTeam* team) {
  const int64_t F = filters_, pos = g_.oh * g_.ow, in = inFeatures();
  wb_.resize(static_cast<size_t>(kernelSize()));
  bf16::pack(w_, wb_.data(), wb_.size());
  xb_.resize(static_cast<size_t>(n * in));
  // ReLU as the convolution's post-op: relu(round(v)) = round(relu(v)), rounding to nearest keeps
  // the sign and 0, so rounding after it gives the bits of rounding first.
  const bool relu = act_ == Act::Relu;
  forRows(team, n, [&](int64_t lo, int64_t hi) {
    bf16::pack(x + lo * in, xb_.data() + lo * in, static_cast<size_t>((hi - lo) * in));
    dnnconv::forward(g_, win_, F, hi - lo, xb_.data() + lo * in, wb_.data(), useBias_ ? b_ : nullptr, y + lo * pos * F, relu);
  });
  forRows(team, n * pos, [&](int64_t lo, int64_t hi) {
    float* rows = y + lo * F;
    const auto count = static_cast<size_t>((hi - lo) * F);
    bf16::roundInPlace(rows, count);
    if (relu || act_ == Act::Linear) return;
    activationForward(act_, rows, hi - lo, F);
    bf16::roundInPlace(rows, count);
  });
}

// mixed_bfloat16 backward on oneDNN, dz = the activation's gradient in dy: dz packed to bfloat16
// (the rounding the im2col path applies), each part's kernel and bias gradients in float32 into
// its scratch, added in part order, rounded once and added to the layer's gradients; the input
// gradient in float32, then rounded. The kernel is forward's bfloat16 copy.
void Conv2D::backwardOneDnnBf16(const float* x, const float* dz, float* dx, int64_t n, ThreadTeam* team) {
  const int64_t K = kernelSize(), F = filters_, pos = g_.oh * g_.ow, in = inFeatures();
  const int parts = team && n >= team->size() ? team->size() : 1;
  dwParts_.resize(static_cast<size_t>(parts * K));
  dbParts_.resize(static_cast<size_t>(parts * F));
  xb_.resize(static_cast<size_t>(n * in));
  dzb_.resize(static_cast<size_t>(n * pos * F));
  auto part = [&](int t) {
    const int64_t lo = n * t / parts, hi = n * (t + 1) / parts;
    float* dw = dwParts_.data() + t * K;
    float* db = dbParts_.data() + t * F;
    if (hi == lo) {
      std::fill(dw, dw + K, 0.0f);
      std::fill(db, db + F, 0.0f);
      return;
    }
    uint16_t* xs = xb_.data() + lo * in;
    uint16_t* dzs = dzb_.data() + lo * pos * F;
    bf16::pack(x + lo * in, xs, static_cast<size_t>((hi - lo) * in));
    bf16::pack(dz + lo * pos * F, dzs, static_cast<size_t>((hi - lo) * pos * F));
    dnnconv::backwardWeights(g_, win_, F, hi - lo, xs, dzs, dw, useBias_ ? db : nullptr);
    if (dx) {
      float* d = dx + lo * in;
      dnnconv::backwardData(g_, win_, F, hi - lo, dzs, wb_.data(), d);
      bf16::roundInPlace(d, static_cast<size_t>((hi - lo) * in));
    }
  };
  if (parts > 1)
    team->run(parts, part);
  else
    part(0);
  dwq_.assign(static_cast<size_t>(K), 0.0f);
  dbq_.assign(static_cast<size_t>(F), 0.0f);
  for (int t = 0; t < parts; ++t) {
    const float* dw = dwParts_.data() + t * K;
    for (int64_t i = 0; i < K; ++i) dwq_[static_cast<size_t>(i)] += dw[i];
    if (useBias_)
      for (int64_t f = 0; f < F; ++f) dbq_[static_cast<size_t>(f)] += dbParts_[static_cast<size_t>(t * F + f)];
  }
  bf16::addRounded(dwq_.data(), dw_, dwq_.size());
  if (useBias_)
    for (int64_t f = 0; f < F; ++f) db_[f] += roundOne(precision_, dbq_[static_cast<size_t>(f)]);
}

bool Conv2D::bf16OnOneDnn() const { return precision_ == Precision::MixedBfloat16 && dnnconv::availableBf16(g_, win_, filters_); }

int64_t Conv2D::lowPrecisionBytes(int64_t batch) const {
  const int64_t K = kernelSize(), F = filters_, rows = chunkRows(batch) * g_.oh * g_.ow;
  const int64_t common = 4 * (K + F);  // dwq, dbq: the micro-batch's gradients, summed over chunks or parts
  switch (precision_) {
    case Precision::Float32: return 0;
    case Precision::MixedBfloat16:
      if (pool_) return common + 4 * (K + batch * inFeatures());  // wq, xr: the rounded kernel and input
      if (bf16OnOneDnn()) return common + 2 * (K + batch * inFeatures() + batch * g_.oh * g_.ow * F);  // wb, xb, dzb
      return common + 4 * K + 2 * (K + rows * patch() + rows * F);                                     // dwChunk; wb, colsb, dzb
    case Precision::MixedFloat16: return common + 4 * K;                                               // wq
  }
  return 0;
}

int64_t Conv2D::lowPrecisionBytesInUse() const {
  return static_cast<int64_t>(4 * (wq_.size() + dwq_.size() + dbq_.size() + dwChunk_.size() + xr_.size()) +
                              2 * (wb_.size() + xb_.size() + colsb_.size() + dzb_.size()));
}

bool Conv2D::gradientsFinite() const {
  return allFinite(dw_, static_cast<size_t>(kernelSize())) && (!useBias_ || allFinite(db_, static_cast<size_t>(filters_)));
}

nlohmann::json Conv2D::args() const {
  nlohmann::json j{{"filters", filters_},
                   {"kernel_size", {win_.kh, win_.kw}},
                   {"strides", {win_.sh, win_.sw}},
                   {"padding", win_.same ? "same" : "valid"},
                   {"activation", toString(act_)}};
  if (!useBias_) j["use_bias"] = false;
  if (kernelInit_ != "glorot_uniform") j["kernel_initializer"] = kernelInit_;
  if (biasInit_ != "zeros") j["bias_initializer"] = biasInit_;
  return j;
}

}  // namespace ml
