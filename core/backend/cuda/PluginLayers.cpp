// Layer entry points: Dense on cuBLAS; softmax, the element-wise activations, losses, metrics and
// dropout on the plugin's kernels (Conv2D: PluginConv.cpp; pooling and BatchNormalization:
// PluginSpatial.cpp). Shapes and formulas follow core/nn exactly.
#include "backend/cuda/Context.h"
#include "backend/cuda/DeviceRng.h"
#include "backend/cuda/Kernels.h"

namespace mlcuda {
namespace {

void requireAct(int act) {
  if (act < MLCUDA_ACT_LINEAR || act > MLCUDA_ACT_SOFTMAX)
    fail(MLCUDA_ERR_INVALID_ARGUMENT,
         "CUDA plugin: unknown activation " + std::to_string(act) + " (0 linear, 1 relu, 2 sigmoid, 3 tanh, 4 softmax)");
}

// y = softmax(x) per row, the row maximum subtracted; y may be x.
void softmaxForward(mlcuda_context* ctx, const float* x, float* y, int64_t n, int64_t k) {
  kernels::softmaxForward(ctx->compute, x, y, n, k);
  ML_LAUNCHED(ctx->label, "softmaxForward");
}

// dx = y * (dy - sum(dy * y)) per row, from the output y; dx may be dy.
void softmaxBackward(mlcuda_context* ctx, const float* y, const float* dy, float* dx, int64_t n, int64_t k) {
  kernels::softmaxBackward(ctx->compute, y, dy, dx, n, k);
  ML_LAUNCHED(ctx->label, "softmaxBackward");
}

void requireShape(int64_t n, int64_t k, const char* what) {
  if (n < 0 || k <= 0)
    fail(MLCUDA_ERR_INVALID_ARGUMENT, std::string(what) + ": bad shape (" + std::to_string(n) + ", " + std::to_string(k) +
                                          "): rows must be >= 0 and columns > 0");
}

}  // namespace
}  // namespace mlcuda

using namespace mlcuda;

