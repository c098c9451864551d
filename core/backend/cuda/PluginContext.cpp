// The plugin's version, per-replica contexts, device memory and events (the C entry points).
#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <memory>

#include "backend/cuda/Context.h"
#include "backend/cuda/CudnnLoader.h"
#include "backend/cuda/NcclLoader.h"

#ifndef MLCUDA_ARCHITECTURES
#define MLCUDA_ARCHITECTURES "?"
#endif

namespace mlcuda {

void use(mlcuda_context* ctx) {
  if (!ctx) fail(MLCUDA_ERR_INVALID_ARGUMENT, "CUDA plugin: called with a null context");
  ML_CUDA(ctx->label, cudaSetDevice(ctx->device));
}

cudaStream_t streamOf(mlcuda_context* ctx, int which) {
  if (which == MLCUDA_STREAM_COMPUTE) return ctx->compute;
  if (which == MLCUDA_STREAM_COMM) return ctx->comm;
  fail(MLCUDA_ERR_INVALID_ARGUMENT,
       "CUDA plugin: unknown stream " + std::to_string(which) + " on " + ctx->label + " (0 = compute, 1 = comm)");
}

void* deviceAlloc(int device, const std::string& label, const std::string& deviceName, size_t bytes, const char* file, int line) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaSuccess) return p;
  (void)cudaGetLastError();  // a failed allocation is not sticky: do not let it surface at the next launch
  if (e != cudaErrorMemoryAllocation) checkCuda(e, "cudaMalloc", file, line, label);
  size_t freeBytes = 0, totalBytes = 0;
  std::string freeText;
  if (cudaMemGetInfo(&freeBytes, &totalBytes) == cudaSuccess)
    freeText =
        ", " + formatBytes(static_cast<double>(freeBytes)) + " of " + formatBytes(static_cast<double>(totalBytes)) + " free";
  else
    (void)cudaGetLastError();
  fail(MLCUDA_ERR_OUT_OF_MEMORY, "out of GPU memory on " + label + (deviceName.empty() ? "" : " (" + deviceName + ")") +
                                     " (device " + std::to_string(device) + "): cudaMalloc of " +
                                     formatBytes(static_cast<double>(bytes)) + " (" + std::to_string(bytes) + " bytes) failed" +
                                     freeText + " at " + where(file, line) +
                                     ": use a smaller batch per replica (or fewer logical replicas on this GPU)");
}

static void* grow(mlcuda_context* ctx, void*& buffer, size_t& have, size_t bytes, cudaStream_t stream) {
  if (bytes <= have) return buffer;
  ML_WAIT_STREAM(ctx, stream);
  if (buffer) ML_CUDA(ctx->label, cudaFree(buffer));
  buffer = nullptr;
  have = 0;
  // Round up so that a slowly growing batch does not reallocate every step.
  const size_t want = std::max(bytes, static_cast<size_t>(1) << 20);
  buffer = deviceAlloc(ctx->device, ctx->label, ctx->deviceName, want, __FILE__, __LINE__);
  have = want;
  return buffer;
}

void* scratch(mlcuda_context* ctx, size_t bytes) { return grow(ctx, ctx->scratch, ctx->scratchBytes, bytes, ctx->compute); }
void* lowScratch(mlcuda_context* ctx, size_t bytes) {
  return grow(ctx, ctx->lowScratch, ctx->lowScratchBytes, bytes, ctx->compute);
}
void* commScratch(mlcuda_context* ctx, size_t bytes) {
  return grow(ctx, ctx->commScratch, ctx->commScratchBytes, bytes, ctx->comm);
}

int toInt(int64_t v, const char* what) {
  if (v < 0 || v > INT_MAX)
    fail(MLCUDA_ERR_INVALID_ARGUMENT, std::string("CUDA plugin: ") + what + " = " + std::to_string(v) +
                                          " is outside what cuBLAS accepts (0.." + std::to_string(INT_MAX) + ")");
  return static_cast<int>(v);
}

