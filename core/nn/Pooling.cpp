// Pooling forward/backward. Max pooling remembers the winning input position of each output in
// the forward pass (the first one on ties, as TensorFlow's CPU kernel) and routes the gradient there.
#include "nn/Pooling.h"

#include <cstring>
#include <functional>
#include <limits>

#include "Error.h"
#include "Field.h"
#include "nn/Conv2D.h"
#include "nn/ThreadTeam.h"
#include "tensor/Dispatch.h"

namespace ml {

Shape Pool2D::build(const Shape& input) {
  g_ = spatialGeometry(name, type(), input, win_, "pool_size");
  inputShape = input;
  outputShape = {g_.oh, g_.ow, g_.c};
  return outputShape;
}

namespace {
// Samples [0, n) in parts: on the team of a replica with several threads, split by samples (every
// sample's values are computed alone, so any split gives the serial bits), else on this thread.
void forSamples(int64_t n, const std::function<void(int64_t, int64_t)>& part) {
  ThreadTeam* team = ThreadTeam::current();
  if (team && team->size() > 1 && n >= team->size())
    team->split(n, part);
  else
    part(0, n);
}
// One window position of max pooling over the channels: a strict > keeps the first winner. Written
// as selects and a bit mask on restrict pointers so that the compiler vectorizes it (a plain
// conditional on the index is left as a branch).
inline void maxStep(const float* __restrict v, float* __restrict best, int32_t* __restrict at, int32_t base, int32_t C) {
  for (int32_t ch = 0; ch < C; ++ch) {
    const float value = v[ch], current = best[ch];
    const int32_t wins = -static_cast<int32_t>(value > current);  // all ones where value wins
    best[ch] = value > current ? value : current;
    at[ch] = (at[ch] & ~wins) | ((base + ch) & wins);
  }
}

// Max pooling of one output row where every window lies inside the image (valid padding), with
// maxStep's comparisons in maxStep's order (the same bits, the same first winner); compiled for
// AVX2 too, where the channels run 8 at a time.
ML_DISPATCH_X86 void maxPoolRow(const float* __restrict img, float* __restrict out, int32_t* __restrict at, int64_t oy,
                                const Geometry& g, const Window& win) {
  const auto C = static_cast<int32_t>(g.c);
  for (int64_t ox = 0; ox < g.ow; ++ox) {
    const int64_t y0 = oy * win.sh, x0 = ox * win.sw;
    float* __restrict best = out + ox * C;
    int32_t* __restrict arg = at + ox * C;
    const auto first = static_cast<int32_t>((y0 * g.w + x0) * C);
    for (int32_t ch = 0; ch < C; ++ch) {
      best[ch] = -std::numeric_limits<float>::infinity();
      arg[ch] = first + ch;
    }
    for (int64_t ky = 0; ky < win.kh; ++ky)
      for (int64_t kx = 0; kx < win.kw; ++kx) {
        const auto base = static_cast<int32_t>(((y0 + ky) * g.w + x0 + kx) * C);
        const float* __restrict v = img + base;
        for (int32_t ch = 0; ch < C; ++ch) {
          const float value = v[ch], current = best[ch];
          const int32_t wins = -static_cast<int32_t>(value > current);
          best[ch] = value > current ? value : current;
          arg[ch] = (arg[ch] & ~wins) | ((base + ch) & wins);
        }
      }
  }
}

// Max pooling's gradient for one output row when the windows tile the image (strides = pool
// size, valid padding): every input position of the row's windows is written once, the output's
// gradient where it won and 0 elsewhere, so dx needs no zeroing pass first. With reluBelow the
// pooled value decides too: where it is not positive, the ReLU below passed no gradient.
ML_DISPATCH_X86 void maxPoolBackRow(const float* __restrict go, const float* __restrict yo, const int32_t* __restrict at,
                                    float* __restrict img, int64_t oy, const Geometry& g, const Window& win, bool reluBelow,
                                    float* __restrict sums) {
  const auto C = static_cast<int32_t>(g.c);
  for (int64_t ox = 0; ox < g.ow; ++ox) {
    const float* gr = go + ox * C;
    const float* yr = yo + ox * C;
    const int32_t* ar = at + ox * C;
    if (reluBelow)  // the bias gradient of the convolution below: the kept gradients' sum
      for (int32_t ch = 0; ch < C; ++ch) sums[ch] += yr[ch] > 0.0f ? gr[ch] : 0.0f;
    for (int64_t ky = 0; ky < win.kh; ++ky)
      for (int64_t kx = 0; kx < win.kw; ++kx) {
        const auto base = static_cast<int32_t>(((oy * win.sh + ky) * g.w + ox * win.sw + kx) * C);
        float* d = img + base;
        // Selects by bit masks on both operands read unconditionally, so that GCC vectorizes them.
        if (reluBelow) {
          for (int32_t ch = 0; ch < C; ++ch) {
            const int32_t keep = -static_cast<int32_t>(ar[ch] == base + ch) & -static_cast<int32_t>(yr[ch] > 0.0f);
            int32_t bits;
            std::memcpy(&bits, gr + ch, sizeof bits);
            bits &= keep;
            std::memcpy(d + ch, &bits, sizeof bits);
          }
        } else {
          for (int32_t ch = 0; ch < C; ++ch) {
            const int32_t keep = -static_cast<int32_t>(ar[ch] == base + ch);
            int32_t bits;
            std::memcpy(&bits, gr + ch, sizeof bits);
            bits &= keep;
            std::memcpy(d + ch, &bits, sizeof bits);
          }
        }
      }
  }
}
}  // namespace

bool Pool2D::windowsInside() const {
  return g_.padTop == 0 && g_.padLeft == 0 && (g_.oh - 1) * win_.sh + win_.kh <= g_.h && (g_.ow - 1) * win_.sw + win_.kw <= g_.w;
}
bool Pool2D::fused() const { return fusedBelow_ && fusedBelow_->poolFused(); }
bool Pool2D::windowsTile() const { return max_ && windowsInside() && win_.sh == win_.kh && win_.sw == win_.kw; }

// x (n, h, w, c) -> y (n, oh, ow, c). Each output position's window is visited position by
// position with the channels innermost (contiguous, so the compiler vectorizes them); the maximum
// keeps the first winner (a strict >), the average sums in window order, as before.
void Pool2D::forward(const float* x, float* y, int64_t n, const StepContext&) {
  const int64_t C = g_.c, inF = inFeatures(), outF = outFeatures();
  if (max_) argmax_.resize(static_cast<size_t>(n * outF));
  if (fused()) return fusedBelow_->forwardPooled(y, argmax_.data(), n);
  if (max_ && windowsInside())
    return forSamples(n, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i)
        for (int64_t oy = 0; oy < g_.oh; ++oy) {
          const int64_t o = i * outF + oy * g_.ow * C;
          maxPoolRow(x + i * inF, y + o, argmax_.data() + o, oy, g_, win_);
        }
    });
  forSamples(n, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const float* img = x + i * inF;
      for (int64_t oy = 0; oy < g_.oh; ++oy)
        for (int64_t ox = 0; ox < g_.ow; ++ox) {
          const int64_t y0 = std::max<int64_t>(0, oy * win_.sh - g_.padTop),
                        y1 = std::min(g_.h, oy * win_.sh - g_.padTop + win_.kh);
          const int64_t x0 = std::max<int64_t>(0, ox * win_.sw - g_.padLeft),
                        x1 = std::min(g_.w, ox * win_.sw - g_.padLeft + win_.kw);
          float* out = y + i * outF + (oy * g_.ow + ox) * C;
          if (max_) {
            int32_t* at = argmax_.data() + i * outF + (oy * g_.ow + ox) * C;
            const auto first = static_cast<int32_t>((y0 * g_.w + x0) * C);
            for (int64_t ch = 0; ch < C; ++ch) {
              out[ch] = -std::numeric_limits<float>::infinity();
              at[ch] = first + static_cast<int32_t>(ch);
            }
            for (int64_t iy = y0; iy < y1; ++iy)
              for (int64_t ix = x0; ix < x1; ++ix) {
                const auto base = static_cast<int32_t>((iy * g_.w + ix) * C);
                maxStep(img + base, out, at, base, static_cast<int32_t>(C));
              }
          } else {
            std::fill(out, out + C, 0.0f);
            for (int64_t iy = y0; iy < y1; ++iy)
              for (int64_t ix = x0; ix < x1; ++ix) {
                const float* v = img + (iy * g_.w + ix) * C;
                for (int64_t ch = 0; ch < C; ++ch) out[ch] += v[ch];
              }
            const auto count = static_cast<float>((y1 - y0) * (x1 - x0));
            for (int64_t ch = 0; ch < C; ++ch) out[ch] /= count;
          }
        }
    }
  });
}

