// Conv2D entry points on cuDNN (ConvPlans.h: layout, padding, algorithms, workspace): the kernel
// transposed into cuDNN's layout, the input padded where TensorFlow's padding is asymmetric, then the
// bias, the activation and the bias gradient on the plugin's own kernels, as Dense has them.
#include "backend/cuda/ConvPlans.h"
#include "backend/cuda/Kernels.h"

namespace mlcuda {

void requireGeometry(const mlcuda_conv_geometry* g, const char* who, bool pooling) {
  auto bad = [&](const std::string& what) { fail(MLCUDA_ERR_INVALID_ARGUMENT, std::string(who) + ": " + what); };
  if (!g) bad("the geometry is NULL");
  const struct {
    const char* name;
    int64_t value;
  } sizes[] = {{"h", g->h},   {"w", g->w},   {"c", g->c},   {"oh", g->oh}, {"ow", g->ow}, {"filters", g->filters},
               {"kh", g->kh}, {"kw", g->kw}, {"sh", g->sh}, {"sw", g->sw}};
  for (const auto& s : sizes)
    if (s.value <= 0) bad(std::string("geometry ") + s.name + " = " + std::to_string(s.value) + " must be positive");
  if (g->pad_top < 0 || g->pad_left < 0 || g->pad_bottom < 0 || g->pad_right < 0) bad("paddings must be >= 0");
  auto axis = [&](const char* name, int64_t in, int64_t before, int64_t after, int64_t k, int64_t stride, int64_t out) {
    const int64_t span = in + before + after - k;
    if (span < 0 || span / stride + 1 != out)
      bad(std::string("the ") + name + " " + std::to_string(in) + " padded by " + std::to_string(before) + " + " +
          std::to_string(after) + " under a window of " + std::to_string(k) + " moved by " + std::to_string(stride) +
          " does not give " + std::to_string(out) + " outputs");
    if (pooling && (before >= k || after >= k))
      bad(std::string("a pooling window's ") + name + " padding must be smaller than it");
  };
  axis("height", g->h, g->pad_top, g->pad_bottom, g->kh, g->sh, g->oh);
  axis("width", g->w, g->pad_left, g->pad_right, g->kw, g->sw, g->ow);
  if (pooling && g->filters != g->c) bad("pooling keeps the channels: filters must equal c");
  if (pooling && static_cast<double>(g->h) * static_cast<double>(g->w) * static_cast<double>(g->c) > 2147483647.0)
    bad("an image of " + std::to_string(g->h) + "x" + std::to_string(g->w) + "x" + std::to_string(g->c) +
        " values has positions beyond what argmax (int32) holds");
}

namespace {

void requireConvAct(int act, const char* who) {
  if (act < MLCUDA_ACT_LINEAR || act > MLCUDA_ACT_TANH)
    fail(MLCUDA_ERR_INVALID_ARGUMENT, std::string(who) + ": activation " + std::to_string(act) +
                                          " is not one a convolution takes (0 linear, 1 relu, 2 sigmoid, 3 tanh)");
}

float* at(void* base, size_t offset) { return reinterpret_cast<float*>(static_cast<char*>(base) + offset); }

size_t floats(int64_t count) { return sizeof(float) * static_cast<size_t>(count); }

}  // namespace
}  // namespace mlcuda

using namespace mlcuda;

