// Pooling forward/backward. Max pooling remembers the winning input position of each output in
// the forward pass (the first one on ties, as TensorFlow's CPU kernel) and routes the gradient there.
#include "nn/Pooling.h"

#include <limits>

#include "Error.h"
#include "FieldNames.h"

namespace ml {

Shape Pool2D::build(const Shape& input) {
  g_ = spatialGeometry(name, type(), input, win_, "pool_size");
  inputShape = input;
  outputShape = {g_.oh, g_.ow, g_.c};
  return outputShape;
}

// x (n, h, w, c) -> y (n, oh, ow, c)
void Pool2D::forward(const float* x, float* y, int64_t n, const StepContext&) {
  const int64_t C = g_.c, inF = inFeatures(), outF = outFeatures();
  if (max_) argmax_.resize(static_cast<size_t>(n * outF));
  for (int64_t i = 0; i < n; ++i) {
    const float* img = x + i * inF;
    for (int64_t oy = 0; oy < g_.oh; ++oy)
      for (int64_t ox = 0; ox < g_.ow; ++ox) {
        const int64_t y0 = std::max<int64_t>(0, oy * win_.sh - g_.padTop),
                      y1 = std::min(g_.h, oy * win_.sh - g_.padTop + win_.kh);
        const int64_t x0 = std::max<int64_t>(0, ox * win_.sw - g_.padLeft),
                      x1 = std::min(g_.w, ox * win_.sw - g_.padLeft + win_.kw);
        const int64_t o = (oy * g_.ow + ox) * C;
        for (int64_t ch = 0; ch < C; ++ch) {
          float best = -std::numeric_limits<float>::infinity(), sum = 0;
          int32_t at = static_cast<int32_t>((y0 * g_.w + x0) * C + ch);
          for (int64_t iy = y0; iy < y1; ++iy)
            for (int64_t ix = x0; ix < x1; ++ix) {
              const int64_t p = (iy * g_.w + ix) * C + ch;
              const float v = img[p];
              sum += v;
              if (v > best) {
                best = v;
                at = static_cast<int32_t>(p);
              }
            }
          if (max_) {
            y[i * outF + o + ch] = best;
            argmax_[static_cast<size_t>(i * outF + o + ch)] = at;
          } else {
            y[i * outF + o + ch] = sum / static_cast<float>((y1 - y0) * (x1 - x0));
          }
        }
      }
  }
}

// dy (n, oh, ow, c) -> dx (n, h, w, c)
void Pool2D::backward(const float*, const float*, float* dy, float* dx, int64_t n, const StepContext&) {
  if (!dx) return;
  const int64_t C = g_.c, inF = inFeatures(), outF = outFeatures();
  std::fill(dx, dx + n * inF, 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    float* img = dx + i * inF;
    const float* g = dy + i * outF;
    if (max_) {
      for (int64_t o = 0; o < outF; ++o) img[argmax_[static_cast<size_t>(i * outF + o)]] += g[o];
      continue;
    }
    for (int64_t oy = 0; oy < g_.oh; ++oy)
      for (int64_t ox = 0; ox < g_.ow; ++ox) {
        const int64_t y0 = std::max<int64_t>(0, oy * win_.sh - g_.padTop),
                      y1 = std::min(g_.h, oy * win_.sh - g_.padTop + win_.kh);
        const int64_t x0 = std::max<int64_t>(0, ox * win_.sw - g_.padLeft),
                      x1 = std::min(g_.w, ox * win_.sw - g_.padLeft + win_.kw);
        const float inv = 1.0f / static_cast<float>((y1 - y0) * (x1 - x0));
        for (int64_t ch = 0; ch < C; ++ch) {
          const float v = g[(oy * g_.ow + ox) * C + ch] * inv;
          for (int64_t iy = y0; iy < y1; ++iy)
            for (int64_t ix = x0; ix < x1; ++ix) img[(iy * g_.w + ix) * C + ch] += v;
        }
      }
  }
}

nlohmann::json Pool2D::args() const {
  return {{"pool_size", {win_.kh, win_.kw}}, {"strides", {win_.sh, win_.sw}}, {"padding", win_.same ? "same" : "valid"}};
}

Shape GlobalAveragePooling2D::build(const Shape& input) {
  if (input.size() != 3)
    throw UserError("layer '" + name + "' (GlobalAveragePooling2D) expects input of shape (height, width, channels) but gets " +
                    shapeToString(input) + ": put it after a Conv2D or pooling layer, or set " +
                    fieldInWords("model.input_shape") + " to [height, width, channels]");
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
