// Finds and loads libnccl.so.2 when a run first needs it, and resolves the functions the plugin uses.
#include "backend/cuda/NcclLoader.h"

#include <dlfcn.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

#include "backend/cuda/Check.h"
#include "backend/cuda/LibrarySearch.h"

namespace mlcuda {
namespace {

constexpr const char* kNcclFile = "libnccl.so.2";

std::atomic<const NcclApi*> gLoaded{nullptr};

const char* fixText() {
  return "runs over several physical GPUs (--devices gpu:0,1) need NCCL 2.14 or newer: install it (apt install libnccl2, "
         "or pip install nvidia-nccl-cu13 and set MIRRORLAB_NCCL_LIBRARY to its nvidia/nccl/lib/libnccl.so.2), or train "
         "on one GPU (--devices gpu:0) or on logical GPUs of one card (--devices gpu:0x2), which need no NCCL";
}

// Resolves every function into a table; on a missing one, says which (an NCCL older than 2.14).
std::unique_ptr<NcclApi> resolve(void* handle, const std::string& path) {
  auto api = std::make_unique<NcclApi>();
  api->path = path;
  std::string missing;
  auto get = [&](auto& field, const char* symbol) {
    field = reinterpret_cast<std::remove_reference_t<decltype(field)>>(dlsym(handle, symbol));
    if (!field) missing += (missing.empty() ? "" : ", ") + std::string(symbol);
  };
  get(api->getVersion, "ncclGetVersion");
  get(api->getErrorString, "ncclGetErrorString");
  get(api->getLastError, "ncclGetLastError");
  get(api->commInitAll, "ncclCommInitAll");
  get(api->getUniqueId, "ncclGetUniqueId");
  get(api->commInitRank, "ncclCommInitRank");
  get(api->commFinalize, "ncclCommFinalize");
  get(api->commDestroy, "ncclCommDestroy");
  get(api->commAbort, "ncclCommAbort");
  get(api->commGetAsyncError, "ncclCommGetAsyncError");
  get(api->groupStart, "ncclGroupStart");
  get(api->groupEnd, "ncclGroupEnd");
  get(api->allReduce, "ncclAllReduce");
  if (api->getVersion && api->getVersion(&api->version) != ncclSuccess) api->version = 0;
  if (!missing.empty())
    fail(MLCUDA_ERR_NCCL, "NCCL " + (api->version ? ncclVersionText(api->version) + " " : std::string()) + "(" + path +
                              ") lacks " + missing + ": " + fixText());
  return api;
}

}  // namespace

std::string ncclVersionText(int v) {
  // NCCL_VERSION(X, Y, Z) is X*10000 + Y*100 + Z since 2.9, X*1000 + Y*100 + Z before.
  const int major = v >= 20900 ? v / 10000 : v / 1000;
  const int rest = v >= 20900 ? v % 10000 : v % 1000;
  return std::to_string(major) + "." + std::to_string(rest / 100) + "." + std::to_string(rest % 100);
}

const NcclApi* ncclIfLoaded() { return gLoaded.load(std::memory_order_acquire); }

const NcclApi& nccl() {
  if (const NcclApi* a = ncclIfLoaded()) return *a;
  static std::mutex mutex;
  const std::lock_guard<std::mutex> lock(mutex);
  if (const NcclApi* a = ncclIfLoaded()) return *a;

  std::string loadedPath;
  void* handle =
      openLibrary({MLCUDA_ERR_NCCL, "NCCL", kNcclLibraryEnv, kNcclFile, "nccl", "ncclGetVersion", fixText()}, &loadedPath);
  std::unique_ptr<NcclApi> api;
  try {
    api = resolve(handle, loadedPath);
  } catch (...) {
    dlclose(handle);
    throw;
  }
  // Never unloaded: communicators (and NCCL's own threads) may live to the process's end.
  const NcclApi* a = api.release();
  gLoaded.store(a, std::memory_order_release);
  return *a;
}

}  // namespace mlcuda
