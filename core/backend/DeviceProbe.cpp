#include "backend/DeviceProbe.h"

#include <dlfcn.h>

#include <algorithm>
#include <fstream>
#include <thread>

#include "backend/CudaPlugin.h"

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

static constexpr const char* kCpuOnly = "; simulated CPU devices only";

DeviceReport probeDevices() {
  DeviceReport r;
  r.cpuCores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  r.cpuModel = cpuModelName();
  // Never link the driver: probe it at run time, so the program starts on any machine. Without it
  // there is nothing the plugin could add, and loading cuBLAS would only cost time.
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!driver) {
    r.noGpuReason = "no NVIDIA GPU driver found (libcuda.so.1 cannot be loaded): simulated CPU devices only";
    return r;
  }
  dlclose(driver);
  std::string why;
  const CudaPlugin* plugin = cudaPlugin(&why);
  if (!plugin) {
    r.noGpuReason = "an NVIDIA driver is present but " + why + kCpuOnly;
    return r;
  }
  r.gpuBackend = plugin->path + " (" + plugin->buildInfo + ")";
  std::vector<mlcuda_gpu_info> gpus(64);
  mlcuda_probe_result result{};
  const mlcuda_status s = plugin->probe(gpus.data(), static_cast<int>(gpus.size()), &result);
  if (s.code != MLCUDA_OK) {
    r.noGpuReason = s.message + std::string(kCpuOnly);
    return r;
  }
  const std::string cuda = "CUDA " + cudaVersionText(result.driver_version);
  const std::string driverText = result.driver_release[0] ? std::string(result.driver_release) + " (" + cuda + ")" : cuda;
  for (int i = 0; i < std::min(result.device_count, static_cast<int>(gpus.size())); ++i) {
    const mlcuda_gpu_info& g = gpus[static_cast<size_t>(i)];
    GpuInfo info;
    info.index = g.index;
    info.name = g.name;
    info.memoryBytes = g.total_memory_bytes;
    info.ccMajor = g.cc_major;
    info.ccMinor = g.cc_minor;
    info.driverVersion = driverText;
    info.runtimeVersion = "CUDA " + cudaVersionText(result.runtime_version);
    r.gpus.push_back(std::move(info));
  }
  return r;
}

}  // namespace ml
