// The context's cuDNN handle, workspace and convolution plans, and the choice of algorithms
// (ConvPlans.h says how and why).
#include "backend/cuda/ConvPlans.h"

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

namespace mlcuda {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
// Plans kept per context: a model has a few geometries, each at a few batch sizes (the training
// batch, the last partial one, evaluation's). Past this, the cache starts again.
constexpr size_t kMaxPlans = 256;

const char* passName(ConvPass p) {
  switch (p) {
    case ConvPass::Forward: return "forward";
    case ConvPass::BackwardData: return "backward data";
    case ConvPass::BackwardFilter: return "backward filter";
  }
  return "?";
}

// A size cuDNN's legacy descriptors take as an int.
int dim(int64_t v, const char* what, const ConvPlan& plan) {
  if (v < 0 || v > INT_MAX)
    fail(MLCUDA_ERR_INVALID_ARGUMENT, std::string("mlcuda_conv2d: ") + what + " = " + std::to_string(v) +
                                          " is outside what cuDNN accepts (0.." + std::to_string(INT_MAX) + "; " + plan.what +
                                          "): use a smaller batch per replica");
  return static_cast<int>(v);
}

std::string geometryText(const mlcuda_conv_geometry& g, int64_t n) {
  auto x = [](int64_t a, int64_t b) { return std::to_string(a) + "x" + std::to_string(b); };
  return "batch " + std::to_string(n) + ", input " + x(g.h, g.w) + "x" + std::to_string(g.c) + ", " + x(g.kh, g.kw) +
         " kernel, " + std::to_string(g.filters) + " filters, strides " + x(g.sh, g.sw) + ", padding top " +
         std::to_string(g.pad_top) + " left " + std::to_string(g.pad_left) + " bottom " + std::to_string(g.pad_bottom) +
         " right " + std::to_string(g.pad_right) + ", output " + x(g.oh, g.ow);
}

// TF32: anything but a down-conversion below it. FP32: the FMA results the FMA descriptor asked for
// (and a default-math one, which then runs under CUDNN_FMA_MATH: never on tensor cores).
bool mathAllowed(cudnnMathType_t m, bool tf32) {
  if (tf32) return m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
  return m == CUDNN_FMA_MATH || m == CUDNN_DEFAULT_MATH;
}

// The index of the result to use (ConvPlans.h), or -1 when none is allowed.
template <class Perf>
int pick(const std::vector<Perf>& perfs, int count, bool deterministic, bool tf32, size_t cap) {
  int smallest = -1;
  for (int i = 0; i < count; ++i) {
    const Perf& p = perfs[static_cast<size_t>(i)];
    if (p.status != CUDNN_STATUS_SUCCESS || !mathAllowed(p.mathType, tf32)) continue;
    if (deterministic && p.determinism != CUDNN_DETERMINISTIC) continue;
    if (p.memory <= cap) return i;
    if (smallest < 0 || p.memory < perfs[static_cast<size_t>(smallest)].memory) smallest = i;
  }
  return smallest;
}

// What cuDNN offered, for the message when nothing fits.
template <class Perf>
std::string offered(const std::vector<Perf>& perfs, int count) {
  std::string s;
  for (int i = 0; i < count; ++i) {
    const Perf& p = perfs[static_cast<size_t>(i)];
    s += (i ? "; " : "") + std::string("algorithm ") + std::to_string(static_cast<int>(p.algo)) + " status " +
         std::to_string(static_cast<int>(p.status)) + ", " + formatBytes(static_cast<double>(p.memory)) + ", " +
         (p.determinism == CUDNN_DETERMINISTIC ? "deterministic" : "non-deterministic") + ", math type " +
         std::to_string(static_cast<int>(p.mathType));
  }
  return s.empty() ? "nothing" : s;
}

// Asks cuDNN's heuristics for the pass's algorithms and keeps the one to use: `query(max, &count,
// perfs)` fills the results, `size(algo, &bytes)` gives an algorithm's workspace with the
// descriptor's math type set to the algorithm's; queryName and sizeName name the cuDNN functions they
// call, for messages.
template <class Perf, class Query, class Size>
ConvAlgo choose(mlcuda_context* ctx, const CudnnState& st, ConvPlan& plan, ConvPass pass, int maxCount, Query query, Size size,
                const char* queryName, const char* sizeName) {
  const CudnnApi& api = cudnn();
  const bool tf32 = ctx->allowTf32;
  ML_CUDNN(ctx->label, api.setConvolutionMathType(plan.conv, tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
  std::vector<Perf> perfs(static_cast<size_t>(std::max(maxCount, 1)));
  int count = 0;
  checkCudnn(query(std::max(maxCount, 1), &count, perfs.data()), queryName, __FILE__, __LINE__, ctx->label);
  count = std::clamp(count, 0, static_cast<int>(perfs.size()));
  const bool deterministic = pass != ConvPass::Forward;
  const int i = pick(perfs, count, deterministic, tf32, st.workspaceCap);
  if (i < 0)
    fail(MLCUDA_ERR_CUDNN, std::string("cuDNN ") + cudnnVersionText(api.version) + " offers no " +
                               (deterministic ? "deterministic " : "") + (tf32 ? "FP32/TF32" : "FP32 (FMA)") + " " +
                               passName(pass) + " convolution algorithm for " + plan.what + " on " + ctx->label + " (" +
                               ctx->deviceName + "); it offered: " + offered(perfs, count) +
                               ". Try another kernel size or stride, or train this model on the CPU");
  const Perf& p = perfs[static_cast<size_t>(i)];
  ConvAlgo a;
  a.chosen = true;
  a.algo = static_cast<int>(p.algo);
  a.math = tf32 ? p.mathType : CUDNN_FMA_MATH;
  ML_CUDNN(ctx->label, api.setConvolutionMathType(plan.conv, a.math));
  size_t bytes = 0;
  checkCudnn(size(p.algo, &bytes), sizeName, __FILE__, __LINE__, ctx->label);
  a.workspaceBytes = std::max(bytes, p.memory);
  return a;
}

ConvAlgo chooseFor(mlcuda_context* ctx, const CudnnState& st, ConvPlan& plan, ConvPass pass) {
  const CudnnApi& api = cudnn();
  cudnnHandle_t h = st.handle;
  int max = 0;
  switch (pass) {
    case ConvPass::Forward:
      ML_CUDNN(ctx->label, api.getForwardAlgorithmMaxCount(h, &max));
      return choose<cudnnConvolutionFwdAlgoPerf_t>(
          ctx, st, plan, pass, max,
          [&](int m, int* count, cudnnConvolutionFwdAlgoPerf_t* perfs) {
            return api.getForwardAlgorithm(h, plan.x, plan.w, plan.conv, plan.y, m, count, perfs);
          },
          [&](cudnnConvolutionFwdAlgo_t algo, size_t* bytes) {
            return api.getForwardWorkspaceSize(h, plan.x, plan.w, plan.conv, plan.y, algo, bytes);
          },
          "cudnnGetConvolutionForwardAlgorithm_v7", "cudnnGetConvolutionForwardWorkspaceSize");
    case ConvPass::BackwardData:
      ML_CUDNN(ctx->label, api.getBackwardDataAlgorithmMaxCount(h, &max));
      return choose<cudnnConvolutionBwdDataAlgoPerf_t>(
          ctx, st, plan, pass, max,
          [&](int m, int* count, cudnnConvolutionBwdDataAlgoPerf_t* perfs) {
            return api.getBackwardDataAlgorithm(h, plan.w, plan.y, plan.conv, plan.x, m, count, perfs);
          },
          [&](cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes) {
            return api.getBackwardDataWorkspaceSize(h, plan.w, plan.y, plan.conv, plan.x, algo, bytes);
          },
          "cudnnGetConvolutionBackwardDataAlgorithm_v7", "cudnnGetConvolutionBackwardDataWorkspaceSize");
    case ConvPass::BackwardFilter:
      ML_CUDNN(ctx->label, api.getBackwardFilterAlgorithmMaxCount(h, &max));
      return choose<cudnnConvolutionBwdFilterAlgoPerf_t>(
          ctx, st, plan, pass, max,
          [&](int m, int* count, cudnnConvolutionBwdFilterAlgoPerf_t* perfs) {
            return api.getBackwardFilterAlgorithm(h, plan.x, plan.y, plan.conv, plan.w, m, count, perfs);
          },
          [&](cudnnConvolutionBwdFilterAlgo_t algo, size_t* bytes) {
            return api.getBackwardFilterWorkspaceSize(h, plan.x, plan.y, plan.conv, plan.w, algo, bytes);
          },
          "cudnnGetConvolutionBackwardFilterAlgorithm_v7", "cudnnGetConvolutionBackwardFilterWorkspaceSize");
  }
  fail(MLCUDA_ERR_INTERNAL, "CUDA plugin: unknown convolution pass");
}

// The workspace, at least `bytes` long (ConvPlans.h: growing waits for the compute stream).
void* growWorkspace(mlcuda_context* ctx, CudnnState& st, size_t bytes) {
  if (bytes <= st.workspaceBytes) return st.workspace;
  ML_WAIT_STREAM(ctx, ctx->compute);
  if (st.workspace) ML_CUDA(ctx->label, cudaFree(st.workspace));
  st.workspace = nullptr;
  st.workspaceBytes = 0;
  // Whole MiB, at least 4: a few similar geometries then share one allocation.
  const size_t want = std::max((bytes + kMiB - 1) / kMiB * kMiB, 4 * kMiB);
  st.workspace = deviceAlloc(ctx->device, ctx->label, ctx->deviceName, want, __FILE__, __LINE__);
  st.workspaceBytes = want;
  return st.workspace;
}

}  // namespace

ConvPlan::~ConvPlan() {
  const CudnnApi* api = cudnnIfLoaded();
  if (!api) return;
  if (x) api->destroyTensorDescriptor(x);
  if (y) api->destroyTensorDescriptor(y);
  if (w) api->destroyFilterDescriptor(w);
  if (conv) api->destroyConvolutionDescriptor(conv);
}

CudnnState::~CudnnState() {
  plans.clear();
  if (const CudnnApi* api = cudnnIfLoaded(); api && handle) api->destroy(handle);
  if (workspace) cudaFree(workspace);
}

void destroyCudnnState(mlcuda_context* ctx) {
  delete ctx->cudnn;
  ctx->cudnn = nullptr;
}

CudnnState& cudnnState(mlcuda_context* ctx) {
  if (ctx->cudnn) return *ctx->cudnn;
  const CudnnApi& api = cudnn();
  auto st = std::make_unique<CudnnState>();
  ML_CUDNN(ctx->label, api.create(&st->handle));
  ML_CUDNN(ctx->label, api.setStream(st->handle, ctx->compute));
  size_t freeBytes = 0, totalBytes = 0;
  ML_CUDA(ctx->label, cudaMemGetInfo(&freeBytes, &totalBytes));
  st->workspaceCap = std::clamp(totalBytes / 64, 64 * kMiB, 1024 * kMiB);
  ctx->cudnn = st.release();
  return *ctx->cudnn;
}

ConvPlan& convPlan(mlcuda_context* ctx, const mlcuda_conv_geometry& g, int64_t n) {
  CudnnState& st = cudnnState(ctx);
  const std::array<int64_t, 15> key{g.h,  g.w,  g.c,       g.oh,       g.ow,         g.filters,   g.kh, g.kw,
                                    g.sh, g.sw, g.pad_top, g.pad_left, g.pad_bottom, g.pad_right, n};
  if (auto it = st.plans.find(key); it != st.plans.end()) return *it->second;
  // Descriptors are read when a call is made, not when its kernels run: dropping plans is safe.
  if (st.plans.size() >= kMaxPlans) st.plans.clear();
  const CudnnApi& api = cudnn();
  auto plan = std::make_unique<ConvPlan>();
  ConvPlan& p = *plan;
  p.what = geometryText(g, n);
  p.padded = g.pad_top != g.pad_bottom || g.pad_left != g.pad_right;
  p.hp = p.padded ? g.h + g.pad_top + g.pad_bottom : g.h;
  p.wp = p.padded ? g.w + g.pad_left + g.pad_right : g.w;
  const int N = dim(n, "batch", p), C = dim(g.c, "channels", p), H = dim(p.hp, "height", p), W = dim(p.wp, "width", p);
  const int F = dim(g.filters, "filters", p), OH = dim(g.oh, "output height", p), OW = dim(g.ow, "output width", p);
  const std::string& d = ctx->label;
  ML_CUDNN(d, api.createTensorDescriptor(&p.x));
  ML_CUDNN(d, api.setTensor4dDescriptor(p.x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, N, C, H, W));
  ML_CUDNN(d, api.createTensorDescriptor(&p.y));
  ML_CUDNN(d, api.setTensor4dDescriptor(p.y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, N, F, OH, OW));
  ML_CUDNN(d, api.createFilterDescriptor(&p.w));
  ML_CUDNN(d, api.setFilter4dDescriptor(p.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, F, C, dim(g.kh, "kernel height", p),
                                        dim(g.kw, "kernel width", p)));
  ML_CUDNN(d, api.createConvolutionDescriptor(&p.conv));
  // Cross-correlation, as Keras (and ml::Conv2D) compute a "convolution"; float32 accumulation.
  ML_CUDNN(d, api.setConvolution2dDescriptor(p.conv, p.padded ? 0 : dim(g.pad_top, "padding", p),
                                             p.padded ? 0 : dim(g.pad_left, "padding", p), dim(g.sh, "stride", p),
                                             dim(g.sw, "stride", p), 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  ML_CUDNN(d, api.setConvolutionMathType(p.conv, ctx->allowTf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
  int on = 0, oc = 0, oh = 0, ow = 0;
  ML_CUDNN(d, api.getConvolution2dForwardOutputDim(p.conv, p.x, p.w, &on, &oc, &oh, &ow));
  if (on != N || oc != F || oh != OH || ow != OW)
    fail(MLCUDA_ERR_INTERNAL, "CUDA plugin: cuDNN's output for " + p.what + " would be " + std::to_string(oh) + "x" +
                                  std::to_string(ow) + "x" + std::to_string(oc) + " (batch " + std::to_string(on) +
                                  "), not the layer's (" + where(__FILE__, __LINE__) + " on " + d + ")");
  return *st.plans.emplace(key, std::move(plan)).first->second;
}

const ConvAlgo& preparePass(mlcuda_context* ctx, ConvPlan& plan, ConvPass pass, void** workspace) {
  CudnnState& st = cudnnState(ctx);
  ConvAlgo& a = pass == ConvPass::Forward        ? plan.forward
                : pass == ConvPass::BackwardData ? plan.backwardData
                                                 : plan.backwardFilter;
  if (!a.chosen) a = chooseFor(ctx, st, plan, pass);
  ML_CUDNN(ctx->label, cudnn().setConvolutionMathType(plan.conv, a.math));
  *workspace = growWorkspace(ctx, st, a.workspaceBytes);
  return a;
}

}  // namespace mlcuda
