// The fake plugin's convolutional layers: Conv2D, pooling, global average pooling and
// BatchNormalization's kernels, written as plain loops straight from the definitions in
// CudaPluginApi.h (not by calling core/nn), so the GPU path's tests also hold core/nn's layers
// against an independent implementation. Queued on the compute stream like every fake kernel.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "FakePlugin.h"
#include "nn/Activations.h"

using fake::floats;
using fake::launch;
using fake::ok;
using fake::span;

namespace {

int64_t inSize(const mlcuda_conv_geometry& g) { return g.h * g.w * g.c; }
int64_t outSize(const mlcuda_conv_geometry& g) { return g.oh * g.ow * g.filters; }

// Calls f(iy, ix) for every in-image input position of output (oy, ox)'s window, in window order.
template <typename F>
void window(const mlcuda_conv_geometry& g, int64_t oy, int64_t ox, F f) {
  for (int64_t ky = 0; ky < g.kh; ++ky)
    for (int64_t kx = 0; kx < g.kw; ++kx) {
      const int64_t iy = oy * g.sh - g.pad_top + ky, ix = ox * g.sw - g.pad_left + kx;
      if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w) f(iy, ix, ky, kx);
    }
}

// The geometry's padding must give its output size (CudaBackend computes pad_bottom and pad_right).
mlcuda_status badGeometry(const mlcuda_conv_geometry* g, const char* what) {
  if (!g) return fake::status(MLCUDA_ERR_INVALID_ARGUMENT, std::string(what) + ": null geometry");
  const bool fits = g->pad_top >= 0 && g->pad_bottom >= 0 && g->pad_left >= 0 && g->pad_right >= 0 &&
                    (g->h + g->pad_top + g->pad_bottom - g->kh) / g->sh + 1 == g->oh &&
                    (g->w + g->pad_left + g->pad_right - g->kw) / g->sw + 1 == g->ow;
  return fits ? ok() : fake::status(MLCUDA_ERR_INVALID_ARGUMENT, std::string(what) + ": the padding does not give oh x ow");
}

// y (n, oh, ow, filters) = conv(x, w) + b.
void convolve(const mlcuda_conv_geometry& g, const float* x, const float* w, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        float* out = y + i * outSize(g) + (oy * g.ow + ox) * g.filters;
        for (int64_t f = 0; f < g.filters; ++f) out[f] = b ? b[f] : 0.0f;
        window(g, oy, ox, [&](int64_t iy, int64_t ix, int64_t ky, int64_t kx) {
          const float* v = x + i * inSize(g) + (iy * g.w + ix) * g.c;
          const float* k = w + (ky * g.kw + kx) * g.c * g.filters;
          for (int64_t ci = 0; ci < g.c; ++ci)
            for (int64_t f = 0; f < g.filters; ++f) out[f] += v[ci] * k[ci * g.filters + f];
        });
      }
}

// From dz (n, oh, ow, filters): dw += the kernel gradient, db += the column sums (db may be null),
// dx = the input gradient (dx may be null).
void convolveBackward(const mlcuda_conv_geometry& g, const float* x, const float* w, const float* dz, float* dx, float* dw,
                      float* db, int64_t n) {
  if (dx) std::fill(dx, dx + n * inSize(g), 0.0f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        const float* d = dz + i * outSize(g) + (oy * g.ow + ox) * g.filters;
        if (db)
          for (int64_t f = 0; f < g.filters; ++f) db[f] += d[f];
        window(g, oy, ox, [&](int64_t iy, int64_t ix, int64_t ky, int64_t kx) {
          const int64_t at = i * inSize(g) + (iy * g.w + ix) * g.c, k0 = (ky * g.kw + kx) * g.c * g.filters;
          for (int64_t ci = 0; ci < g.c; ++ci)
            for (int64_t f = 0; f < g.filters; ++f) {
              dw[k0 + ci * g.filters + f] += x[at + ci] * d[f];
              if (dx) dx[at + ci] += d[f] * w[k0 + ci * g.filters + f];
            }
        });
      }
}

}  // namespace

