// Pooling, GlobalAveragePooling2D and BatchNormalization entry points, on the plugin's own kernels
// (PoolKernels.cu says why not cuDNN's): each value as core/nn computes it.
#include "backend/cuda/Context.h"
#include "backend/cuda/Kernels.h"

namespace mlcuda {
namespace {

void requireRows(int64_t rows, int64_t c, const char* who) {
  if (rows < 0 || c <= 0)
    fail(MLCUDA_ERR_INVALID_ARGUMENT, std::string(who) + ": bad shape (" + std::to_string(rows) + " rows, " + std::to_string(c) +
                                          " channels): rows must be >= 0 and channels > 0");
}

// The two per-channel sums of BatchNormalization (2c doubles into sums); zeros for no rows, which a
// replica with an empty shard still contributes to the sum across replicas.
template <class Launch>
void channelSums(mlcuda_context* ctx, int64_t rows, int64_t c, double* sums, Launch launch) {
  if (rows == 0) {
    ML_CUDA(ctx->label, cudaMemsetAsync(sums, 0, 2 * sizeof(double) * static_cast<size_t>(c), ctx->compute));
    return;
  }
  auto* workspace =
      static_cast<double*>(scratch(ctx, sizeof(double) * static_cast<size_t>(kernels::batchnormWorkspace(rows, c))));
  launch(workspace);
}

}  // namespace
}  // namespace mlcuda

using namespace mlcuda;

