// Activations. Softmax subtracts the row maximum for stability; its backward is the
// Jacobian-vector product dz_i = y_i (dy_i - sum_j dy_j y_j).
#include "nn/Activations.h"

#include <algorithm>
#include <cmath>

#include "Error.h"

namespace ml {

Act parseActivation(const std::string& name, const std::string& where) {
  if (name == "linear" || name.empty() || name == "none") return Act::Linear;
  if (name == "relu") return Act::Relu;
  if (name == "sigmoid") return Act::Sigmoid;
  if (name == "tanh") return Act::Tanh;
  if (name == "softmax") return Act::Softmax;
  throw UserError(where + ": unknown activation '" + name + "' (allowed: linear, relu, sigmoid, tanh, softmax)");
}

const char* toString(Act a) {
  switch (a) {
    case Act::Linear: return "linear";
    case Act::Relu: return "relu";
    case Act::Sigmoid: return "sigmoid";
    case Act::Tanh: return "tanh";
    case Act::Softmax: return "softmax";
  }
  return "linear";
}

static void softmaxRows(float* y, int64_t n, int64_t k) {
  for (int64_t r = 0; r < n; ++r) {
    float* row = y + r * k;
    float mx = *std::max_element(row, row + k);
    float sum = 0;
    for (int64_t j = 0; j < k; ++j) {
      row[j] = std::exp(row[j] - mx);
      sum += row[j];
    }
    float inv = 1.0f / sum;
    for (int64_t j = 0; j < k; ++j) row[j] *= inv;
  }
}

void activationForward(Act a, float* y, int64_t n, int64_t k) {
  const int64_t total = n * k;
  switch (a) {
    case Act::Linear: return;
    case Act::Relu:
      for (int64_t i = 0; i < total; ++i) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
      return;
    case Act::Sigmoid:
      for (int64_t i = 0; i < total; ++i) y[i] = 1.0f / (1.0f + std::exp(-y[i]));
      return;
    case Act::Tanh:
      for (int64_t i = 0; i < total; ++i) y[i] = std::tanh(y[i]);
      return;
    case Act::Softmax: softmaxRows(y, n, k); return;
  }
}

void activationBackward(Act a, const float* y, const float* dy, float* dz, int64_t n, int64_t k) {
  const int64_t total = n * k;
  switch (a) {
    case Act::Linear:
      if (dz != dy) std::copy(dy, dy + total, dz);
      return;
    case Act::Relu:
      // Both operands read unconditionally: a select the baseline x86-64 build (SSE2) vectorizes.
      // Written as `y > 0 ? dy : 0` the load of dy is conditional, GCC keeps a branch per element,
      // and half of those branches mispredict (measured: 7.6% of a wide-MLP step without AVX2).
      for (int64_t i = 0; i < total; ++i) {
        const float d = dy[i];
        dz[i] = y[i] > 0.0f ? d : 0.0f;
      }
      return;
    case Act::Sigmoid:
      for (int64_t i = 0; i < total; ++i) dz[i] = dy[i] * y[i] * (1.0f - y[i]);
      return;
    case Act::Tanh:
      for (int64_t i = 0; i < total; ++i) dz[i] = dy[i] * (1.0f - y[i] * y[i]);
      return;
    case Act::Softmax:
      for (int64_t r = 0; r < n; ++r) {
        const float* yr = y + r * k;
        const float* dyr = dy + r * k;
        float* dzr = dz + r * k;
        float dot = 0;
        for (int64_t j = 0; j < k; ++j) dot += dyr[j] * yr[j];
        for (int64_t j = 0; j < k; ++j) dzr[j] = yr[j] * (dyr[j] - dot);
      }
      return;
  }
}

}  // namespace ml