MLCUDA_EXPORT mlcuda_status mlcuda_conv2d_forward(mlcuda_context* ctx, const mlcuda_conv_geometry* gp, const float* x,
                                                  const float* w, const float* b, float* y, int64_t n, int act) {
  if (mlcuda_status s = badGeometry(gp, "conv2d_forward"); s.code != MLCUDA_OK) return s;
  const mlcuda_conv_geometry g = *gp;
  if (n == 0) return ok();
  const int64_t K = g.kh * g.kw * g.c * g.filters;
  return launch(ctx, "conv2d_forward", {floats(x, n * inSize(g)), floats(w, K), floats(b, g.filters)},
                {floats(y, n * outSize(g))}, [=] {
                  convolve(g, x, w, b, y, n);
                  ml::activationForward(static_cast<ml::Act>(act), y, n * g.oh * g.ow, g.filters);
                });
}

MLCUDA_EXPORT mlcuda_status mlcuda_conv2d_backward(mlcuda_context* ctx, const mlcuda_conv_geometry* gp, const float* x,
                                                   const float* w, const float* y, float* dy, float* dx, float* dw, float* db,
                                                   int64_t n, int act) {
  if (mlcuda_status s = badGeometry(gp, "conv2d_backward"); s.code != MLCUDA_OK) return s;
  const mlcuda_conv_geometry g = *gp;
  if (n == 0) return ok();
  const int64_t K = g.kh * g.kw * g.c * g.filters, N = n * outSize(g);
  return launch(ctx, "conv2d_backward",
                {floats(x, n * inSize(g)), floats(w, K), floats(y, N), floats(dy, N), floats(dw, K), floats(db, g.filters)},
                {floats(dy, N), floats(dx, n * inSize(g)), floats(dw, K), floats(db, g.filters)}, [=] {
                  ml::activationBackward(static_cast<ml::Act>(act), y, dy, dy, n * g.oh * g.ow, g.filters);
                  convolveBackward(g, x, w, dy, dx, dw, db, n);
                });
}

