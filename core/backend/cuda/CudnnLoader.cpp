// Finds and loads libcudnn.so.9 when the first convolution needs it, and resolves the functions the
// plugin uses.
#include "backend/cuda/CudnnLoader.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

#include "backend/cuda/Check.h"
#include "backend/cuda/LibrarySearch.h"

namespace mlcuda {
namespace {

constexpr const char* kCudnnFile = "libcudnn.so.9";

std::atomic<const CudnnApi*> gLoaded{nullptr};

const char* fixText() {
  return "Conv2D layers on a GPU need cuDNN 9: install it (apt install cudnn9-cuda-13, or pip install nvidia-cudnn-cu13 and "
         "set MIRRORLAB_CUDNN_LIBRARY to its nvidia/cudnn/lib/libcudnn.so.9), or train this model on CPU devices (--devices "
         "cpu:N)";
}

std::string cudaText(size_t v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

// cuDNN 9 is a dispatcher (libcudnn.so.9) that dlopens its sub-libraries (libcudnn_graph.so.9,
// libcudnn_cnn.so.9, libcudnn_engines_*.so.9, ...) by their plain names on first use. Where another
// cuDNN is on the loader's path, that could mix two versions (CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH
// on the first convolution). A library already loaded under a name is what a later dlopen of that
// name gets, so the sub-libraries beside the dispatcher are loaded first, each on its own (one that
// fails to load, such as the runtime-compiled engines without NVRTC, is left to cuDNN to report).
// graph and ops first: the others name them among their NEEDED entries, which LD_LIBRARY_PATH
// would otherwise resolve before the sub-library's own folder.
void preloadSublibraries(const std::string& folder) {
  if (folder.empty()) return;
  std::vector<std::string> files = globFiles(folder + "/libcudnn_*.so.9");
  auto rank = [](const std::string& f) {
    if (f.find("/libcudnn_graph.so") != std::string::npos) return 0;
    return f.find("/libcudnn_ops.so") != std::string::npos ? 1 : 2;
  };
  std::stable_sort(files.begin(), files.end(), [&](const std::string& a, const std::string& b) { return rank(a) < rank(b); });
  for (const std::string& f : files) {
    dlerror();
    if (!dlopen(f.c_str(), RTLD_LAZY | RTLD_LOCAL)) dlerror();  // kept loaded, as the dispatcher is
  }
}

// Resolves every function into a table; on a missing one, says which.
std::unique_ptr<CudnnApi> resolve(void* handle, const std::string& path) {
  auto api = std::make_unique<CudnnApi>();
  api->path = path;
  std::string missing;
  auto get = [&](auto& field, const char* symbol) {
    field = reinterpret_cast<std::remove_reference_t<decltype(field)>>(dlsym(handle, symbol));
    if (!field) missing += (missing.empty() ? "" : ", ") + std::string(symbol);
  };
  get(api->getVersion, "cudnnGetVersion");
  get(api->getCudartVersion, "cudnnGetCudartVersion");
  get(api->getErrorString, "cudnnGetErrorString");
  get(api->getLastErrorString, "cudnnGetLastErrorString");
  get(api->create, "cudnnCreate");
  get(api->destroy, "cudnnDestroy");
  get(api->setStream, "cudnnSetStream");
  get(api->createTensorDescriptor, "cudnnCreateTensorDescriptor");
  get(api->setTensor4dDescriptor, "cudnnSetTensor4dDescriptor");
  get(api->destroyTensorDescriptor, "cudnnDestroyTensorDescriptor");
  get(api->createFilterDescriptor, "cudnnCreateFilterDescriptor");
  get(api->setFilter4dDescriptor, "cudnnSetFilter4dDescriptor");
  get(api->destroyFilterDescriptor, "cudnnDestroyFilterDescriptor");
  get(api->createConvolutionDescriptor, "cudnnCreateConvolutionDescriptor");
  get(api->setConvolution2dDescriptor, "cudnnSetConvolution2dDescriptor");
  get(api->setConvolutionMathType, "cudnnSetConvolutionMathType");
  get(api->getConvolution2dForwardOutputDim, "cudnnGetConvolution2dForwardOutputDim");
  get(api->destroyConvolutionDescriptor, "cudnnDestroyConvolutionDescriptor");
  get(api->getForwardAlgorithmMaxCount, "cudnnGetConvolutionForwardAlgorithmMaxCount");
  get(api->getForwardAlgorithm, "cudnnGetConvolutionForwardAlgorithm_v7");
  get(api->getForwardWorkspaceSize, "cudnnGetConvolutionForwardWorkspaceSize");
  get(api->convolutionForward, "cudnnConvolutionForward");
  get(api->getBackwardDataAlgorithmMaxCount, "cudnnGetConvolutionBackwardDataAlgorithmMaxCount");
  get(api->getBackwardDataAlgorithm, "cudnnGetConvolutionBackwardDataAlgorithm_v7");
  get(api->getBackwardDataWorkspaceSize, "cudnnGetConvolutionBackwardDataWorkspaceSize");
  get(api->convolutionBackwardData, "cudnnConvolutionBackwardData");
  get(api->getBackwardFilterAlgorithmMaxCount, "cudnnGetConvolutionBackwardFilterAlgorithmMaxCount");
  get(api->getBackwardFilterAlgorithm, "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
  get(api->getBackwardFilterWorkspaceSize, "cudnnGetConvolutionBackwardFilterWorkspaceSize");
  get(api->convolutionBackwardFilter, "cudnnConvolutionBackwardFilter");
  if (api->getVersion) api->version = api->getVersion();
  if (api->getCudartVersion) api->cudartVersion = api->getCudartVersion();
  const std::string named = "cuDNN " + (api->version ? cudnnVersionText(api->version) + " " : std::string()) + "(" + path + ")";
  if (!missing.empty()) fail(MLCUDA_ERR_CUDNN, named + " lacks " + missing + ": " + fixText());
  // The legacy API's structs and enums are those of cuDNN 9's headers.
  if (api->version / 10000 != CUDNN_MAJOR)
    fail(MLCUDA_ERR_CUDNN,
         named + " is not cuDNN " + std::to_string(CUDNN_MAJOR) + ", which the plugin was built for: " + fixText());
  return api;
}

}  // namespace

std::string cudnnVersionText(size_t v) {
  // CUDNN_VERSION is MAJOR*10000 + MINOR*100 + PATCH since 9, MAJOR*1000 + MINOR*100 + PATCH before.
  const size_t major = v >= 90000 ? v / 10000 : v / 1000;
  const size_t rest = v >= 90000 ? v % 10000 : v % 1000;
  return std::to_string(major) + "." + std::to_string(rest / 100) + "." + std::to_string(rest % 100);
}

const CudnnApi* cudnnIfLoaded() { return gLoaded.load(std::memory_order_acquire); }

const CudnnApi& cudnn() {
  if (const CudnnApi* a = cudnnIfLoaded()) return *a;
  static std::mutex mutex;
  const std::lock_guard<std::mutex> lock(mutex);
  if (const CudnnApi* a = cudnnIfLoaded()) return *a;

  std::string loadedPath;
  void* handle =
      openLibrary({MLCUDA_ERR_CUDNN, "cuDNN", kCudnnLibraryEnv, kCudnnFile, "cudnn", "cudnnGetVersion", fixText()}, &loadedPath);
  std::unique_ptr<CudnnApi> api;
  try {
    api = resolve(handle, loadedPath);
  } catch (...) {
    dlclose(handle);
    throw;
  }
  preloadSublibraries(folderOf(loadedPath));
  // Never unloaded: handles and descriptors live in contexts that may outlive any one caller.
  const CudnnApi* a = api.release();
  gLoaded.store(a, std::memory_order_release);
  return *a;
}

void checkCudnn(cudnnStatus_t s, const char* call, const char* file, int line, const std::string& device) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  // A cuDNN status comes from a loaded cuDNN; the fallbacks are for safety only.
  const CudnnApi* api = cudnnIfLoaded();
  const char* text = api ? api->getErrorString(s) : nullptr;
  char last[512] = {0};
  if (api) api->getLastErrorString(last, sizeof last);
  std::string msg = std::string(call) + " failed: " + (text ? text : "cuDNN error") + " (" + std::to_string(static_cast<int>(s)) +
                    ")" + (last[0] ? std::string(": ") + last : std::string()) + " at " + where(file, line) +
                    (device.empty() ? std::string() : " on " + device);
  int code = MLCUDA_ERR_CUDNN;
  if (s == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED || s == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED) {
    code = MLCUDA_ERR_OUT_OF_MEMORY;
    msg += ": use a smaller batch per replica (or fewer logical replicas on this GPU)";
  } else if (api) {
    int runtime = 0;
    if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) (void)cudaGetLastError();
    msg += " (cuDNN " + cudnnVersionText(api->version) + " for CUDA " + cudaText(api->cudartVersion) + ", " + api->path +
           "; the plugin runs CUDA " + cudaText(static_cast<size_t>(runtime)) + ")";
    if (runtime > 0 && api->cudartVersion / 1000 != static_cast<size_t>(runtime) / 1000)
      msg += std::string(": a cuDNN built for another CUDA major version may not work with this runtime; ") + fixText();
  }
  fail(code, msg);
}

}  // namespace mlcuda
