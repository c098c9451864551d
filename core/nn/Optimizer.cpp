#include "nn/Optimizer.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "Error.h"
#include "Names.h"
#include "tensor/Dispatch.h"

namespace ml {

std::optional<OptimizerKind> optimizerKindNamed(const std::string& name) {
  const OptimizerKind all[] = {OptimizerKind::Sgd, OptimizerKind::Adam, OptimizerKind::RmsProp};
  return fromName(name, all);
}

const char* toString(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::Sgd: return "sgd";
    case OptimizerKind::Adam: return "adam";
    case OptimizerKind::RmsProp: return "rmsprop";
  }
  return "adam";
}

std::unique_ptr<Optimizer> Optimizer::make(const OptimizerSpec& spec, int64_t n) {
  switch (spec.kind) {
    case OptimizerKind::Sgd: return std::make_unique<Sgd>(spec, n);
    case OptimizerKind::Adam: return std::make_unique<Adam>(spec, n);
    case OptimizerKind::RmsProp: return std::make_unique<RmsProp>(spec, n);
  }
  throw std::logic_error("Optimizer::make: unknown kind");
}

void Optimizer::restore(const std::vector<std::vector<float>>& slots, int64_t iterations) {
  const auto mine = stateBuffers();
  if (slots.size() != mine.size())
    throw UserError("the checkpoint holds " + std::to_string(slots.size()) + " optimizer slot(s) but " + name() + " has " +
                    std::to_string(mine.size()));
  for (size_t i = 0; i < mine.size(); ++i)
    if (slots[i].size() != mine[i].size())
      throw UserError("optimizer slot " + std::to_string(i) + " of the checkpoint has " + std::to_string(slots[i].size()) +
                      " values, " + name() + " needs " + std::to_string(mine[i].size()));
  // The buffers are this optimizer's own non-const vectors; stateBuffers() only hands out views.
  for (size_t i = 0; i < mine.size(); ++i) std::copy(slots[i].begin(), slots[i].end(), const_cast<float*>(mine[i].data()));
  iterations_ = iterations;
}

// The update loops, one element at a time (any split across threads or vector lanes gives the
// same bits), compiled for the baseline and for AVX2 (tensor/Dispatch.h).
namespace {

ML_DISPATCH_X86 void sgdLoop(float* __restrict p, const float* __restrict g, size_t n, float lr, float scale) {
  for (size_t i = 0; i < n; ++i) p[i] -= lr * (g[i] * scale);
}

ML_DISPATCH_X86 void sgdMomentumLoop(float* __restrict p, const float* __restrict g, float* __restrict v, size_t n, float lr,
                                     float m, bool nesterov, float scale) {
  if (nesterov) {
    for (size_t i = 0; i < n; ++i) {
      const float gi = g[i] * scale;
      v[i] = m * v[i] - lr * gi;
      p[i] += m * v[i] - lr * gi;
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      v[i] = m * v[i] - lr * (g[i] * scale);
      p[i] += v[i];
    }
  }
}

ML_DISPATCH_X86 void adamLoop(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v, size_t n,
                              AdamConstants k, float eps, float scale) {
  const float alpha = k.alpha, b1 = k.b1, b2 = k.b2, c1 = k.c1, c2 = k.c2;
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i] * scale;
    m[i] = b1 * m[i] + c1 * gi;
    v[i] = b2 * v[i] + c2 * gi * gi;
    p[i] -= alpha * m[i] / (std::sqrt(v[i]) + eps);
  }
}

ML_DISPATCH_X86 void rmspropLoop(float* __restrict p, const float* __restrict g, float* __restrict v, float* __restrict mom,
                                 size_t n, float lr, RmsPropConstants k, float momentum, float eps, float scale) {
  const float rho = k.rho, c = k.c;
  if (!mom) {
    for (size_t i = 0; i < n; ++i) {
      const float gi = g[i] * scale;
      v[i] = rho * v[i] + c * gi * gi;
      p[i] -= lr * gi / std::sqrt(v[i] + eps);
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      const float gi = g[i] * scale;
      v[i] = rho * v[i] + c * gi * gi;
      mom[i] = momentum * mom[i] + lr * gi / std::sqrt(v[i] + eps);
      p[i] -= mom[i];
    }
  }
}

}  // namespace

void Sgd::beginStep(float lr) {
  lr_ = lr;
  ++iterations_;
}

void Sgd::update(size_t offset, std::span<float> p, std::span<const float> g, float scale) {
  if (momentum_ == 0.0f)
    sgdLoop(p.data(), g.data(), p.size(), lr_, scale);
  else
    sgdMomentumLoop(p.data(), g.data(), velocity_.data() + offset, p.size(), lr_, momentum_, nesterov_, scale);
}

void Adam::beginStep(float lr) {
  ++iterations_;
  constants_ = adamConstants(lr, b1_, b2_, iterations_);
}

void Adam::update(size_t offset, std::span<float> p, std::span<const float> g, float scale) {
  adamLoop(p.data(), g.data(), m_.data() + offset, v_.data() + offset, p.size(), constants_, eps_, scale);
}

void RmsProp::beginStep(float lr) {
  lr_ = lr;
  ++iterations_;
}

void RmsProp::update(size_t offset, std::span<float> p, std::span<const float> g, float scale) {
  rmspropLoop(p.data(), g.data(), v_.data() + offset, momentum_ == 0.0f ? nullptr : mom_.data() + offset, p.size(), lr_,
              rmspropConstants(rho_), momentum_, eps_, scale);
}

}  // namespace ml