MLCUDA_EXPORT mlcuda_status mlcuda_pool2d_forward(mlcuda_context* ctx, const mlcuda_conv_geometry* gp, int max, const float* x,
                                                  float* y, int32_t* argmax, int64_t n) {
  if (mlcuda_status s = badGeometry(gp, "pool2d_forward"); s.code != MLCUDA_OK) return s;
  const mlcuda_conv_geometry g = *gp;
  if (n == 0) return ok();
  const int64_t N = n * outSize(g);
  return launch(ctx, "pool2d_forward", {floats(x, n * inSize(g))}, {floats(y, N), span(max ? argmax : nullptr, N, 4)}, [=] {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t oy = 0; oy < g.oh; ++oy)
        for (int64_t ox = 0; ox < g.ow; ++ox)
          for (int64_t ch = 0; ch < g.c; ++ch) {
            const int64_t o = i * outSize(g) + (oy * g.ow + ox) * g.c + ch;
            float best = max ? -std::numeric_limits<float>::infinity() : 0.0f;
            int32_t at = -1, count = 0;
            window(g, oy, ox, [&](int64_t iy, int64_t ix, int64_t, int64_t) {
              const auto pos = static_cast<int32_t>((iy * g.w + ix) * g.c + ch);
              const float v = x[i * inSize(g) + pos];
              if (at < 0) at = pos;  // the first in-image position, for a window of -inf or NaN
              if (max && v > best) best = v, at = pos;
              if (!max) best += v;
              ++count;
            });
            y[o] = max ? best : best / static_cast<float>(count);
            if (max) argmax[o] = at;
          }
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_pool2d_backward(mlcuda_context* ctx, const mlcuda_conv_geometry* gp, int max, const float* dy,
                                                   const int32_t* argmax, float* dx, int64_t n) {
  if (mlcuda_status s = badGeometry(gp, "pool2d_backward"); s.code != MLCUDA_OK) return s;
  const mlcuda_conv_geometry g = *gp;
  if (n == 0) return ok();
  const int64_t N = n * outSize(g);
  return launch(ctx, "pool2d_backward", {floats(dy, N), span(max ? argmax : nullptr, N, 4)}, {floats(dx, n * inSize(g))}, [=] {
    std::fill(dx, dx + n * inSize(g), 0.0f);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t oy = 0; oy < g.oh; ++oy)
        for (int64_t ox = 0; ox < g.ow; ++ox)
          for (int64_t ch = 0; ch < g.c; ++ch) {
            const int64_t o = i * outSize(g) + (oy * g.ow + ox) * g.c + ch;
            if (max) {
              dx[i * inSize(g) + argmax[o]] += dy[o];
              continue;
            }
            int64_t count = 0;
            window(g, oy, ox, [&](int64_t, int64_t, int64_t, int64_t) { ++count; });
            const float share = dy[o] * (1.0f / static_cast<float>(count));
            window(g, oy, ox,
                   [&](int64_t iy, int64_t ix, int64_t, int64_t) { dx[i * inSize(g) + (iy * g.w + ix) * g.c + ch] += share; });
          }
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_global_avg_pool_forward(mlcuda_context* ctx, const float* x, float* y, int64_t n, int64_t hw,
                                                           int64_t c) {
  return launch(ctx, "global_avg_pool_forward", {floats(x, n * hw * c)}, {floats(y, n * c)}, [=] {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t ch = 0; ch < c; ++ch) {
        float s = 0;
        for (int64_t p = 0; p < hw; ++p) s += x[(i * hw + p) * c + ch];
        y[i * c + ch] = s / static_cast<float>(hw);
      }
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_global_avg_pool_backward(mlcuda_context* ctx, const float* dy, float* dx, int64_t n,
                                                            int64_t hw, int64_t c) {
  return launch(ctx, "global_avg_pool_backward", {floats(dy, n * c)}, {floats(dx, n * hw * c)}, [=] {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t p = 0; p < hw; ++p)
        for (int64_t ch = 0; ch < c; ++ch) dx[(i * hw + p) * c + ch] = dy[i * c + ch] / static_cast<float>(hw);
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_batchnorm_moments(mlcuda_context* ctx, const float* x, int64_t rows, int64_t c, double* sums) {
  return launch(ctx, "batchnorm_moments", {floats(x, rows * c)}, {span(sums, 2 * c, 8)}, [=] {
    std::fill(sums, sums + 2 * c, 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t ch = 0; ch < c; ++ch) {
        const double v = x[r * c + ch];
        sums[ch] += v;
        sums[c + ch] += v * v;
      }
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_batchnorm_forward(mlcuda_context* ctx, const float* x, float* y, int64_t rows, int64_t c,
                                                     const float* stats, const float* gamma, const float* beta) {
  if (rows == 0) return ok();
  return launch(ctx, "batchnorm_forward", {floats(x, rows * c), floats(stats, 2 * c), floats(gamma, c), floats(beta, c)},
                {floats(y, rows * c)}, [=] {
                  for (int64_t r = 0; r < rows; ++r)
                    for (int64_t ch = 0; ch < c; ++ch) {
                      const float xh = (x[r * c + ch] - stats[ch]) * stats[c + ch];
                      y[r * c + ch] = (gamma ? gamma[ch] : 1.0f) * xh + (beta ? beta[ch] : 0.0f);
                    }
                });
}

MLCUDA_EXPORT mlcuda_status mlcuda_batchnorm_eval_stats(mlcuda_context* ctx, const float* mean, const float* var, int64_t c,
                                                        double epsilon, float* stats) {
  return launch(ctx, "batchnorm_eval_stats", {floats(mean, c), floats(var, c)}, {floats(stats, 2 * c)}, [=] {
    for (int64_t ch = 0; ch < c; ++ch) {
      stats[ch] = mean[ch];
      stats[c + ch] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(var[ch]) + epsilon));
    }
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_batchnorm_update_moving(mlcuda_context* ctx, float* mean, float* var, const double* global,
                                                           int64_t c, double momentum) {
  return launch(ctx, "batchnorm_update_moving", {floats(mean, c), floats(var, c), span(global, 2 * c, 8)},
                {floats(mean, c), floats(var, c)}, [=] {
                  for (int64_t ch = 0; ch < c; ++ch) {
                    mean[ch] = static_cast<float>(mean[ch] * momentum + global[ch] * (1.0 - momentum));
                    var[ch] = static_cast<float>(var[ch] * momentum + global[c + ch] * (1.0 - momentum));
                  }
                });
}

MLCUDA_EXPORT mlcuda_status mlcuda_batchnorm_backward_sums(mlcuda_context* ctx, const float* x, const float* dy, int64_t rows,
                                                           int64_t c, const float* stats, double* sums, float* dgamma,
                                                           float* dbeta) {
  return launch(ctx, "batchnorm_backward_sums",
                {floats(x, rows * c), floats(dy, rows * c), floats(stats, 2 * c), floats(dgamma, c), floats(dbeta, c)},
                {span(sums, 2 * c, 8), floats(dgamma, c), floats(dbeta, c)}, [=] {
                  std::fill(sums, sums + 2 * c, 0.0);
                  for (int64_t r = 0; r < rows; ++r)
                    for (int64_t ch = 0; ch < c; ++ch) {
                      const double g = dy[r * c + ch], xh = (x[r * c + ch] - stats[ch]) * stats[c + ch];
                      sums[ch] += g;
                      sums[c + ch] += g * xh;
                    }
                  for (int64_t ch = 0; ch < c; ++ch) {
                    if (dgamma) dgamma[ch] += static_cast<float>(sums[c + ch]);
                    if (dbeta) dbeta[ch] += static_cast<float>(sums[ch]);
                  }
                });
}

MLCUDA_EXPORT mlcuda_status mlcuda_batchnorm_backward_data(mlcuda_context* ctx, const float* x, const float* dy, float* dx,
                                                           int64_t rows, int64_t c, const float* stats, const float* gamma,
                                                           const double* sums, double count, int training) {
  if (rows == 0) return ok();
  return launch(ctx, "batchnorm_backward_data",
                {floats(x, rows * c), floats(dy, rows * c), floats(stats, 2 * c), floats(gamma, c),
                 span(training ? sums : nullptr, 2 * c, 8)},
                {floats(dx, rows * c)}, [=] {
                  for (int64_t ch = 0; ch < c; ++ch) {
                    const double k = (gamma ? gamma[ch] : 1.0) * stats[c + ch];
                    const double a = training ? sums[ch] / count : 0.0, b = training ? sums[c + ch] / count : 0.0;
                    for (int64_t r = 0; r < rows; ++r) {
                      const double xh = (x[r * c + ch] - stats[ch]) * stats[c + ch];
                      dx[r * c + ch] = static_cast<float>(k * (dy[r * c + ch] - a - xh * b));
                    }
                  }
                });
}

// ---- mixed precision: the rounding points of CudaPluginApi.h, with GCC's _Float16 for float16 ----

namespace {

// Round to nearest even, as __float2bfloat16_rn and __float2half_rn do; NaN stays NaN.
float lowRound(int precision, float v) {
  if (precision == MLCUDA_PRECISION_FLOAT16) return static_cast<float>(static_cast<_Float16>(v));
  return precision == MLCUDA_PRECISION_BFLOAT16 ? fake::roundBf16(v) : v;
}
void lowRound(int precision, float* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) v[i] = lowRound(precision, v[i]);
}
std::vector<float> rounded(int precision, const float* v, int64_t n) {
  std::vector<float> q(v, v + n);
  lowRound(precision, q.data(), n);
  return q;
}

}  // namespace

MLCUDA_EXPORT mlcuda_status mlcuda_dense_forward_low(mlcuda_context* ctx, int precision, const float* x, const float* w,
                                                     const float* b, float* y, int64_t n, int64_t in, int64_t out, int act) {
  if (n == 0) return ok();
  return launch(ctx, "dense_forward_low", {floats(x, n * in), floats(w, in * out), floats(b, out)}, {floats(y, n * out)}, [=] {
    const auto xq = rounded(precision, x, n * in), wq = rounded(precision, w, in * out);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < out; ++j) {
        float s = b ? b[j] : 0.0f;
        for (int64_t k = 0; k < in; ++k) s += xq[static_cast<size_t>(r * in + k)] * wq[static_cast<size_t>(k * out + j)];
        y[r * out + j] = s;
      }
    lowRound(precision, y, n * out);
    ml::activationForward(static_cast<ml::Act>(act), y, n, out);
    if (act != MLCUDA_ACT_SOFTMAX) lowRound(precision, y, n * out);
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_dense_backward_low(mlcuda_context* ctx, int precision, const float* x, const float* w,
                                                      const float* y, float* dy, float* dx, float* dw, float* db, int64_t n,
                                                      int64_t in, int64_t out, int act, int fused) {
  if (n == 0) return ok();
  return launch(
      ctx, "dense_backward_low",
      {floats(x, n * in), floats(w, in * out), floats(y, n * out), floats(dy, n * out), floats(dw, in * out), floats(db, out)},
      {floats(dy, n * out), floats(dx, n * in), floats(dw, in * out), floats(db, out)}, [=] {
        if (!fused) ml::activationBackward(static_cast<ml::Act>(act), y, dy, dy, n, out);
        lowRound(precision, dy, n * out);
        const auto xq = rounded(precision, x, n * in), wq = rounded(precision, w, in * out);
        for (int64_t k = 0; k < in; ++k)
          for (int64_t j = 0; j < out; ++j) {
            float s = 0;
            for (int64_t r = 0; r < n; ++r) s += xq[static_cast<size_t>(r * in + k)] * dy[r * out + j];
            dw[k * out + j] += lowRound(precision, s);
          }
        if (db)
          for (int64_t j = 0; j < out; ++j) {
            float s = 0;
            for (int64_t r = 0; r < n; ++r) s += dy[r * out + j];
            db[j] += lowRound(precision, s);
          }
        if (dx)
          for (int64_t r = 0; r < n; ++r)
            for (int64_t k = 0; k < in; ++k) {
              float s = 0;
              for (int64_t j = 0; j < out; ++j) s += dy[r * out + j] * wq[static_cast<size_t>(k * out + j)];
              dx[r * in + k] = lowRound(precision, s);
            }
      });
}

MLCUDA_EXPORT mlcuda_status mlcuda_conv2d_forward_low(mlcuda_context* ctx, int precision, const mlcuda_conv_geometry* gp,
                                                      const float* x, const float* w, const float* b, float* y, int64_t n,
                                                      int act) {
  if (mlcuda_status s = badGeometry(gp, "conv2d_forward_low"); s.code != MLCUDA_OK) return s;
  const mlcuda_conv_geometry g = *gp;
  if (n == 0) return ok();
  const int64_t K = g.kh * g.kw * g.c * g.filters;
  return launch(ctx, "conv2d_forward_low", {floats(x, n * inSize(g)), floats(w, K), floats(b, g.filters)},
                {floats(y, n * outSize(g))}, [=] {
                  const auto xq = rounded(precision, x, n * inSize(g)), wq = rounded(precision, w, K);
                  convolve(g, xq.data(), wq.data(), b, y, n);
                  lowRound(precision, y, n * outSize(g));
                  ml::activationForward(static_cast<ml::Act>(act), y, n * g.oh * g.ow, g.filters);
                  if (act != MLCUDA_ACT_SOFTMAX) lowRound(precision, y, n * outSize(g));
                });
}

MLCUDA_EXPORT mlcuda_status mlcuda_conv2d_backward_low(mlcuda_context* ctx, int precision, const mlcuda_conv_geometry* gp,
                                                       const float* x, const float* w, const float* y, float* dy, float* dx,
                                                       float* dw, float* db, int64_t n, int act) {
  if (mlcuda_status s = badGeometry(gp, "conv2d_backward_low"); s.code != MLCUDA_OK) return s;
  const mlcuda_conv_geometry g = *gp;
  if (n == 0) return ok();
  const int64_t K = g.kh * g.kw * g.c * g.filters, N = n * outSize(g);
  return launch(ctx, "conv2d_backward_low",
                {floats(x, n * inSize(g)), floats(w, K), floats(y, N), floats(dy, N), floats(dw, K), floats(db, g.filters)},
                {floats(dy, N), floats(dx, n * inSize(g)), floats(dw, K), floats(db, g.filters)}, [=] {
                  ml::activationBackward(static_cast<ml::Act>(act), y, dy, dy, n * g.oh * g.ow, g.filters);
                  lowRound(precision, dy, N);
                  const auto xq = rounded(precision, x, n * inSize(g)), wq = rounded(precision, w, K);
                  std::vector<float> dwq(static_cast<size_t>(K), 0.0f), dbq(static_cast<size_t>(g.filters), 0.0f);
                  convolveBackward(g, xq.data(), wq.data(), dy, dx, dwq.data(), db ? dbq.data() : nullptr, n);
                  for (int64_t k = 0; k < K; ++k) dw[k] += lowRound(precision, dwq[static_cast<size_t>(k)]);
                  if (db)
                    for (int64_t f = 0; f < g.filters; ++f) db[f] += lowRound(precision, dbq[static_cast<size_t>(f)]);
                  if (dx) lowRound(precision, dx, n * inSize(g));
                });
}

MLCUDA_EXPORT mlcuda_status mlcuda_scale(mlcuda_context* ctx, float* x, int64_t count, float factor) {
  return launch(ctx, "scale", {floats(x, count)}, {floats(x, count)}, [=] {
    for (int64_t i = 0; i < count; ++i) x[i] *= factor;
  });
}