// Windows that tile the input (no overlap, no padding): each gradient goes to its window's argmax,
// by parts of the samples (one per team thread), each with its own channel sums.
void Pool2D::backwardTiled(const float* y, const float* dy, float* dx, int64_t n) {
  const int64_t C = g_.c, inF = inFeatures(), outF = outFeatures();
  ThreadTeam* team = ThreadTeam::current();
  const int parts = team && team->size() > 1 && n >= team->size() ? team->size() : 1;
  biasParts_.assign(reluBelow_ ? static_cast<size_t>(parts * C) : 0, 0.0f);
  auto part = [&](int t) {
    const int64_t lo = n * t / parts, hi = n * (t + 1) / parts;
    float* sums = reluBelow_ ? biasParts_.data() + t * C : nullptr;
    for (int64_t i = lo; i < hi; ++i) {
      float* img = dx + i * inF;
      for (int64_t oy = 0; oy < g_.oh; ++oy) {
        const int64_t o = i * outF + oy * g_.ow * C;
        maxPoolBackRow(dy + o, y + o, argmax_.data() + o, img, oy, g_, win_, reluBelow_, sums);
        // The columns right of the last window (an odd width) get no gradient.
        for (int64_t iy = oy * win_.sh; iy < (oy + 1) * win_.sh; ++iy)
          std::fill(img + (iy * g_.w + g_.ow * win_.sw) * C, img + (iy + 1) * g_.w * C, 0.0f);
      }
      std::fill(img + g_.oh * win_.sh * g_.w * C, img + inF, 0.0f);  // and the rows below the last
    }
  };
  if (parts > 1)
    team->run(parts, part);
  else
    part(0);
}

