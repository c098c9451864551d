// Mixed precision's entry points (CudaPluginApi.h), on tensor cores: Dense multiplies bfloat16 or
// float16 operands with cublasGemmEx and float32 accumulation (CUBLAS_COMPUTE_32F), and Conv2D does
// the same with its input's windows (im2col packed to the low format) as nn/Conv2D.cpp's
// low-precision path does, so both round exactly where core/nn rounds: the operands, the product
// plus bias, the activation's output (not softmax's), dz, the micro-batch's kernel and bias
// gradients (added to the float32 ones) and dx. The packed operands and float32 partial results
// live in the context's second scratch.
#include "backend/cuda/Context.h"
#include "backend/cuda/Kernels.h"

namespace mlcuda {
namespace {

void requirePrecision(int precision, const char* who) {
  if (precision < MLCUDA_PRECISION_FLOAT32 || precision > MLCUDA_PRECISION_FLOAT16)
    fail(MLCUDA_ERR_INVALID_ARGUMENT,
         std::string(who) + ": unknown precision " + std::to_string(precision) + " (0 float32, 1 bfloat16, 2 float16)");
}

template <typename T>
T* at(void* base, size_t offset) {
  return reinterpret_cast<T*>(static_cast<char*>(base) + offset);
}
size_t floats(int64_t count) { return sizeof(float) * static_cast<size_t>(count); }
size_t halves(int64_t count) { return 2 * static_cast<size_t>(count); }

void check(const mlcuda_status& s) {
  if (s.code != MLCUDA_OK) fail(s.code, s.message);
}

cudaDataType_t lowType(int precision) { return precision == MLCUDA_PRECISION_BFLOAT16 ? CUDA_R_16BF : CUDA_R_16F; }

// C (m, n, column-major, float32) = op(A) op(B) with A and B in the low format, float32 sums.
void gemmLow(mlcuda_context* ctx, int precision, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* a,
             int lda, const void* b, int ldb, float* c, int ldc) {
  const float one = 1.0f, zero = 0.0f;
  const cudaDataType_t t = lowType(precision);
  ML_CUBLAS(ctx->label, cublasGemmEx(ctx->cublas, ta, tb, m, n, k, &one, a, t, lda, b, t, ldb, &zero, c, CUDA_R_32F, ldc,
                                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void launched(mlcuda_context* ctx, const char* kernel) { checkLaunch(kernel, __FILE__, __LINE__, ctx->label); }

void roundInPlace(mlcuda_context* ctx, int precision, float* v, int64_t count) {
  kernels::roundTo(ctx->compute, precision, v, v, count);
  launched(ctx, "roundTo");
}

// After the product (float32 in y): y = round(y + b); the activation; rounded again, except
// softmax's probabilities (they feed the float32 loss).
void epilogue(mlcuda_context* ctx, int precision, float* y, const float* b, int64_t rows, int64_t k, int act) {
  kernels::roundTo(ctx->compute, precision, y, y, rows * k, b, k);
  launched(ctx, "roundTo");
  if (act == MLCUDA_ACT_SOFTMAX) {
    kernels::softmaxForward(ctx->compute, y, y, rows, k);
    launched(ctx, "softmaxForward");
  } else if (act != MLCUDA_ACT_LINEAR) {
    kernels::biasActivation(ctx->compute, y, y, nullptr, rows, k, act);
    launched(ctx, "biasActivation");
    roundInPlace(ctx, precision, y, rows * k);
  }
}

// dz = dy * act'(.) from y, in place (not when the loss fused the output activation), then rounded.
void roundedDz(mlcuda_context* ctx, int precision, const float* y, float* dy, int64_t rows, int64_t k, int act, bool fused) {
  if (!fused && act == MLCUDA_ACT_SOFTMAX) {
    kernels::softmaxBackward(ctx->compute, y, dy, dy, rows, k);
    launched(ctx, "softmaxBackward");
  } else if (!fused && act != MLCUDA_ACT_LINEAR) {
    kernels::activationBackward(ctx->compute, act, y, dy, dy, rows * k);
    launched(ctx, "activationBackward");
  }
  roundInPlace(ctx, precision, dy, rows * k);
}

void requireDense(int precision, int64_t n, int64_t in, int64_t out, int act, const char* who) {
  requirePrecision(precision, who);
  if (n < 0 || in <= 0 || out <= 0)
    fail(MLCUDA_ERR_INVALID_ARGUMENT,
         std::string(who) + ": bad shape (" + std::to_string(n) + ", " + std::to_string(in) + " -> " + std::to_string(out) + ")");
  if (act < MLCUDA_ACT_LINEAR || act > MLCUDA_ACT_SOFTMAX)
    fail(MLCUDA_ERR_INVALID_ARGUMENT, std::string(who) + ": unknown activation " + std::to_string(act));
  (void)toInt(n * in, "rows * in");
  (void)toInt(n * out, "rows * out");
}

void requireConv(int precision, const mlcuda_conv_geometry* g, int64_t n, int act, const char* who) {
  requirePrecision(precision, who);
  requireGeometry(g, who, false);
  if (n < 0) fail(MLCUDA_ERR_INVALID_ARGUMENT, std::string(who) + ": n must be >= 0");
  if (act < MLCUDA_ACT_LINEAR || act > MLCUDA_ACT_TANH)
    fail(MLCUDA_ERR_INVALID_ARGUMENT, std::string(who) + ": activation " + std::to_string(act) +
                                          " is not one a convolution takes (0 linear, 1 relu, 2 sigmoid, 3 tanh)");
}

// y (rows, F) = in (rows, P) W (P, F) on the low format's tensor cores, then round(y + b), the
// activation, rounded again (not softmax's). Row-major meets column-major as in
// mlcuda_dense_forward: y^T = W^T in^T. pack(dst) writes the packed input rows.
template <typename Pack>
void lowForward(mlcuda_context* ctx, int precision, int64_t rows, int64_t P, int64_t F, Pack pack, const float* w, const float* b,
                float* y, int act) {
  const int R = toInt(rows, "rows"), PI = toInt(P, "the product's depth"), FI = toInt(F, "the product's width");
  (void)toInt(rows * P, "the input's values");
  (void)toInt(rows * F, "the output's values");
  Carve carve;
  const size_t inAt = carve.add(halves(rows * P)), wAt = carve.add(halves(P * F));
  void* base = lowScratch(ctx, carve.total);
  pack(at<char>(base, inAt));
  kernels::packLow(ctx->compute, precision, w, at<char>(base, wAt), P * F);
  launched(ctx, "packLow");
  gemmLow(ctx, precision, CUBLAS_OP_N, CUBLAS_OP_N, FI, R, PI, at<char>(base, wAt), FI, at<char>(base, inAt), PI, y, FI);
  epilogue(ctx, precision, y, b, rows, F, act);
}

// The backward of a low-precision product y (rows, F) = in (rows, P) W (P, F), from dz (rows, F),
// rounded already and kept float32: dw += round(in^T dz); db += round(the column sums of dz) (db
// may be null); and din (rows, P) = dz W^T in float32, not rounded (the caller rounds or gathers
// it), into `din` or, when that is null and inputGrad is set, into scratch. pack(dst) writes the
// packed input rows (rows*P low-format values). Returns where din went (null without inputGrad).
template <typename Pack>
float* lowBackward(mlcuda_context* ctx, int precision, int64_t rows, int64_t P, int64_t F, Pack pack, const float* dz,
                   const float* w, float* dw, float* db, bool inputGrad, float* din) {
  const int R = toInt(rows, "rows"), PI = toInt(P, "the product's depth"), FI = toInt(F, "the product's width");
  (void)toInt(rows * P, "the input's values");
  (void)toInt(rows * F, "the output's values");
  const int64_t biasFloats = db ? kernels::biasGradientWorkspace(rows, F) : 0;
  Carve carve;
  const size_t inAt = carve.add(halves(rows * P)), wAt = carve.add(halves(P * F)), dzAt = carve.add(halves(rows * F)),
               dwAt = carve.add(floats(P * F)), dbAt = carve.add(floats(F)),
               biasAt = biasFloats > 0 ? carve.add(floats(biasFloats)) : 0,
               dinAt = inputGrad && !din ? carve.add(floats(rows * P)) : 0;
  void* base = lowScratch(ctx, carve.total);
  char *in = at<char>(base, inAt), *wl = at<char>(base, wAt), *dzl = at<char>(base, dzAt);
  pack(in);
  kernels::packLow(ctx->compute, precision, dz, dzl, rows * F);  // exact: dz is rounded already
  launched(ctx, "packLow");
  // dW^T (F, P) = dz^T in, then dw += round(dW).
  float* dwq = at<float>(base, dwAt);
  gemmLow(ctx, precision, CUBLAS_OP_N, CUBLAS_OP_T, FI, PI, R, dzl, FI, in, PI, dwq, FI);
  kernels::addRounded(ctx->compute, precision, dwq, dw, P * F);
  launched(ctx, "addRounded");
  if (db) {
    float* dbq = at<float>(base, dbAt);
    ML_CUDA(ctx->label, cudaMemsetAsync(dbq, 0, floats(F), ctx->compute));
    kernels::biasGradient(ctx->compute, dz, dbq, rows, F, biasFloats > 0 ? at<float>(base, biasAt) : nullptr);
    launched(ctx, "biasGradient");
    kernels::addRounded(ctx->compute, precision, dbq, db, F);
    launched(ctx, "addRounded");
  }
  if (!inputGrad) return nullptr;
  if (!din) din = at<float>(base, dinAt);
  kernels::packLow(ctx->compute, precision, w, wl, P * F);
  launched(ctx, "packLow");
  // din^T (P, rows) = W dz^T.
  gemmLow(ctx, precision, CUBLAS_OP_T, CUBLAS_OP_N, PI, R, FI, wl, FI, dzl, FI, din, PI);
  return din;
}

}  // namespace
}  // namespace mlcuda

using namespace mlcuda;

extern "C" {

// As mlcuda_dense_forward (row-major meets column-major the same way: y^T = W^T x^T), with x and W
// packed to the low format for cublasGemmEx.
MLCUDA_EXPORT mlcuda_status mlcuda_dense_forward_low(mlcuda_context* ctx, int precision, const float* x, const float* w,
                                                     const float* b, float* y, int64_t n, int64_t in, int64_t out, int act) {
  if (precision == MLCUDA_PRECISION_FLOAT32) return mlcuda_dense_forward(ctx, x, w, b, y, n, in, out, act);
  return guarded([&] {
    use(ctx);
    requireDense(precision, n, in, out, act, "mlcuda_dense_forward_low");
    if (n == 0) return;
    ML_REQUIRE(x && w && y, "mlcuda_dense_forward_low: x, w and y must not be NULL");
    auto pack = [&](char* dst) {
      kernels::packLow(ctx->compute, precision, x, dst, n * in);
      launched(ctx, "packLow");
    };
    lowForward(ctx, precision, n, in, out, pack, w, b, y, act);
  });
}

// As mlcuda_dense_backward: dz rounded and packed; dW's product into float32 scratch, added rounded;
// db's column sums into zeroed scratch, added rounded; dx = dz W^T rounded.
MLCUDA_EXPORT mlcuda_status mlcuda_dense_backward_low(mlcuda_context* ctx, int precision, const float* x, const float* w,
                                                      const float* y, float* dy, float* dx, float* dw, float* db, int64_t n,
                                                      int64_t in, int64_t out, int act, int fused_softmax) {
  if (precision == MLCUDA_PRECISION_FLOAT32)
    return mlcuda_dense_backward(ctx, x, w, y, dy, dx, dw, db, n, in, out, act, fused_softmax);
  return guarded([&] {
    use(ctx);
    requireDense(precision, n, in, out, act, "mlcuda_dense_backward_low");
    if (n == 0) return;
    ML_REQUIRE(x && w && y && dy && dw, "mlcuda_dense_backward_low: x, w, y, dy and dw must not be NULL");
    roundedDz(ctx, precision, y, dy, n, out, act, fused_softmax != 0);
    auto pack = [&](char* dst) {
      kernels::packLow(ctx->compute, precision, x, dst, n * in);
      launched(ctx, "packLow");
    };
    if (lowBackward(ctx, precision, n, in, out, pack, dy, w, dw, db, dx != nullptr, dx)) roundInPlace(ctx, precision, dx, n * in);
  });
}

// As nn/Conv2D.cpp's low-precision path, on tensor cores: the input's windows packed to the low
// format (im2col), times the packed kernel with cublasGemmEx and float32 sums, then round(y + b),
// the activation, rounded again. y^T (F, rows) = W^T (F, P) cols^T (P, rows), as Dense's forward.
MLCUDA_EXPORT mlcuda_status mlcuda_conv2d_forward_low(mlcuda_context* ctx, int precision, const mlcuda_conv_geometry* g,
                                                      const float* x, const float* w, const float* b, float* y, int64_t n,
                                                      int act) {
  if (precision == MLCUDA_PRECISION_FLOAT32) return mlcuda_conv2d_forward(ctx, g, x, w, b, y, n, act);
  return guarded([&] {
    use(ctx);
    requireConv(precision, g, n, act, "mlcuda_conv2d_forward_low");
    if (n == 0) return;
    ML_REQUIRE(x && w && y, "mlcuda_conv2d_forward_low: x, w and y must not be NULL");
    auto pack = [&](char* dst) {
      kernels::im2colLow(ctx->compute, precision, x, *g, n, dst);
      launched(ctx, "im2colLow");
    };
    lowForward(ctx, precision, n * g->oh * g->ow, g->kh * g->kw * g->c, g->filters, pack, w, b, y, act);
  });
}

// dz = act'(dy) rounded and packed; dW (P, F) = cols^T dz into float32 scratch, added rounded; db's
// column sums added rounded; dcols (rows, P) = dz W^T in float32, gathered back into dx (col2im, the
// CPU's order of sums), rounded.
MLCUDA_EXPORT mlcuda_status mlcuda_conv2d_backward_low(mlcuda_context* ctx, int precision, const mlcuda_conv_geometry* g,
                                                       const float* x, const float* w, const float* y, float* dy, float* dx,
                                                       float* dw, float* db, int64_t n, int act) {
  if (precision == MLCUDA_PRECISION_FLOAT32) return mlcuda_conv2d_backward(ctx, g, x, w, y, dy, dx, dw, db, n, act);
  return guarded([&] {
    use(ctx);
    requireConv(precision, g, n, act, "mlcuda_conv2d_backward_low");
    if (n == 0) return;
    ML_REQUIRE(x && w && y && dy && dw, "mlcuda_conv2d_backward_low: x, w, y, dy and dw must not be NULL");
    const int64_t P = g->kh * g->kw * g->c, F = g->filters, rows = n * g->oh * g->ow;
    roundedDz(ctx, precision, y, dy, rows, F, act, false);
    auto pack = [&](char* dst) {
      kernels::im2colLow(ctx->compute, precision, x, *g, n, dst);
      launched(ctx, "im2colLow");
    };
    const float* dcols = lowBackward(ctx, precision, rows, P, F, pack, dy, w, dw, db, dx != nullptr, nullptr);
    if (!dcols) return;
    kernels::col2im(ctx->compute, dcols, *g, n, dx);
    launched(ctx, "col2im");
    roundInPlace(ctx, precision, dx, n * g->h * g->w * g->c);
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_scale(mlcuda_context* ctx, float* x, int64_t count, float factor) {
  return guarded([&] {
    use(ctx);
    ML_REQUIRE(count >= 0, "mlcuda_scale: count must be >= 0");
    if (count == 0) return;
    ML_REQUIRE(x, "mlcuda_scale: x must not be NULL");
    kernels::scale(ctx->compute, x, count, factor);
    launched(ctx, "scale");
  });
}

}  // extern "C"