static void destroyContext(mlcuda_context* ctx) {
  if (!ctx) return;
  // Teardown reports nothing: it runs on error paths too, and a failed destroy changes nothing.
  if (cudaSetDevice(ctx->device) == cudaSuccess) {
    // Where NCCL work ran, a bounded wait first: a stuck collective is aborted instead of hanging
    // here (after which the blocking waits below return).
    try {
      if (ctx->compute) ML_WAIT_STREAM(ctx, ctx->compute);
      if (ctx->comm) ML_WAIT_STREAM(ctx, ctx->comm);
    } catch (const std::exception&) {
    }
    if (ctx->compute) cudaStreamSynchronize(ctx->compute);
    if (ctx->comm) cudaStreamSynchronize(ctx->comm);
    destroyCudnnState(ctx);
    if (ctx->cublas) cublasDestroy(ctx->cublas);
    if (ctx->scratch) cudaFree(ctx->scratch);
    if (ctx->lowScratch) cudaFree(ctx->lowScratch);
    if (ctx->commScratch) cudaFree(ctx->commScratch);
    if (ctx->compute) cudaStreamDestroy(ctx->compute);
    if (ctx->comm) cudaStreamDestroy(ctx->comm);
  }
  (void)cudaGetLastError();
  delete ctx;
}

static std::string versionText(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

// NCCL is loaded by the first communicator (NcclLoader.h), not here: the build information is asked
// for when the plugin is loaded, and loading NCCL would cost every run time. Its version when this
// process already holds it (RTLD_NOLOAD loads nothing).
static std::string ncclText() {
  if (const NcclApi* api = ncclIfLoaded()) return "NCCL " + ncclVersionText(api->version);
  if (void* h = dlopen("libnccl.so.2", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD)) {
    int v = 0;
    auto getVersion = reinterpret_cast<decltype(&::ncclGetVersion)>(dlsym(h, "ncclGetVersion"));
    const bool known = getVersion && getVersion(&v) == ncclSuccess && v > 0;
    dlclose(h);
    if (known) return "NCCL " + ncclVersionText(v) + " (already loaded)";
  }
  return "NCCL: loaded on first use (runs over several GPUs)";
}

// cuDNN likewise (CudnnLoader.h): loaded by the first convolution.
static std::string cudnnText() {
  if (const CudnnApi* api = cudnnIfLoaded()) return "cuDNN " + cudnnVersionText(api->version);
  if (void* h = dlopen("libcudnn.so.9", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD)) {
    auto getVersion = reinterpret_cast<decltype(&::cudnnGetVersion)>(dlsym(h, "cudnnGetVersion"));
    const size_t v = getVersion ? getVersion() : 0;
    dlclose(h);
    if (v > 0) return "cuDNN " + cudnnVersionText(v) + " (already loaded)";
  }
  return "cuDNN: loaded on first convolution";
}

}  // namespace mlcuda

using namespace mlcuda;