extern "C" {

// y = act(conv(x, kernel) + b): the kernel (kh*kw*c, filters) transposed to cuDNN's (filters,
// kh*kw*c), the input padded when the padding is asymmetric, cuDNN's forward convolution into y,
// then bias and activation in place over the (n*oh*ow, filters) rows.
MLCUDA_EXPORT mlcuda_status mlcuda_conv2d_forward(mlcuda_context* ctx, const mlcuda_conv_geometry* g, const float* x,
                                                  const float* w, const float* b, float* y, int64_t n, int act) {
  return guarded([&] {
    use(ctx);
    requireConvAct(act, "mlcuda_conv2d_forward");
    requireGeometry(g, "mlcuda_conv2d_forward", false);
    ML_REQUIRE(n >= 0, "mlcuda_conv2d_forward: n must be >= 0");
    if (n == 0) return;
    ML_REQUIRE(x && w && y, "mlcuda_conv2d_forward: x, w and y must not be NULL");
    ConvPlan& plan = convPlan(ctx, *g, n);
    const int64_t P = g->kh * g->kw * g->c, F = g->filters;
    Carve carve;
    const size_t kernelAt = carve.add(floats(P * F));
    const size_t inputAt = plan.padded ? carve.add(floats(n * plan.hp * plan.wp * g->c)) : 0;
    void* base = scratch(ctx, carve.total);
    float* kernel = at(base, kernelAt);
    kernels::transpose(ctx->compute, w, kernel, P, F);
    ML_LAUNCHED(ctx->label, "transpose");
    const float* input = x;
    if (plan.padded) {
      float* padded = at(base, inputAt);
      kernels::padImages(ctx->compute, x, padded, n, g->h, g->w, g->c, g->pad_top, g->pad_left, plan.hp, plan.wp);
      ML_LAUNCHED(ctx->label, "padImages");
      input = padded;
    }
    void* workspace = nullptr;
    const ConvAlgo& a = preparePass(ctx, plan, ConvPass::Forward, &workspace);
    const float one = 1.0f, zero = 0.0f;
    ML_CUDNN(ctx->label, cudnn().convolutionForward(cudnnState(ctx).handle, &one, plan.x, input, plan.w, kernel, plan.conv,
                                                    static_cast<cudnnConvolutionFwdAlgo_t>(a.algo), workspace, a.workspaceBytes,
                                                    &zero, plan.y, y));
    if (b || act != MLCUDA_ACT_LINEAR) {
      kernels::biasActivation(ctx->compute, y, y, b, n * g->oh * g->ow, F, act);
      ML_LAUNCHED(ctx->label, "biasActivation");
    }
  });
}

// dz = dy * act'(.) from y, in place; the kernel gradient from cuDNN's backward filter pass (into
// scratch, in cuDNN's layout) added transposed into dw; db += the column sums of dz (the
// deterministic two-pass sum Dense uses); dx from cuDNN's backward data pass, through a padded
// scratch that is cropped into dx when the padding is asymmetric.
// Long: the passes share one scratch, carved once at the top, and the cached plan's descriptors;
// split up, each part would need the offsets of all the others.
MLCUDA_EXPORT mlcuda_status mlcuda_conv2d_backward(mlcuda_context* ctx, const mlcuda_conv_geometry* g, const float* x,
                                                   const float* w, const float* y, float* dy, float* dx, float* dw, float* db,
                                                   int64_t n, int act) {
  return guarded([&] {
    use(ctx);
    requireConvAct(act, "mlcuda_conv2d_backward");
    requireGeometry(g, "mlcuda_conv2d_backward", false);
    ML_REQUIRE(n >= 0, "mlcuda_conv2d_backward: n must be >= 0");
    if (n == 0) return;
    ML_REQUIRE(x && w && y && dy && dw, "mlcuda_conv2d_backward: x, w, y, dy and dw must not be NULL");
    const int64_t P = g->kh * g->kw * g->c, F = g->filters, rows = n * g->oh * g->ow;
    if (act != MLCUDA_ACT_LINEAR) {
      kernels::activationBackward(ctx->compute, act, y, dy, dy, rows * F);
      ML_LAUNCHED(ctx->label, "activationBackward");
    }
    const float* dz = dy;
    ConvPlan& plan = convPlan(ctx, *g, n);
    const int64_t paddedCount = n * plan.hp * plan.wp * g->c;
    const int64_t biasFloats = db ? kernels::biasGradientWorkspace(rows, F) : 0;
    Carve carve;
    const size_t kernelGradAt = carve.add(floats(P * F));
    const size_t kernelAt = dx ? carve.add(floats(P * F)) : 0;
    const size_t inputAt = plan.padded ? carve.add(floats(paddedCount)) : 0;
    const size_t inputGradAt = plan.padded && dx ? carve.add(floats(paddedCount)) : 0;
    const size_t biasAt = biasFloats > 0 ? carve.add(floats(biasFloats)) : 0;
    void* base = scratch(ctx, carve.total);
    const float* input = x;
    if (plan.padded) {
      float* padded = at(base, inputAt);
      kernels::padImages(ctx->compute, x, padded, n, g->h, g->w, g->c, g->pad_top, g->pad_left, plan.hp, plan.wp);
      ML_LAUNCHED(ctx->label, "padImages");
      input = padded;
    }
    const CudnnApi& api = cudnn();
    cudnnHandle_t handle = cudnnState(ctx).handle;
    const float one = 1.0f, zero = 0.0f;
    void* workspace = nullptr;
    {
      const ConvAlgo& a = preparePass(ctx, plan, ConvPass::BackwardFilter, &workspace);
      float* kernelGrad = at(base, kernelGradAt);
      ML_CUDNN(ctx->label, api.convolutionBackwardFilter(handle, &one, plan.x, input, plan.y, dz, plan.conv,
                                                         static_cast<cudnnConvolutionBwdFilterAlgo_t>(a.algo), workspace,
                                                         a.workspaceBytes, &zero, plan.w, kernelGrad));
      kernels::addTransposed(ctx->compute, kernelGrad, dw, F, P);
      ML_LAUNCHED(ctx->label, "addTransposed");
    }
    if (db) {
      kernels::biasGradient(ctx->compute, dz, db, rows, F, biasFloats > 0 ? at(base, biasAt) : nullptr);
      ML_LAUNCHED(ctx->label, "biasGradient");
    }
    if (!dx) return;
    float* kernel = at(base, kernelAt);
    kernels::transpose(ctx->compute, w, kernel, P, F);
    ML_LAUNCHED(ctx->label, "transpose");
    const ConvAlgo& a = preparePass(ctx, plan, ConvPass::BackwardData, &workspace);
    float* inputGrad = plan.padded ? at(base, inputGradAt) : dx;
    ML_CUDNN(ctx->label, api.convolutionBackwardData(handle, &one, plan.w, kernel, plan.y, dz, plan.conv,
                                                     static_cast<cudnnConvolutionBwdDataAlgo_t>(a.algo), workspace,
                                                     a.workspaceBytes, &zero, plan.x, inputGrad));
    if (plan.padded) {
      kernels::cropImages(ctx->compute, inputGrad, dx, n, g->h, g->w, g->c, g->pad_top, g->pad_left, plan.hp, plan.wp);
      ML_LAUNCHED(ctx->label, "cropImages");
    }
  });
}

}  // extern "C"