extern "C" {

MLCUDA_EXPORT mlcuda_status mlcuda_pool2d_forward(mlcuda_context* ctx, const mlcuda_conv_geometry* g, int max, const float* x,
                                                  float* y, int32_t* argmax, int64_t n) {
  return guarded([&] {
    use(ctx);
    requireGeometry(g, "mlcuda_pool2d_forward", true);
    ML_REQUIRE(n >= 0, "mlcuda_pool2d_forward: n must be >= 0");
    if (n == 0) return;
    ML_REQUIRE(x && y, "mlcuda_pool2d_forward: x and y must not be NULL");
    ML_REQUIRE(!max || argmax, "mlcuda_pool2d_forward: max pooling needs argmax");
    kernels::poolForward(ctx->compute, *g, max != 0, x, y, max ? argmax : nullptr, n);
    ML_LAUNCHED(ctx->label, "poolForward");
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_pool2d_backward(mlcuda_context* ctx, const mlcuda_conv_geometry* g, int max, const float* dy,
                                                   const int32_t* argmax, float* dx, int64_t n) {
  return guarded([&] {
    use(ctx);
    requireGeometry(g, "mlcuda_pool2d_backward", true);
    ML_REQUIRE(n >= 0, "mlcuda_pool2d_backward: n must be >= 0");
    if (n == 0) return;
    ML_REQUIRE(dy && dx, "mlcuda_pool2d_backward: dy and dx must not be NULL");
    ML_REQUIRE(!max || argmax, "mlcuda_pool2d_backward: max pooling needs the forward's argmax");
    kernels::poolBackward(ctx->compute, *g, max != 0, dy, max ? argmax : nullptr, dx, n);
    ML_LAUNCHED(ctx->label, "poolBackward");
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_global_avg_pool_forward(mlcuda_context* ctx, const float* x, float* y, int64_t n, int64_t hw,
                                                           int64_t c) {
  return guarded([&] {
    use(ctx);
    ML_REQUIRE(n >= 0 && hw > 0 && c > 0, "mlcuda_global_avg_pool_forward: n must be >= 0, hw and c positive");
    if (n == 0) return;
    ML_REQUIRE(x && y, "mlcuda_global_avg_pool_forward: x and y must not be NULL");
    kernels::globalAvgPoolForward(ctx->compute, x, y, n, hw, c);
    ML_LAUNCHED(ctx->label, "globalAvgPoolForward");
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_global_avg_pool_backward(mlcuda_context* ctx, const float* dy, float* dx, int64_t n,
                                                            int64_t hw, int64_t c) {
  return guarded([&] {
    use(ctx);
    ML_REQUIRE(n >= 0 && hw > 0 && c > 0, "mlcuda_global_avg_pool_backward: n must be >= 0, hw and c positive");
    if (n == 0) return;
    ML_REQUIRE(dy && dx, "mlcuda_global_avg_pool_backward: dy and dx must not be NULL");
    kernels::globalAvgPoolBackward(ctx->compute, dy, dx, n, hw, c);
    ML_LAUNCHED(ctx->label, "globalAvgPoolBackward");
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_batchnorm_moments(mlcuda_context* ctx, const float* x, int64_t rows, int64_t c, double* sums) {
  return guarded([&] {
    use(ctx);
    requireRows(rows, c, "mlcuda_batchnorm_moments");
    ML_REQUIRE(sums, "mlcuda_batchnorm_moments: sums must not be NULL");
    ML_REQUIRE(rows == 0 || x, "mlcuda_batchnorm_moments: x must not be NULL");
    channelSums(ctx, rows, c, sums, [&](double* workspace) {
      kernels::batchnormMoments(ctx->compute, x, rows, c, sums, workspace);
      ML_LAUNCHED(ctx->label, "batchnormMoments");
    });
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_batchnorm_forward(mlcuda_context* ctx, const float* x, float* y, int64_t rows, int64_t c,
                                                     const float* stats, const float* gamma, const float* beta) {
  return guarded([&] {
    use(ctx);
    requireRows(rows, c, "mlcuda_batchnorm_forward");
    if (rows == 0) return;
    ML_REQUIRE(x && y && stats, "mlcuda_batchnorm_forward: x, y and stats must not be NULL");
    kernels::batchnormForward(ctx->compute, x, y, rows, c, stats, gamma, beta);
    ML_LAUNCHED(ctx->label, "batchnormForward");
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_batchnorm_eval_stats(mlcuda_context* ctx, const float* moving_mean, const float* moving_var,
                                                        int64_t c, double epsilon, float* stats) {
  return guarded([&] {
    use(ctx);
    ML_REQUIRE(c > 0, "mlcuda_batchnorm_eval_stats: c must be positive");
    ML_REQUIRE(moving_mean && moving_var && stats, "mlcuda_batchnorm_eval_stats: NULL argument");
    kernels::batchnormEvalStats(ctx->compute, moving_mean, moving_var, c, epsilon, stats);
    ML_LAUNCHED(ctx->label, "batchnormEvalStats");
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_batchnorm_update_moving(mlcuda_context* ctx, float* moving_mean, float* moving_var,
                                                           const double* global, int64_t c, double momentum) {
  return guarded([&] {
    use(ctx);
    ML_REQUIRE(c > 0, "mlcuda_batchnorm_update_moving: c must be positive");
    ML_REQUIRE(moving_mean && moving_var && global, "mlcuda_batchnorm_update_moving: NULL argument");
    kernels::batchnormUpdateMoving(ctx->compute, moving_mean, moving_var, global, c, momentum);
    ML_LAUNCHED(ctx->label, "batchnormUpdateMoving");
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_batchnorm_backward_sums(mlcuda_context* ctx, const float* x, const float* dy, int64_t rows,
                                                           int64_t c, const float* stats, double* sums, float* dgamma,
                                                           float* dbeta) {
  return guarded([&] {
    use(ctx);
    requireRows(rows, c, "mlcuda_batchnorm_backward_sums");
    ML_REQUIRE(sums, "mlcuda_batchnorm_backward_sums: sums must not be NULL");
    ML_REQUIRE(rows == 0 || (x && dy && stats), "mlcuda_batchnorm_backward_sums: x, dy and stats must not be NULL");
    channelSums(ctx, rows, c, sums, [&](double* workspace) {
      kernels::batchnormBackwardSums(ctx->compute, x, dy, rows, c, stats, sums, dgamma, dbeta, workspace);
      ML_LAUNCHED(ctx->label, "batchnormBackwardSums");
    });
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_batchnorm_backward_data(mlcuda_context* ctx, const float* x, const float* dy, float* dx,
                                                           int64_t rows, int64_t c, const float* stats, const float* gamma,
                                                           const double* sums, double count, int training) {
  return guarded([&] {
    use(ctx);
    requireRows(rows, c, "mlcuda_batchnorm_backward_data");
    if (rows == 0) return;
    ML_REQUIRE(x && dy && dx && stats, "mlcuda_batchnorm_backward_data: x, dy, dx and stats must not be NULL");
    ML_REQUIRE(!training || (sums && count > 0), "mlcuda_batchnorm_backward_data: training needs the sums and a count > 0");
    kernels::batchnormBackwardData(ctx->compute, x, dy, dx, rows, c, stats, gamma, training ? sums : nullptr, count,
                                   training != 0);
    ML_LAUNCHED(ctx->label, "batchnormBackwardData");
  });
}

}  // extern "C"
