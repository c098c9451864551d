// What this machine offers to train on: CPU cores (simulated devices) and, where the CUDA plugin
// and a driver are present, GPUs. Without a GPU it says why, in words a user can act on.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ml {

struct GpuInfo {
  int index = 0;
  std::string name;
  int64_t memoryBytes = 0;
  int ccMajor = 0, ccMinor = 0;
  std::string driverVersion, runtimeVersion;
};

struct DeviceReport {
  int cpuCores = 1;
  std::string cpuModel;
  std::vector<GpuInfo> gpus;
  std::string noGpuReason;  // empty when GPUs are usable
  std::string gpuBackend;   // the CUDA plugin loaded (file, CUDA/cuBLAS versions, NCCL's), or empty
};

DeviceReport probeDevices();

}  // namespace ml
