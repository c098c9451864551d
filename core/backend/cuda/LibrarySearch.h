// Where the plugin looks for the libraries it loads itself with dlopen (NCCL, cuDNN) after the
// loader's own search has failed: beside the CUDA runtime it was loaded with, in the CUDA toolkit's
// usual folders, and in the nvidia-* Python wheels that PyTorch installs.
#pragma once
#include <string>
#include <vector>

namespace mlcuda {

// The environment variable's value, or "" when it is not set.
std::string envValue(const char* name);
// "/a/b" from "/a/b/c.so"; "" when the path has no folder.
std::string folderOf(const std::string& path);
// Files matching a glob pattern, sorted (glob's order); none when nothing matches.
std::vector<std::string> globFiles(const std::string& pattern);
// dlerror()'s text, or a placeholder when it has none.
std::string lastDlError();
// The candidates for `file` (e.g. "libnccl.so.2") in order: beside the CUDA runtime the plugin
// loaded (NVIDIA's installers put the libraries there), /usr/local/cuda's library folders, then the
// wheel `wheel` (e.g. "nccl": .../site-packages/nvidia/nccl/lib/<file>) under a virtual environment,
// conda, the user's site-packages and the system's.
std::vector<std::string> fallbackLibraryPaths(const char* wheel, const char* file);

// A library the plugin loads itself, and how to say it cannot.
struct LibrarySpec {
  int code;            // MLCUDA_ERR_NCCL, MLCUDA_ERR_CUDNN
  const char* name;    // "NCCL", "cuDNN"
  const char* env;     // the variable that names the file to load alone
  const char* file;    // "libnccl.so.2"
  const char* wheel;   // "nccl": Python's nvidia-nccl wheel
  const char* symbol;  // one of its functions, to find the file the loader picked
  const char* fix;     // what to do, ending every message
};
// dlopen()s it: the file $env names alone when set, else `file` by the loader's search, then
// fallbackLibraryPaths. Throws a Failure (spec.code) saying what was tried and spec.fix. *path: the
// file loaded (where the loader found it).
void* openLibrary(const LibrarySpec& spec, std::string* path);

}  // namespace mlcuda
