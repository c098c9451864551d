// The folders the plugin searches for the libraries it dlopens (LibrarySearch.h).
#include "backend/cuda/LibrarySearch.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <glob.h>

#include <cstdlib>

#include "backend/cuda/Check.h"

namespace mlcuda {

std::string envValue(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string folderOf(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

std::vector<std::string> globFiles(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  globfree(&g);
  return out;
}

std::string lastDlError() {
  const char* e = dlerror();
  return e ? std::string(e) : std::string("unknown dlopen error");
}

std::vector<std::string> fallbackLibraryPaths(const char* wheel, const char* file) {
  std::vector<std::string> paths;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cudaRuntimeGetVersion), &info) != 0 && info.dli_fname) {
    const std::string dir = folderOf(info.dli_fname);
    if (!dir.empty()) paths.push_back(dir + "/" + file);
  }
  for (const char* dir : {"/usr/local/cuda/lib64", "/usr/local/cuda/lib", "/usr/local/cuda/targets/x86_64-linux/lib"})
    paths.push_back(std::string(dir) + "/" + file);
  std::vector<std::string> prefixes;
  for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"})
    if (const std::string p = envValue(var); !p.empty()) prefixes.push_back(p);
  if (const std::string home = envValue("HOME"); !home.empty()) prefixes.push_back(home + "/.local");
  for (const char* p : {"/usr/local", "/usr", "/opt/conda"}) prefixes.emplace_back(p);
  const std::string tail = std::string("/nvidia/") + wheel + "/lib/" + file;
  for (const std::string& prefix : prefixes)
    for (const char* packages : {"site-packages", "dist-packages"})
      for (const std::string& f : globFiles(prefix + "/lib/python3*/" + packages + tail)) paths.push_back(f);
  paths.push_back("/usr/lib/python3/dist-packages" + tail);
  return paths;
}

void* openLibrary(const LibrarySpec& spec, std::string* path) {
  auto tryLoad = [](const std::string& file, std::string& error) -> void* {
    dlerror();
    void* h = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) error = lastDlError();
    return h;
  };
  std::string error, loadedPath;
  void* handle = nullptr;
  const std::string named = envValue(spec.env);
  if (!named.empty()) {
    handle = tryLoad(named, error);
    if (!handle) fail(spec.code, std::string(spec.env) + "=" + named + " cannot be loaded (" + error + "): " + spec.fix);
    loadedPath = named;
  } else {
    handle = tryLoad(spec.file, error);  // LD_LIBRARY_PATH, the plugin's RUNPATH, ldconfig's cache
    loadedPath = spec.file;
    const std::string first = error;
    if (!handle)
      for (const std::string& candidate : fallbackLibraryPaths(spec.wheel, spec.file)) {
        std::string ignored;
        if ((handle = tryLoad(candidate, ignored))) {
          loadedPath = candidate;
          break;
        }
      }
    if (!handle)
      fail(spec.code, std::string(spec.name) + " cannot be loaded: " + first +
                          " (also looked beside the CUDA runtime, in /usr/local/cuda and in Python's nvidia-" + spec.wheel +
                          " wheels; " + spec.env + " names the file to use): " + spec.fix);
  }
  // Where the loader found it, for messages and the build information.
  Dl_info info{};
  void* symbol = dlsym(handle, spec.symbol);
  if (symbol && dladdr(symbol, &info) != 0 && info.dli_fname) loadedPath = info.dli_fname;
  *path = loadedPath;
  return handle;
}

}  // namespace mlcuda
