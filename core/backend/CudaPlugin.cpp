// Finds libmirrorlab_cuda.so and resolves its entry points with dlopen/dlsym.
#include "backend/CudaPlugin.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <type_traits>

#include "Error.h"
#include "ExecutableDir.h"

namespace ml {

std::vector<std::string> cudaPluginCandidates() {
  if (const char* env = std::getenv("MIRRORLAB_CUDA_PLUGIN"); env && *env) return {env};
  std::vector<std::string> c;
  const std::string dir = executableDir();
  if (!dir.empty()) {
    c.push_back(dir + "/" MLCUDA_PLUGIN_FILE);
    c.push_back(dir + "/../lib/mirrorlab/" MLCUDA_PLUGIN_FILE);  // installed: bin/ and lib/mirrorlab/ of one prefix
    c.push_back(dir + "/../lib/" MLCUDA_PLUGIN_FILE);
  }
  c.push_back(MLCUDA_PLUGIN_FILE);
  return c;
}

std::unique_ptr<CudaPlugin> loadCudaPlugin(const std::string& path, std::string* why) {
  auto failWith = [&](std::string text) -> std::unique_ptr<CudaPlugin> {
    if (why) *why = std::move(text);
    return nullptr;
  };
  dlerror();
  // RTLD_NOW: a missing cuBLAS shows here, with its name, not at the first call (NCCL is loaded by
  // the plugin itself, when a run over several GPUs needs it).
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = dlerror();
    return failWith("the CUDA plugin " + path + " cannot be loaded: " + (e ? e : "unknown dlopen error"));
  }
  auto p = std::make_unique<CudaPlugin>();
  p->path = path;
  std::string missing;
  auto resolve = [&](auto& field, const char* symbol) {
    field = reinterpret_cast<std::remove_reference_t<decltype(field)>>(dlsym(handle, symbol));
    if (!field) missing += std::string(missing.empty() ? "" : ", ") + symbol;
  };
  resolve(p->apiVersion, "mlcuda_api_version");
  if (!p->apiVersion) return failWith("the CUDA plugin " + path + " is not a Mirrorlab CUDA plugin (no mlcuda_api_version)");
  const int version = p->apiVersion();
  if (version != MLCUDA_API_VERSION)
    return failWith("the CUDA plugin " + path + " speaks API version " + std::to_string(version) +
                    " but this program speaks version " + std::to_string(MLCUDA_API_VERSION) +
                    ": build the program and the plugin together");
  resolve(p->buildInfoText, "mlcuda_build_info");
  resolve(p->probe, "mlcuda_probe");
  resolve(p->nvmlSample, "mlcuda_nvml_sample");
  resolve(p->contextCreate, "mlcuda_context_create");
  resolve(p->contextDestroy, "mlcuda_context_destroy");
  resolve(p->synchronize, "mlcuda_synchronize");
  resolve(p->memoryInfo, "mlcuda_memory_info");
  resolve(p->allocate, "mlcuda_alloc");
  resolve(p->release, "mlcuda_free");
  resolve(p->copyToDevice, "mlcuda_copy_to_device");
  resolve(p->copyToHost, "mlcuda_copy_to_host");
  resolve(p->copyOnDevice, "mlcuda_copy_on_device");
  resolve(p->fillZero, "mlcuda_fill_zero");
  resolve(p->eventCreate, "mlcuda_event_create");
  resolve(p->eventDestroy, "mlcuda_event_destroy");
  resolve(p->eventRecord, "mlcuda_event_record");
  resolve(p->streamWaitEvent, "mlcuda_stream_wait_event");
  resolve(p->eventElapsedMs, "mlcuda_event_elapsed_ms");
  resolve(p->eventSynchronize, "mlcuda_event_synchronize");
  resolve(p->hostAlloc, "mlcuda_host_alloc");
  resolve(p->hostFree, "mlcuda_host_free");
  resolve(p->copyToDeviceAsync, "mlcuda_copy_to_device_async");
  resolve(p->gatherRows, "mlcuda_gather_rows");
  resolve(p->denseForward, "mlcuda_dense_forward");
  resolve(p->denseBackward, "mlcuda_dense_backward");
  resolve(p->activationForward, "mlcuda_activation_forward");
  resolve(p->activationBackward, "mlcuda_activation_backward");
  resolve(p->loss, "mlcuda_loss");
  resolve(p->metricSum, "mlcuda_metric_sum");
  resolve(p->dropoutForward, "mlcuda_dropout_forward");
  resolve(p->dropoutBackward, "mlcuda_dropout_backward");
  resolve(p->sgdStep, "mlcuda_sgd_step");
  resolve(p->adamStep, "mlcuda_adam_step");
  resolve(p->rmspropStep, "mlcuda_rmsprop_step");
  resolve(p->conv2dForward, "mlcuda_conv2d_forward");
  resolve(p->conv2dBackward, "mlcuda_conv2d_backward");
  resolve(p->pool2dForward, "mlcuda_pool2d_forward");
  resolve(p->pool2dBackward, "mlcuda_pool2d_backward");
  resolve(p->globalAvgPoolForward, "mlcuda_global_avg_pool_forward");
  resolve(p->globalAvgPoolBackward, "mlcuda_global_avg_pool_backward");
  resolve(p->batchnormMoments, "mlcuda_batchnorm_moments");
  resolve(p->batchnormForward, "mlcuda_batchnorm_forward");
  resolve(p->batchnormEvalStats, "mlcuda_batchnorm_eval_stats");
  resolve(p->batchnormUpdateMoving, "mlcuda_batchnorm_update_moving");
  resolve(p->batchnormBackwardSums, "mlcuda_batchnorm_backward_sums");
  resolve(p->batchnormBackwardData, "mlcuda_batchnorm_backward_data");
  resolve(p->denseForwardLow, "mlcuda_dense_forward_low");
  resolve(p->denseBackwardLow, "mlcuda_dense_backward_low");
  resolve(p->conv2dForwardLow, "mlcuda_conv2d_forward_low");
  resolve(p->conv2dBackwardLow, "mlcuda_conv2d_backward_low");
  resolve(p->scale, "mlcuda_scale");
  resolve(p->countNonfinite, "mlcuda_count_nonfinite");
  resolve(p->localAllReduce, "mlcuda_local_allreduce");
  resolve(p->ncclCreate, "mlcuda_nccl_create");
  resolve(p->ncclDestroy, "mlcuda_nccl_destroy");
  resolve(p->ncclAllReduce, "mlcuda_nccl_allreduce");
  resolve(p->localAllReduceBf16, "mlcuda_local_allreduce_bf16");
  resolve(p->ncclAllReduceBf16, "mlcuda_nccl_allreduce_bf16");
  resolve(p->ncclUniqueId, "mlcuda_nccl_unique_id");
  resolve(p->ncclCreateRanks, "mlcuda_nccl_create_ranks");
  if (!missing.empty())
    return failWith("the CUDA plugin " + path + " lacks " + missing + ": build the program and the plugin together");
  p->buildInfo = p->buildInfoText();
  return p;
}

