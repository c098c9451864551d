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
#define MLCUDA_ENTRY(ret, name, field, params) resolve(p->field, "mlcuda_" #name);
#include "backend/cuda/CudaPluginEntryPoints.def"  // every entry point (mlcuda_api_version again among them)
#undef MLCUDA_ENTRY
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
