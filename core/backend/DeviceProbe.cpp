#include "backend/DeviceProbe.h"

#include <dlfcn.h>

#include <fstream>
#include <thread>

namespace ml {

static std::string cpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto c = line.find(':');
      if (c != std::string::npos) return line.substr(c + 2);
    }
  }
  return "unknown CPU";
}

DeviceReport probeDevices() {
  DeviceReport r;
  r.cpuCores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  r.cpuModel = cpuModelName();
  // Never link the driver: probe it at run time, so the program starts on any machine.
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!driver) {
    r.noGpuReason = "no NVIDIA GPU driver found (libcuda.so.1 cannot be loaded): simulated CPU devices only";
    return r;
  }
  dlclose(driver);
  void* plugin = dlopen("libmirrorlab_cuda.so", RTLD_NOW | RTLD_LOCAL);
  if (!plugin) {
    r.noGpuReason = "an NVIDIA driver is present but this build has no CUDA plugin (libmirrorlab_cuda.so): "
                    "rebuild where the CUDA toolkit, cuDNN and NCCL are installed; simulated CPU devices only";
    return r;
  }
  dlclose(plugin);
  r.noGpuReason = "the CUDA plugin is present but the GPU backend is not available in this version: simulated CPU devices only";
  return r;
}

}  // namespace ml