// dy (n, oh, ow, c) -> dx (n, h, w, c)
void Pool2D::backward(const float*, const float* y, float* dy, float* dx, int64_t n, const StepContext&) {
  if (fused()) {
    pendingGrad_ = dy;
    pendingOut_ = y;
    return;
  }
  if (!dx) return;
  const int64_t C = g_.c, inF = inFeatures(), outF = outFeatures();
  if (windowsTile()) {
    backwardTiled(y, dy, dx, n);
    return;
  }
  forSamples(n, [&](int64_t lo, int64_t hi) {
    std::fill(dx + lo * inF, dx + hi * inF, 0.0f);
    for (int64_t i = lo; i < hi; ++i) {
      float* img = dx + i * inF;
      const float* g = dy + i * outF;
      if (max_) {
        const float* yi = y + i * outF;
        for (int64_t o = 0; o < outF; ++o)
          if (!reluBelow_ || yi[o] > 0.0f) img[argmax_[static_cast<size_t>(i * outF + o)]] += g[o];
        continue;
      }
      for (int64_t oy = 0; oy < g_.oh; ++oy)
        for (int64_t ox = 0; ox < g_.ow; ++ox) {
          const int64_t y0 = std::max<int64_t>(0, oy * win_.sh - g_.padTop),
                        y1 = std::min(g_.h, oy * win_.sh - g_.padTop + win_.kh);
          const int64_t x0 = std::max<int64_t>(0, ox * win_.sw - g_.padLeft),
                        x1 = std::min(g_.w, ox * win_.sw - g_.padLeft + win_.kw);
          const float inv = 1.0f / static_cast<float>((y1 - y0) * (x1 - x0));
          const float* go = g + (oy * g_.ow + ox) * C;
          for (int64_t iy = y0; iy < y1; ++iy)
            for (int64_t ix = x0; ix < x1; ++ix) {
              float* d = img + (iy * g_.w + ix) * C;
              for (int64_t ch = 0; ch < C; ++ch) d[ch] += go[ch] * inv;
            }
        }
    }
  });
}

Shape GlobalAveragePooling2D::build(const Shape& input) {
  if (input.size() != 3)
    throw UserError("layer '" + name + "' (GlobalAveragePooling2D) expects input of shape (height, width, channels) but gets " +
                        shapeToString(input) + ": put it after a Conv2D or pooling layer, or set " +
                        fieldInWords("model.input_shape") + " to [height, width, channels]",
                    "model.input_shape");
  inputShape = input;
  outputShape = {input[2]};
  return outputShape;
}

// x (n, h, w, c) -> y (n, c)
void GlobalAveragePooling2D::forward(const float* x, float* y, int64_t n, const StepContext&) {
  const int64_t C = inputShape[2], pos = inputShape[0] * inputShape[1];
  for (int64_t i = 0; i < n; ++i) {
    float* out = y + i * C;
    std::fill(out, out + C, 0.0f);
    for (int64_t p = 0; p < pos; ++p)
      for (int64_t ch = 0; ch < C; ++ch) out[ch] += x[(i * pos + p) * C + ch];
    for (int64_t ch = 0; ch < C; ++ch) out[ch] /= static_cast<float>(pos);
  }
}

// dy (n, c) -> dx (n, h, w, c) = dy / (h w) at every position
void GlobalAveragePooling2D::backward(const float*, const float*, float* dy, float* dx, int64_t n, const StepContext&) {
  if (!dx) return;
  const int64_t C = inputShape[2], pos = inputShape[0] * inputShape[1];
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < pos; ++p)
      for (int64_t ch = 0; ch < C; ++ch) dx[(i * pos + p) * C + ch] = dy[i * C + ch] / static_cast<float>(pos);
}

}  // namespace ml
