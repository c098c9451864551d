// BatchNormalization forward/backward (see BatchNorm.h for the statistics under mirrored training).
// Sums are taken in double: the variance is E[x^2] - E[x]^2 over sums that are all-reduced.
#include "nn/BatchNorm.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "Error.h"
#include "tensor/Finite.h"

namespace ml {

double movingStatsStartShare(double momentum, int64_t updates) {
  return std::pow(momentum, static_cast<double>(std::max<int64_t>(0, updates)));
}

int64_t movingStatsSettleUpdates(double momentum, double share) {
  if (momentum <= 0) return 1;
  if (momentum >= 1) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(std::ceil(std::log(share) / std::log(momentum)));
}

Shape BatchNorm::build(const Shape& input) {
  if (input.empty() || input.back() <= 0)
    throw UserError("layer '" + name + "' (BatchNormalization) needs an input with a channels axis, got " + shapeToString(input));
  inputShape = input;
  outputShape = input;
  return outputShape;
}

void BatchNorm::bind(float* params, float* grads) {
  const int64_t C = channels();
  float* p = params;
  float* g = grads;
  gamma_ = scale_ ? p : nullptr;
  dgamma_ = scale_ ? g : nullptr;
  if (scale_) p += C, g += C;
  beta_ = center_ ? p : nullptr;
  dbeta_ = center_ ? g : nullptr;
  if (center_) p += C;
  movingMean_ = p;
  movingVar_ = p + C;
}

void BatchNorm::initialize(uint64_t) {
  const int64_t C = channels();
  if (scale_) std::fill(gamma_, gamma_ + C, 1.0f);
  if (center_) std::fill(beta_, beta_ + C, 0.0f);
  std::fill(movingMean_, movingMean_ + C, 0.0f);
  std::fill(movingVar_, movingVar_ + C, 1.0f);
}

std::vector<double> BatchNorm::moments(const float* x, int64_t n) const {
  const int64_t C = channels(), rows = n * inFeatures() / C;
  std::vector<double> s(static_cast<size_t>(2 * C + 1), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const double v = x[r * C + c];
      s[static_cast<size_t>(c)] += v;
      s[static_cast<size_t>(C + c)] += v * v;
    }
  s[static_cast<size_t>(2 * C)] = static_cast<double>(rows);
  return s;
}

// x (n, ..., C) -> y (n, ..., C) = gamma (x - mean) / sqrt(var + eps) + beta
void BatchNorm::forward(const float* x, float* y, int64_t n, const StepContext& ctx) {
  const int64_t C = channels(), rows = n * inFeatures() / C;
  mean_.resize(static_cast<size_t>(C));
  invStd_.resize(static_cast<size_t>(C));
  if (ctx.training) {
    const std::vector<double> local = moments(x, n);
    std::vector<double> global = local;
    ctx.sumAcrossReplicas(global);
    const std::vector<double>& use = synchronized_ ? global : local;
    count_ = use[static_cast<size_t>(2 * C)];
    const double gCount = global[static_cast<size_t>(2 * C)];
    for (int64_t c = 0; c < C; ++c) {
      const auto i = static_cast<size_t>(c), j = static_cast<size_t>(C + c);
      const double m = use[i] / count_, var = std::max(0.0, use[j] / count_ - m * m);
      mean_[i] = static_cast<float>(m);
      invStd_[i] = static_cast<float>(1.0 / std::sqrt(var + epsilon_));
      const double gm = global[i] / gCount, gv = std::max(0.0, global[j] / gCount - gm * gm);
      movingMean_[c] = static_cast<float>(movingMean_[c] * momentum_ + gm * (1.0 - momentum_));
      movingVar_[c] = static_cast<float>(movingVar_[c] * momentum_ + gv * (1.0 - momentum_));
    }
  } else {
    for (int64_t c = 0; c < C; ++c) {
      mean_[static_cast<size_t>(c)] = movingMean_[c];
      invStd_[static_cast<size_t>(c)] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(movingVar_[c]) + epsilon_));
    }
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const float xh = (x[r * C + c] - mean_[static_cast<size_t>(c)]) * invStd_[static_cast<size_t>(c)];
      y[r * C + c] = (scale_ ? gamma_[c] : 1.0f) * xh + (center_ ? beta_[c] : 0.0f);
    }
}

// dy -> dgamma += sum dy xhat, dbeta += sum dy (this shard's: the gradient all-reduce adds the rest);
// training: dx = gamma invStd / M (M dy - sum dy - xhat sum dy xhat), the sums over the rows the
// statistics came from (all-reduced when synchronized); evaluation: dx = gamma invStd dy.
void BatchNorm::backward(const float* x, const float*, float* dy, float* dx, int64_t n, const StepContext& ctx) {
  const int64_t C = channels(), rows = n * inFeatures() / C;
  std::vector<double> s(static_cast<size_t>(2 * C), 0.0);  // [sum dy (C), sum dy xhat (C)]
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const double g = dy[r * C + c], xh = (x[r * C + c] - mean_[static_cast<size_t>(c)]) * invStd_[static_cast<size_t>(c)];
      s[static_cast<size_t>(c)] += g;
      s[static_cast<size_t>(C + c)] += g * xh;
    }
  for (int64_t c = 0; c < C; ++c) {
    if (scale_) dgamma_[c] += static_cast<float>(s[static_cast<size_t>(C + c)]);
    if (center_) dbeta_[c] += static_cast<float>(s[static_cast<size_t>(c)]);
  }
  if (!dx) return;
  if (ctx.training && synchronized_) ctx.sumAcrossReplicas(s);
  for (int64_t c = 0; c < C; ++c) {
    const auto i = static_cast<size_t>(c);
    const double k = (scale_ ? gamma_[c] : 1.0) * invStd_[i];
    const double a = ctx.training ? s[i] / count_ : 0.0, b = ctx.training ? s[static_cast<size_t>(C + c)] / count_ : 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      const double xh = (x[r * C + c] - mean_[i]) * invStd_[i];
      dx[r * C + c] = static_cast<float>(k * (dy[r * C + c] - a - xh * b));
    }
  }
}

bool BatchNorm::gradientsFinite() const {
  const auto C = static_cast<size_t>(channels());
  return (!scale_ || allFinite(dgamma_, C)) && (!center_ || allFinite(dbeta_, C));
}

nlohmann::json BatchNorm::args() const {
  nlohmann::json j{{"momentum", momentum_}, {"epsilon", epsilon_}};
  if (!center_) j["center"] = false;
  if (!scale_) j["scale"] = false;
  if (synchronized_) j["synchronized"] = true;
  return j;
}

}  // namespace ml