extern "C" {

MLCUDA_EXPORT int mlcuda_api_version(void) { return MLCUDA_API_VERSION; }

MLCUDA_EXPORT const char* mlcuda_build_info(void) {
  static const std::string info = [] {
    int rt = 0;
    if (cudaRuntimeGetVersion(&rt) != cudaSuccess) (void)cudaGetLastError();
    int cublasMajor = 0, cublasMinor = 0, cublasPatch = 0;
    cublasGetProperty(MAJOR_VERSION, &cublasMajor);
    cublasGetProperty(MINOR_VERSION, &cublasMinor);
    cublasGetProperty(PATCH_LEVEL, &cublasPatch);
    std::string archs = MLCUDA_ARCHITECTURES;
    for (auto& c : archs)
      if (c == ';') c = ' ';
    return "CUDA runtime " + versionText(rt) + " (built with " + versionText(CUDART_VERSION) + "), cuBLAS " +
           std::to_string(cublasMajor) + "." + std::to_string(cublasMinor) + "." + std::to_string(cublasPatch) + ", " +
           cudnnText() + " (built with " + std::to_string(CUDNN_MAJOR) + "." + std::to_string(CUDNN_MINOR) + "), " + ncclText() +
           ", code for sm " + archs;
  }();
  return info.c_str();
}

MLCUDA_EXPORT mlcuda_status mlcuda_context_create(int device, const char* label, int allow_tf32, mlcuda_context** out) {
  return guarded([&] {
    ML_REQUIRE(out, "mlcuda_context_create: out is NULL");
    *out = nullptr;
    const std::string name = label && *label ? label : "gpu:" + std::to_string(device);
    int count = 0;
    ML_CUDA(name, cudaGetDeviceCount(&count));
    if (device < 0 || device >= count)
      fail(MLCUDA_ERR_NO_DEVICE, name + ": there is no CUDA device " + std::to_string(device) + " (this machine has " +
                                     std::to_string(count) + " GPU(s)" +
                                     (count > 0 ? ", gpu:0..gpu:" + std::to_string(count - 1) : std::string()) + ")");
    std::unique_ptr<mlcuda_context, void (*)(mlcuda_context*)> ctx(new mlcuda_context, destroyContext);
    ctx->device = device;
    ctx->label = name;
    ML_CUDA(name, cudaSetDevice(device));
    cudaDeviceProp prop{};
    ML_CUDA(name, cudaGetDeviceProperties(&prop, device));
    ctx->deviceName = prop.name;
    // Non-blocking: neither stream waits for the legacy default stream (nothing here uses it).
    ML_CUDA(name, cudaStreamCreateWithFlags(&ctx->compute, cudaStreamNonBlocking));
    ML_CUDA(name, cudaStreamCreateWithFlags(&ctx->comm, cudaStreamNonBlocking));
    ML_CUBLAS(name, cublasCreate(&ctx->cublas));
    ML_CUBLAS(name, cublasSetStream(ctx->cublas, ctx->compute));
    // DEFAULT_MATH never lowers FP32 to TF32; TF32 only when asked for.
    ML_CUBLAS(name, cublasSetMathMode(ctx->cublas, allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    ctx->allowTf32 = allow_tf32 != 0;  // cuDNN's math type too (ConvPlans.h)
    *out = ctx.release();
  });
}

MLCUDA_EXPORT void mlcuda_context_destroy(mlcuda_context* ctx) { destroyContext(ctx); }

MLCUDA_EXPORT mlcuda_status mlcuda_synchronize(mlcuda_context* ctx) {
  return guarded([&] {
    use(ctx);
    ML_WAIT_STREAM(ctx, ctx->compute);
    ML_WAIT_STREAM(ctx, ctx->comm);
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_memory_info(mlcuda_context* ctx, size_t* free_bytes, size_t* total_bytes) {
  return guarded([&] {
    use(ctx);
    size_t f = 0, t = 0;
    ML_CUDA(ctx->label, cudaMemGetInfo(&f, &t));
    if (free_bytes) *free_bytes = f;
    if (total_bytes) *total_bytes = t;
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_alloc(mlcuda_context* ctx, size_t bytes, void** ptr) {
  return guarded([&] {
    use(ctx);
    ML_REQUIRE(ptr, "mlcuda_alloc: ptr is NULL");
    *ptr = nullptr;
    if (bytes == 0) return;
    *ptr = deviceAlloc(ctx->device, ctx->label, ctx->deviceName, bytes, __FILE__, __LINE__);
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_free(mlcuda_context* ctx, void* ptr) {
  return guarded([&] {
    use(ctx);
    if (!ptr) return;
    // cudaFree waits for the device; where NCCL work ran, the bounded wait comes first (which
    // aborts a stuck collective). Its failure is not the free's: the memory goes either way.
    if (ranNccl(ctx->nccl)) {
      try {
        ML_WAIT_STREAM(ctx, ctx->compute);
        ML_WAIT_STREAM(ctx, ctx->comm);
      } catch (const Failure&) {
      }
    }
    ML_CUDA(ctx->label, cudaFree(ptr));
  });
}

// A copy between the device and pageable host memory may itself wait for the stream's earlier work
// (the CUDA runtime's API synchronisation rules): where NCCL work ran, the bounded wait comes first,
// so that the copy has nothing left to wait for.
MLCUDA_EXPORT mlcuda_status mlcuda_copy_to_device(mlcuda_context* ctx, void* dst, const void* host_src, size_t bytes) {
  return guarded([&] {
    use(ctx);
    if (bytes == 0) return;
    if (ranNccl(ctx->nccl)) ML_WAIT_STREAM(ctx, ctx->compute);
    ML_CUDA(ctx->label, cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, ctx->compute));
    ML_WAIT_STREAM(ctx, ctx->compute);
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_copy_to_host(mlcuda_context* ctx, void* host_dst, const void* src, size_t bytes) {
  return guarded([&] {
    use(ctx);
    if (bytes == 0) return;
    if (ranNccl(ctx->nccl)) ML_WAIT_STREAM(ctx, ctx->compute);
    ML_CUDA(ctx->label, cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, ctx->compute));
    ML_WAIT_STREAM(ctx, ctx->compute);
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_copy_on_device(mlcuda_context* ctx, void* dst, const void* src, size_t bytes) {
  return guarded([&] {
    use(ctx);
    if (bytes == 0 || dst == src) return;
    ML_CUDA(ctx->label, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx->compute));
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_fill_zero(mlcuda_context* ctx, void* ptr, size_t bytes) {
  return guarded([&] {
    use(ctx);
    if (bytes == 0) return;
    ML_CUDA(ctx->label, cudaMemsetAsync(ptr, 0, bytes, ctx->compute));
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_event_create(mlcuda_context* ctx, mlcuda_event** out) {
  return guarded([&] {
    use(ctx);
    ML_REQUIRE(out, "mlcuda_event_create: out is NULL");
    *out = nullptr;
    auto ev = std::make_unique<mlcuda_event>();
    ev->device = ctx->device;
    ev->label = ctx->label;
    ev->nccl = ctx->nccl;
    ML_CUDA(ctx->label, cudaEventCreate(&ev->event));  // timing enabled: events time the phases
    *out = ev.release();
  });
}

MLCUDA_EXPORT void mlcuda_event_destroy(mlcuda_event* ev) {
  if (!ev) return;
  if (ev->event && cudaSetDevice(ev->device) == cudaSuccess) cudaEventDestroy(ev->event);
  (void)cudaGetLastError();
  delete ev;
}

MLCUDA_EXPORT mlcuda_status mlcuda_event_record(mlcuda_context* ctx, int stream, mlcuda_event* ev) {
  return guarded([&] {
    use(ctx);
    ML_REQUIRE(ev, "mlcuda_event_record: event is NULL");
    ML_CUDA(ctx->label, cudaEventRecord(ev->event, streamOf(ctx, stream)));
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_stream_wait_event(mlcuda_context* ctx, int stream, mlcuda_event* ev) {
  return guarded([&] {
    use(ctx);
    ML_REQUIRE(ev, "mlcuda_stream_wait_event: event is NULL");
    ML_CUDA(ctx->label, cudaStreamWaitEvent(streamOf(ctx, stream), ev->event, 0));
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_event_elapsed_ms(mlcuda_event* start, mlcuda_event* end, float* ms) {
  return guarded([&] {
    ML_REQUIRE(start && end && ms, "mlcuda_event_elapsed_ms: NULL argument");
    ML_CUDA(end->label, cudaSetDevice(end->device));
    waitEvent(end, "end->event", __FILE__, __LINE__);
    ML_CUDA(end->label, cudaEventElapsedTime(ms, start->event, end->event));
  });
}

}  // extern "C"