namespace {
struct Loaded {
  std::unique_ptr<CudaPlugin> plugin;
  std::string why;
};

Loaded findPlugin() {
  Loaded l;
  const auto candidates = cudaPluginCandidates();
  const bool fromEnv = std::getenv("MIRRORLAB_CUDA_PLUGIN") && *std::getenv("MIRRORLAB_CUDA_PLUGIN");
  std::string searched;
  for (const auto& c : candidates) {
    const bool plainName = c.find('/') == std::string::npos;
    // A file that exists but does not load is the answer (its missing library, its version),
    // not a reason to fall back to another copy.
    if (!plainName && access(c.c_str(), F_OK) != 0) {
      searched += (searched.empty() ? "" : ", ") + c;
      continue;
    }
    std::string why;
    l.plugin = loadCudaPlugin(c, &why);
    if (l.plugin) return l;
    if (plainName && why.find("cannot open shared object file") != std::string::npos) {
      searched += (searched.empty() ? "" : ", ") + std::string("the library path");
      continue;
    }
    l.why = why;
    return l;
  }
  l.why = fromEnv ? "MIRRORLAB_CUDA_PLUGIN names " + candidates.front() + ", which does not exist"
                  : "this build has no CUDA plugin (" MLCUDA_PLUGIN_FILE " is not in " + searched +
                        "): rebuild where the CUDA toolkit and NCCL's header are installed";
  return l;
}
}  // namespace

const CudaPlugin* cudaPlugin(std::string* why) {
  static const Loaded loaded = findPlugin();  // once per process, thread-safe
  if (!loaded.plugin && why) *why = loaded.why;
  return loaded.plugin.get();
}

void throwIfFailed(const mlcuda_status& status) {
  if (status.code != MLCUDA_OK) throw UserError(status.message);
}

std::string cudaVersionText(int version) { return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10); }

}  // namespace ml