extern "C" {

// Row-major meets column-major: a row-major (r, c) matrix is, to cuBLAS, its transpose (c, r) with
// leading dimension c. So y = x W, (n, out) = (n, in)(in, out), is computed as y^T = W^T x^T:
// sgemm(N, N, m = out, n = n, k = in, A = W (lda out), B = x (ldb in), C = y (ldc out)).
MLCUDA_EXPORT mlcuda_status mlcuda_dense_forward(mlcuda_context* ctx, const float* x, const float* w, const float* b, float* y,
                                                 int64_t n, int64_t in, int64_t out, int act) {
  return guarded([&] {
    use(ctx);
    requireAct(act);
    requireShape(n, out, "mlcuda_dense_forward");
    ML_REQUIRE(in > 0, "mlcuda_dense_forward: in must be positive");
    if (n == 0) return;
    ML_REQUIRE(x && w && y, "mlcuda_dense_forward: x, w and y must not be NULL");
    const int N = toInt(n, "rows"), I = toInt(in, "in"), O = toInt(out, "out");
    (void)toInt(n * out, "rows * out");
    const float one = 1.0f, zero = 0.0f;
    ML_CUBLAS(ctx->label, cublasSgemm(ctx->cublas, CUBLAS_OP_N, CUBLAS_OP_N, O, N, I, &one, w, O, x, I, &zero, y, O));
    const int elementwise = act == MLCUDA_ACT_SOFTMAX ? MLCUDA_ACT_LINEAR : act;
    if (b || elementwise != MLCUDA_ACT_LINEAR) {
      kernels::biasActivation(ctx->compute, y, y, b, n, out, elementwise);
      ML_LAUNCHED(ctx->label, "biasActivation");
    }
    if (act == MLCUDA_ACT_SOFTMAX) softmaxForward(ctx, y, y, n, out);  // in place
  });
}

// With dz (n, out) = dy * act'(.):
//   dW (in, out) += x^T dz   ->  dW^T (out, in) += dz^T x: sgemm(N, T, out, in, n, A = dz (lda out), B = x (ldb in))
//   dx (n, in)    = dz W^T   ->  dx^T (in, n)    = W dz^T: sgemm(T, N, in, n, out, A = W (lda out), B = dz (ldb out))
MLCUDA_EXPORT mlcuda_status mlcuda_dense_backward(mlcuda_context* ctx, const float* x, const float* w, const float* y, float* dy,
                                                  float* dx, float* dw, float* db, int64_t n, int64_t in, int64_t out, int act,
                                                  int fused_softmax) {
  return guarded([&] {
    use(ctx);
    requireAct(act);
    requireShape(n, out, "mlcuda_dense_backward");
    ML_REQUIRE(in > 0, "mlcuda_dense_backward: in must be positive");
    if (n == 0) return;
    ML_REQUIRE(x && w && y && dy && dw, "mlcuda_dense_backward: x, w, y, dy and dw must not be NULL");
    const int N = toInt(n, "rows"), I = toInt(in, "in"), O = toInt(out, "out");
    (void)toInt(n * out, "rows * out");
    // dz replaces dy in place (dy is scratch by contract); the bias gradient's workspace is in scratch.
    const size_t workspaceFloats = db ? static_cast<size_t>(kernels::biasGradientWorkspace(n, out)) : 0;
    float* workspace = workspaceFloats > 0 ? static_cast<float*>(scratch(ctx, sizeof(float) * workspaceFloats)) : nullptr;
    const float* dz = dy;
    // Fused: the loss gave the gradient with respect to the output activation's input already
    // (softmax with a categorical cross-entropy, sigmoid with the binary one), whatever act is.
    if (!fused_softmax && act == MLCUDA_ACT_SOFTMAX) {
      softmaxBackward(ctx, y, dy, dy, n, out);
    } else if (!fused_softmax && act != MLCUDA_ACT_LINEAR) {
      kernels::activationBackward(ctx->compute, act, y, dy, dy, n * out);
      ML_LAUNCHED(ctx->label, "activationBackward");
    }
    const float one = 1.0f, zero = 0.0f;
    ML_CUBLAS(ctx->label, cublasSgemm(ctx->cublas, CUBLAS_OP_N, CUBLAS_OP_T, O, I, N, &one, dz, O, x, I, &one, dw, O));
    if (db) {
      kernels::biasGradient(ctx->compute, dz, db, n, out, workspace);
      ML_LAUNCHED(ctx->label, "biasGradient");
    }
    if (dx) ML_CUBLAS(ctx->label, cublasSgemm(ctx->cublas, CUBLAS_OP_T, CUBLAS_OP_N, I, N, O, &one, w, O, dz, O, &zero, dx, I));
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_activation_forward(mlcuda_context* ctx, int act, const float* x, float* y, int64_t n,
                                                      int64_t k) {
  return guarded([&] {
    use(ctx);
    requireAct(act);
    requireShape(n, k, "mlcuda_activation_forward");
    if (n == 0) return;
    ML_REQUIRE(x && y, "mlcuda_activation_forward: x and y must not be NULL");
    const size_t bytes = sizeof(float) * static_cast<size_t>(n * k);
    if (act == MLCUDA_ACT_SOFTMAX) {
      softmaxForward(ctx, x, y, n, k);  // in place when x == y
    } else if (act == MLCUDA_ACT_LINEAR) {
      if (x != y) ML_CUDA(ctx->label, cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice, ctx->compute));
    } else {
      kernels::biasActivation(ctx->compute, x, y, nullptr, n, k, act);
      ML_LAUNCHED(ctx->label, "biasActivation");
    }
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_activation_backward(mlcuda_context* ctx, int act, const float* y, const float* dy, float* dx,
                                                       int64_t n, int64_t k) {
  return guarded([&] {
    use(ctx);
    requireAct(act);
    requireShape(n, k, "mlcuda_activation_backward");
    if (n == 0) return;
    ML_REQUIRE(y && dy && dx, "mlcuda_activation_backward: y, dy and dx must not be NULL");
    const size_t bytes = sizeof(float) * static_cast<size_t>(n * k);
    if (act == MLCUDA_ACT_SOFTMAX) {
      softmaxBackward(ctx, y, dy, dx, n, k);  // in place when dx == dy
    } else if (act == MLCUDA_ACT_LINEAR) {
      if (dx != dy) ML_CUDA(ctx->label, cudaMemcpyAsync(dx, dy, bytes, cudaMemcpyDeviceToDevice, ctx->compute));
    } else {
      kernels::activationBackward(ctx->compute, act, y, dy, dx, n * k);
      ML_LAUNCHED(ctx->label, "activationBackward");
    }
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_loss(mlcuda_context* ctx, int kind, int from_logits, int fused_softmax, const float* pred,
                                        const float* targets, int64_t n, int64_t k, float* grad, double* loss_sum) {
  return guarded([&] {
    use(ctx);
    ML_REQUIRE(kind >= MLCUDA_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY && kind <= MLCUDA_LOSS_BINARY_CROSSENTROPY,
               "mlcuda_loss: unknown loss kind " + std::to_string(kind));
    requireShape(n, k, "mlcuda_loss");
    ML_REQUIRE(loss_sum, "mlcuda_loss: loss_sum must not be NULL");
    if (n == 0) {
      ML_CUDA(ctx->label, cudaMemsetAsync(loss_sum, 0, sizeof(double), ctx->compute));
      return;
    }
    ML_REQUIRE(pred && targets, "mlcuda_loss: pred and targets must not be NULL");
    auto* rows = static_cast<double*>(scratch(ctx, sizeof(double) * static_cast<size_t>(n)));
    kernels::lossRows(ctx->compute, kind, from_logits != 0, fused_softmax != 0, pred, targets, n, k, grad, rows);
    ML_LAUNCHED(ctx->label, "lossRows");
    kernels::sumDeterministic(ctx->compute, rows, n, loss_sum);
    ML_LAUNCHED(ctx->label, "sumDeterministic");
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_metric_sum(mlcuda_context* ctx, int kind, const float* pred, const float* targets, int64_t n,
                                              int64_t k, int64_t target_dim, double* sum) {
  return guarded([&] {
    use(ctx);
    ML_REQUIRE(kind == MLCUDA_METRIC_ACCURACY || kind == MLCUDA_METRIC_MEAN_ABSOLUTE_ERROR ||
                   kind == MLCUDA_METRIC_BINARY_ACCURACY || kind == MLCUDA_METRIC_BINARY_ACCURACY_LOGITS,
               "mlcuda_metric_sum: unknown metric " + std::to_string(kind));
    requireShape(n, k, "mlcuda_metric_sum");
    ML_REQUIRE(target_dim >= 1, "mlcuda_metric_sum: target_dim must be >= 1");
    ML_REQUIRE(kind == MLCUDA_METRIC_ACCURACY || target_dim == k,
               "mlcuda_metric_sum: mae and binary accuracy need target_dim == k");
    ML_REQUIRE(sum, "mlcuda_metric_sum: sum must not be NULL");
    if (n == 0) {
      ML_CUDA(ctx->label, cudaMemsetAsync(sum, 0, sizeof(double), ctx->compute));
      return;
    }
    ML_REQUIRE(pred && targets, "mlcuda_metric_sum: pred and targets must not be NULL");
    auto* rows = static_cast<double*>(scratch(ctx, sizeof(double) * static_cast<size_t>(n)));
    kernels::metricRows(ctx->compute, kind, pred, targets, n, k, target_dim, rows);
    ML_LAUNCHED(ctx->label, "metricRows");
    kernels::sumDeterministic(ctx->compute, rows, n, sum);
    ML_LAUNCHED(ctx->label, "sumDeterministic");
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_dropout_forward(mlcuda_context* ctx, const float* x, float* y, uint8_t* mask, int64_t n,
                                                   int64_t k, double rate, uint64_t seed, uint64_t salt, uint64_t step,
                                                   const int64_t* sample_ids, int training) {
  return guarded([&] {
    use(ctx);
    requireShape(n, k, "mlcuda_dropout_forward");
    ML_REQUIRE(rate >= 0.0 && rate < 1.0, "mlcuda_dropout_forward: rate must be in [0, 1)");
    if (n == 0) return;
    ML_REQUIRE(x && y, "mlcuda_dropout_forward: x and y must not be NULL");
    if (!training || rate == 0.0) {
      if (x != y)
        ML_CUDA(ctx->label,
                cudaMemcpyAsync(y, x, sizeof(float) * static_cast<size_t>(n * k), cudaMemcpyDeviceToDevice, ctx->compute));
      return;
    }
    ML_REQUIRE(mask, "mlcuda_dropout_forward: mask must not be NULL in training");
    // Threshold and scale computed on the host exactly as ml::Dropout does.
    const uint32_t threshold = dropoutThreshold(rate);
    const float scale = static_cast<float>(1.0 / (1.0 - rate));
    kernels::dropoutForward(ctx->compute, x, y, mask, n, k, seed ^ salt, step, sample_ids, threshold, scale);
    ML_LAUNCHED(ctx->label, "dropoutForward");
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_dropout_backward(mlcuda_context* ctx, const float* dy, float* dx, const uint8_t* mask,
                                                    int64_t count, double rate, int training) {
  return guarded([&] {
    use(ctx);
    ML_REQUIRE(count >= 0, "mlcuda_dropout_backward: count must be >= 0");
    ML_REQUIRE(rate >= 0.0 && rate < 1.0, "mlcuda_dropout_backward: rate must be in [0, 1)");
    if (count == 0) return;
    ML_REQUIRE(dy && dx, "mlcuda_dropout_backward: dy and dx must not be NULL");
    if (!training || rate == 0.0) {
      if (dx != dy)
        ML_CUDA(ctx->label,
                cudaMemcpyAsync(dx, dy, sizeof(float) * static_cast<size_t>(count), cudaMemcpyDeviceToDevice, ctx->compute));
      return;
    }
    ML_REQUIRE(mask, "mlcuda_dropout_backward: mask must not be NULL in training");
    kernels::dropoutBackward(ctx->compute, dy, dx, mask, count, static_cast<float>(1.0 / (1.0 - rate)));
    ML_LAUNCHED(ctx->label, "dropoutBackward");
  });
}

}  // extern "C"
