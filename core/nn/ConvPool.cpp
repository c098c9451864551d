// The fused first convolution and max pooling (ConvPool.h). The loops keep a block of 16 (or 8)
// filters in registers and broadcast one input value per tap; they are compiled for the baseline,
// AVX2 and AVX-512 (tensor/Dispatch.h), with the same bits in each.
#include "nn/ConvPool.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <vector>

#include "tensor/Dispatch.h"

// The vector helpers below are always inlined into their clones, so the warning that a vector's
// calling convention depends on AVX does not apply (GCC and clang both give it).
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace ml::convpool {

namespace {

constexpr int64_t kMaxPatch = 64;
constexpr int64_t kMaxWindow = 64;  // pooling window positions

// Offsets of the patch's taps, in (ky, kx, c) order, from a window's first input value.
struct Taps {
  int64_t count = 0;
  int64_t offset[kMaxPatch];
  explicit Taps(const Shapes& s) {
    for (int64_t ky = 0; ky < s.convWin.kh; ++ky)
      for (int64_t kx = 0; kx < s.convWin.kw; ++kx)
        for (int64_t c = 0; c < s.conv.c; ++c) offset[count++] = (ky * s.conv.w + kx) * s.conv.c + c;
  }
};

// A block of B filters as one GCC/Clang vector (16 floats: one AVX-512 register, two AVX2 ones,
// four SSE ones, whatever the clone): plain loops over 16 local floats were left scalar.
typedef float F16 __attribute__((vector_size(64)));
typedef int32_t I16 __attribute__((vector_size(64)));
typedef float F8 __attribute__((vector_size(32)));
typedef int32_t I8 __attribute__((vector_size(32)));
template <int B>
struct Types;
template <>
struct Types<16> {
  using F = F16;
  using I = I16;
};
template <>
struct Types<8> {
  using F = F8;
  using I = I8;
};

template <int B>
struct Block {
  using F = typename Types<B>::F;
  using I = typename Types<B>::I;
  [[gnu::always_inline]] static F load(const float* p) {
    F v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  [[gnu::always_inline]] static I loadInt(const int32_t* p) {
    I v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  [[gnu::always_inline]] static void store(float* p, F v) { std::memcpy(p, &v, sizeof v); }
  [[gnu::always_inline]] static void store(int32_t* p, I v) { std::memcpy(p, &v, sizeof v); }
  [[gnu::always_inline]] static F select(I mask, F a, F b) {
    return reinterpret_cast<F>((reinterpret_cast<I>(a) & mask) | (reinterpret_cast<I>(b) & ~mask));
  }
  [[gnu::always_inline]] static I lanes() {
    I v;
    for (int j = 0; j < B; ++j) v[j] = j;
    return v;
  }
};

// bfloat16 rounding of every lane, without a branch (NaN kept): Bf16Gemm's roundValue, per lane.
template <int B>
[[gnu::always_inline]] inline typename Block<B>::F roundLanes(typename Block<B>::F x) {
  using V = Block<B>;
  const auto u = reinterpret_cast<typename V::I>(x);
  const auto r = (u + 0x7fff + ((u >> 16) & 1)) & static_cast<int32_t>(0xffff0000u);
  const auto isNan = (u & 0x7fffffff) > 0x7f800000;
  return reinterpret_cast<typename V::F>((u & isNan) | (r & ~isNan));
}

// One sample, filters [f0, f0 + B): every pooling window's convolution outputs from the bias, ReLU,
// (rounded), compared in row-major window order with a strict > (the first maximum wins).
template <int B>
[[gnu::always_inline]] inline void forwardBlock(const Shapes& s, const Taps& taps, const float* __restrict x,
                                                const float* __restrict w, const float* __restrict bias, float* __restrict pooled,
                                                int32_t* __restrict argmax, int64_t f0, bool roundBf16) {
  using V = Block<B>;
  using Vf = typename V::F;
  using Vi = typename V::I;
  const int64_t F = s.filters, W = s.conv.w, C = s.conv.c, positions = s.poolWin.kh * s.poolWin.kw;
  const Vf b0 = bias ? V::load(bias + f0) : Vf{};
  const Vi lanes = V::lanes();
  // Each window position's offsets from the window's first one (input value, output index),
  // computed once: a division per position costs more than its multiply-adds.
  int64_t inStep[kMaxWindow];
  int32_t outStep[kMaxWindow];
  for (int64_t dy = 0, k = 0; dy < s.poolWin.kh; ++dy)
    for (int64_t dx = 0; dx < s.poolWin.kw; ++dx, ++k) {
      inStep[k] = (dy * s.convWin.sh * W + dx * s.convWin.sw) * C;
      outStep[k] = static_cast<int32_t>((dy * s.conv.ow + dx) * F);
    }
  for (int64_t py = 0; py < s.pool.oh; ++py)
    for (int64_t px = 0; px < s.pool.ow; ++px) {
      const int64_t oy0 = py * s.poolWin.sh, ox0 = px * s.poolWin.sw;
      const float* x0 = x + (oy0 * s.convWin.sh * W + ox0 * s.convWin.sw) * C;
      const auto o0 = static_cast<int32_t>((oy0 * s.conv.ow + ox0) * F + f0);
      Vf best = Vf{} - std::numeric_limits<float>::infinity();
      Vi at = lanes + o0;
      // The window's positions four at a time: four independent sums hide the adds' latency.
      for (int64_t k0 = 0; k0 < positions; k0 += 4) {
        const int64_t count = std::min<int64_t>(4, positions - k0);
        const float* xin[4];
        int32_t where[4];
        for (int64_t k = 0; k < 4; ++k) {
          const int64_t kk = k0 + std::min(k, count - 1);
          xin[k] = x0 + inStep[kk];
          where[k] = o0 + outStep[kk];
        }
        Vf acc0 = b0, acc1 = b0, acc2 = b0, acc3 = b0;
        for (int64_t t = 0; t < taps.count; ++t) {
          const Vf wv = V::load(w + t * F + f0);
          const int64_t off = taps.offset[t];
          acc0 = acc0 + xin[0][off] * wv;
          acc1 = acc1 + xin[1][off] * wv;
          acc2 = acc2 + xin[2][off] * wv;
          acc3 = acc3 + xin[3][off] * wv;
        }
        const Vf accs[4] = {acc0, acc1, acc2, acc3};
        for (int64_t k = 0; k < count; ++k) {
          Vf v = V::select(accs[k] > 0.0f, accs[k], Vf{});
          if (roundBf16) v = roundLanes<B>(v);
          const Vi wins = v > best;
          best = V::select(wins, v, best);
          at = ((lanes + where[k]) & wins) | (at & ~wins);
        }
      }
      const int64_t o = (py * s.pool.ow + px) * F + f0;
      V::store(pooled + o, best);
      V::store(argmax + o, at);
    }
}

ML_DISPATCH_X86_WIDE void forwardSample(const Shapes& s, const float* x, const float* w, const float* bias, float* pooled,
                                        int32_t* argmax, bool roundBf16) {
  const Taps taps(s);
  int64_t f0 = 0;
  for (; f0 + 16 <= s.filters; f0 += 16) forwardBlock<16>(s, taps, x, w, bias, pooled, argmax, f0, roundBf16);
  for (; f0 < s.filters; f0 += 8) forwardBlock<8>(s, taps, x, w, bias, pooled, argmax, f0, roundBf16);
}

// One sample's output gradient over the tiled area, filters [f0, f0 + B): g at each window's
// winner where the pooled value is positive, 0 elsewhere; and db += what was kept, by pooled
// output in order.
template <int B>
[[gnu::always_inline]] inline void outputGradientBlock(const Shapes& s, const float* __restrict pooled,
                                                       const int32_t* __restrict argmax, const float* __restrict g,
                                                       float* __restrict dz, float* __restrict db, int64_t f0) {
  using V = Block<B>;
  using Vf = typename V::F;
  const int64_t F = s.filters;
  const typename V::I lanes = V::lanes();
  Vf sum{};
  for (int64_t py = 0; py < s.pool.oh; ++py)
    for (int64_t px = 0; px < s.pool.ow; ++px) {
      const int64_t o = (py * s.pool.ow + px) * F + f0;
      const Vf kept = V::select(V::load(pooled + o) > 0.0f, V::load(g + o), Vf{});
      const typename V::I at = V::loadInt(argmax + o);
      sum = sum + kept;
      for (int64_t dy = 0; dy < s.poolWin.kh; ++dy)
        for (int64_t dx = 0; dx < s.poolWin.kw; ++dx) {
          const int64_t oy = py * s.poolWin.sh + dy, ox = px * s.poolWin.sw + dx;
          const auto base = static_cast<int32_t>((oy * s.conv.ow + ox) * F + f0);
          V::store(dz + base, V::select(at == lanes + base, kept, Vf{}));
        }
    }
  if (db) V::store(db + f0, V::load(db + f0) + sum);
}

ML_DISPATCH_X86_WIDE void outputGradient(const Shapes& s, const float* pooled, const int32_t* argmax, const float* g, float* dz,
                                         float* db) {
  int64_t f0 = 0;
  for (; f0 + 16 <= s.filters; f0 += 16) outputGradientBlock<16>(s, pooled, argmax, g, dz, db, f0);
  for (; f0 < s.filters; f0 += 8) outputGradientBlock<8>(s, pooled, argmax, g, dz, db, f0);
}

// dw[t][f0 + j] += the sum over row oy's tiled positions of x at tap t times dz: four partial sums
// (positions ox mod 4, which hides the adds' latency), added together at the end of the row. Row by
// row, so that the row of dz (ow x F floats) stays in L1 while every tap and block reads it.
template <int B>
[[gnu::always_inline]] inline void weightRowBlock(const Shapes& s, const float* __restrict xrow, const float* __restrict drow,
                                                  float* __restrict dw, int64_t f0, int64_t tx) {
  using V = Block<B>;
  using Vf = typename V::F;
  const int64_t step = s.convWin.sw * s.conv.c;
  const float* d = drow + f0;
  Vf acc0{}, acc1{}, acc2{}, acc3{};
  int64_t ox = 0;
  for (; ox + 4 <= tx; ox += 4) {
    acc0 = acc0 + xrow[ox * step] * V::load(d + ox * s.filters);
    acc1 = acc1 + xrow[(ox + 1) * step] * V::load(d + (ox + 1) * s.filters);
    acc2 = acc2 + xrow[(ox + 2) * step] * V::load(d + (ox + 2) * s.filters);
    acc3 = acc3 + xrow[(ox + 3) * step] * V::load(d + (ox + 3) * s.filters);
  }
  for (; ox < tx; ++ox) acc0 = acc0 + xrow[ox * step] * V::load(d + ox * s.filters);
  V::store(dw + f0, V::load(dw + f0) + ((acc0 + acc1) + (acc2 + acc3)));
}

ML_DISPATCH_X86_WIDE void weightGradient(const Shapes& s, const float* x, const float* dz, float* dw) {
  const Taps taps(s);
  const int64_t ty = s.pool.oh * s.poolWin.sh, tx = s.pool.ow * s.poolWin.sw, F = s.filters;
  for (int64_t oy = 0; oy < ty; ++oy) {
    const float* xrow = x + oy * s.convWin.sh * s.conv.w * s.conv.c;
    const float* drow = dz + oy * s.conv.ow * F;
    for (int64_t t = 0; t < taps.count; ++t) {
      int64_t f0 = 0;
      for (; f0 + 16 <= F; f0 += 16) weightRowBlock<16>(s, xrow + taps.offset[t], drow, dw + t * F, f0, tx);
      for (; f0 < F; f0 += 8) weightRowBlock<8>(s, xrow + taps.offset[t], drow, dw + t * F, f0, tx);
    }
  }
}

}  // namespace

bool fits(const Shapes& s) {
  const bool valid = s.conv.padTop == 0 && s.conv.padLeft == 0 && !s.convWin.same;
  const bool tiles = s.poolWin.sh == s.poolWin.kh && s.poolWin.sw == s.poolWin.kw && s.pool.padTop == 0 && s.pool.padLeft == 0 &&
                     s.pool.oh * s.poolWin.sh <= s.conv.oh && s.pool.ow * s.poolWin.sw <= s.conv.ow;
  return valid && tiles && s.filters % 8 == 0 && s.convWin.kh * s.convWin.kw * s.conv.c <= kMaxPatch &&
         s.poolWin.kh * s.poolWin.kw <= kMaxWindow;
}

void forward(const Shapes& s, int64_t n, const float* x, const float* w, const float* bias, float* pooled, int32_t* argmax,
             bool roundBf16) {
  const int64_t in = s.conv.h * s.conv.w * s.conv.c, out = s.pool.oh * s.pool.ow * s.filters;
  for (int64_t i = 0; i < n; ++i) forwardSample(s, x + i * in, w, bias, pooled + i * out, argmax + i * out, roundBf16);
}

void backward(const Shapes& s, int64_t n, const float* x, const float* pooled, const int32_t* argmax, const float* g, float* dw,
              float* db) {
  const int64_t in = s.conv.h * s.conv.w * s.conv.c, out = s.pool.oh * s.pool.ow * s.filters;
  thread_local std::vector<float> dz;
  dz.resize(static_cast<size_t>(s.conv.oh * s.conv.ow * s.filters));
  for (int64_t i = 0; i < n; ++i) {
    outputGradient(s, pooled + i * out, argmax + i * out, g + i * out, dz.data(), db);
    weightGradient(s, x + i * in, dz.data(), dw);
  }
}

}  // namespace ml::convpool
