// The CUDA plugin as the core sees it: the C entry points of libmirrorlab_cuda.so, found and loaded
// at run time (never linked), so that the program starts on machines without CUDA. No CUDA header.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/CudaPluginApi.h"

namespace ml {

struct CudaPlugin {
  std::string path;       // the file that was loaded
  std::string buildInfo;  // mlcuda_build_info()

  // One field per entry point of CudaPluginEntryPoints.def (denseForward for mlcuda_dense_forward...),
  // typed by decltype of its declaration: nothing here refers to the plugin's symbols at link time.
#define MLCUDA_ENTRY(ret, name, field, params) decltype(&mlcuda_##name) field = nullptr;
#include "backend/cuda/CudaPluginEntryPoints.def"
#undef MLCUDA_ENTRY
};

// Where the plugin is looked for, in order: $MIRRORLAB_CUDA_PLUGIN when set (then only there), the
// executable's folder (the build tree), its ../lib/mirrorlab (an installed prefix), ../lib, and last the plain file name
// (LD_LIBRARY_PATH, RUNPATH, ld.so.cache).
std::vector<std::string> cudaPluginCandidates();

// Loads the plugin from one file (or a plain name) and checks that it speaks this API version.
// Returns null and sets *why when it cannot. The library is never unloaded.
std::unique_ptr<CudaPlugin> loadCudaPlugin(const std::string& path, std::string* why);

// The process's plugin, looked for once along cudaPluginCandidates(); null with the reason (which
// locations were searched, or why the file found cannot be loaded) when there is none.
const CudaPlugin* cudaPlugin(std::string* why = nullptr);

// Throws ml::UserError with the status's message (which names the call, place and device) on failure.
void throwIfFailed(const mlcuda_status& status);

// 13000 -> "13.0"
std::string cudaVersionText(int version);

}  // namespace ml
