// Which GPUs there are (CUDA runtime) and how busy they are (NVML, loaded at run time). Without a
// driver the runtime answers cudaErrorInsufficientDriver and a driver version of 0: the reason
// given then says so in words.
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/Context.h"

namespace mlcuda {
namespace {

// The few NVML types used here, as nvml.h declares them (a stable C ABI). NVML is only dlopen'ed,
// never linked: a program must start where the driver (which ships NVML) is absent.
using nvmlReturn_t = int;  // NVML_SUCCESS = 0
using nvmlDevice_t = struct nvmlDevice_st*;
struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

class Nvml {
 public:
  static const Nvml& get() {
    static const Nvml nvml;  // loaded once, thread-safe; never unloaded (process lifetime)
    return nvml;
  }
  const std::string& error() const { return error_; }
  std::string errorText(nvmlReturn_t r) const {
    return (errorString_ ? std::string(errorString_(r)) : std::string("error")) + " (" + std::to_string(r) + ")";
  }

  const char* (*errorString_)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*handleByPciBusId)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*utilizationRates)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*memoryInfo)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*driverVersion)(char*, unsigned int) = nullptr;
  nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned int*) = nullptr;  // optional

 private:
  Nvml() {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      error_ = std::string("NVML (libnvidia-ml.so.1, part of the NVIDIA driver) cannot be loaded: ") + (e ? e : "?");
      return;
    }
    auto init = reinterpret_cast<nvmlReturn_t (*)()>(dlsym(lib, "nvmlInit_v2"));
    errorString_ = reinterpret_cast<const char* (*)(nvmlReturn_t)>(dlsym(lib, "nvmlErrorString"));
    handleByPciBusId =
        reinterpret_cast<nvmlReturn_t (*)(const char*, nvmlDevice_t*)>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    utilizationRates =
        reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, nvmlUtilization_t*)>(dlsym(lib, "nvmlDeviceGetUtilizationRates"));
    memoryInfo = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*)>(dlsym(lib, "nvmlDeviceGetMemoryInfo"));
    driverVersion = reinterpret_cast<nvmlReturn_t (*)(char*, unsigned int)>(dlsym(lib, "nvmlSystemGetDriverVersion"));
    // nvmlDeviceGetTemperature(device, NVML_TEMPERATURE_GPU = 0, &celsius): deprecated in newer
    // drivers but still exported; a driver without it gives samples without a temperature.
    temperature = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, int, unsigned int*)>(dlsym(lib, "nvmlDeviceGetTemperature"));
    if (!init || !errorString_ || !handleByPciBusId || !utilizationRates || !memoryInfo || !driverVersion) {
      error_ = "NVML (libnvidia-ml.so.1) lacks a function this plugin uses: the driver is too old";
      return;
    }
    const nvmlReturn_t r = init();
    if (r != 0) error_ = "nvmlInit_v2 failed: " + errorText(r);
  }
  std::string error_;
};

std::string versionText(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

std::string visibleDevicesNote() {
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  return v ? std::string(" (CUDA_VISIBLE_DEVICES=\"") + v + "\" limits the GPUs this program may see)" : std::string();
}

std::string noDeviceReason(cudaError_t e, int driver, int runtime) {
  const std::string call =
      std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + " (" + std::to_string(static_cast<int>(e)) + ")";
  if (e == cudaErrorInsufficientDriver) {
    if (driver == 0)
      return "no NVIDIA GPU driver found (libcuda.so.1 cannot be loaded; " + call +
             "): install the NVIDIA driver to train on GPUs";
    return "the NVIDIA driver supports CUDA " + versionText(driver) + " but this build of the CUDA plugin needs CUDA " +
           versionText(runtime) + " (" + call + "): update the NVIDIA driver";
  }
  if (e == cudaErrorStubLibrary)
    return "the libcuda.so.1 found is the CUDA toolkit's link stub, not an NVIDIA driver (" + call +
           "): take the toolkit's stubs folder off the library path, or install the NVIDIA driver";
  if (e == cudaErrorNoDevice)
    return "the NVIDIA driver (CUDA " + versionText(driver) + ") found no CUDA-capable GPU (" + call + ")" + visibleDevicesNote();
  return std::string("the CUDA runtime cannot use the GPUs: ") + cudaGetErrorString(e) + " (" + call + ", driver CUDA " +
         versionText(driver) + ", runtime " + versionText(runtime) + ")";
}

}  // namespace
}  // namespace mlcuda

using namespace mlcuda;

extern "C" {

MLCUDA_EXPORT mlcuda_status mlcuda_probe(mlcuda_gpu_info* gpus, int capacity, mlcuda_probe_result* result) {
  return guarded([&] {
    ML_REQUIRE(result, "mlcuda_probe: result is NULL");
    std::memset(result, 0, sizeof *result);
    int driver = 0, runtime = 0;
    // Both answer without a driver: the driver version is then 0.
    if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
    if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) runtime = CUDART_VERSION;
    (void)cudaGetLastError();
    result->driver_version = driver;
    result->runtime_version = runtime;
    if (driver > 0) {
      const Nvml& nvml = Nvml::get();
      if (nvml.error().empty()) {
        char release[sizeof result->driver_release] = {0};
        if (nvml.driverVersion(release, sizeof release) == 0) std::memcpy(result->driver_release, release, sizeof release);
        result->driver_release[sizeof result->driver_release - 1] = '\0';
      }
    }
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);  // leaves count unwritten on failure
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      fail(MLCUDA_ERR_NO_DEVICE, noDeviceReason(e, driver, runtime));
    }
    if (count <= 0)
      fail(MLCUDA_ERR_NO_DEVICE,
           "the NVIDIA driver (CUDA " + versionText(driver) + ") reports no CUDA-capable GPU" + visibleDevicesNote());
    result->device_count = count;
    for (int i = 0; i < count && i < capacity && gpus; ++i) {
      const std::string label = "gpu:" + std::to_string(i);
      cudaDeviceProp p{};
      ML_CUDA(label, cudaGetDeviceProperties(&p, i));
      mlcuda_gpu_info& g = gpus[i];
      std::memset(&g, 0, sizeof g);
      g.index = i;
      std::memcpy(g.name, p.name, strnlen(p.name, std::min(sizeof p.name, sizeof g.name - 1)));
      g.total_memory_bytes = static_cast<int64_t>(p.totalGlobalMem);
      g.cc_major = p.major;
      g.cc_minor = p.minor;
      g.multiprocessors = p.multiProcessorCount;
      ML_CUDA(label, cudaDeviceGetPCIBusId(g.pci_bus_id, static_cast<int>(sizeof g.pci_bus_id), i));
    }
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_nvml_sample(int device, mlcuda_gpu_sample* sample) {
  return guarded([&] {
    ML_REQUIRE(sample, "mlcuda_nvml_sample: sample is NULL");
    std::memset(sample, 0, sizeof *sample);
    const std::string label = "gpu:" + std::to_string(device);
    const Nvml& nvml = Nvml::get();
    if (!nvml.error().empty()) fail(MLCUDA_ERR_NVML, nvml.error() + ": no utilization samples for " + label);
    // NVML numbers GPUs its own way (PCI order, all of them); the bus id names the same card for both.
    char bus[32] = {0};
    ML_CUDA(label, cudaDeviceGetPCIBusId(bus, static_cast<int>(sizeof bus), device));
    nvmlDevice_t handle = nullptr;
    nvmlReturn_t r = nvml.handleByPciBusId(bus, &handle);
    if (r != 0)
      fail(MLCUDA_ERR_NVML,
           "nvmlDeviceGetHandleByPciBusId_v2(" + std::string(bus) + ") failed: " + nvml.errorText(r) + " for " + label);
    nvmlUtilization_t u{};
    r = nvml.utilizationRates(handle, &u);
    if (r != 0) fail(MLCUDA_ERR_NVML, "nvmlDeviceGetUtilizationRates failed: " + nvml.errorText(r) + " for " + label);
    nvmlMemory_t m{};
    r = nvml.memoryInfo(handle, &m);
    if (r != 0) fail(MLCUDA_ERR_NVML, "nvmlDeviceGetMemoryInfo failed: " + nvml.errorText(r) + " for " + label);
    sample->utilization_percent = static_cast<int>(u.gpu);
    sample->memory_busy_percent = static_cast<int>(u.memory);
    sample->memory_used_bytes = static_cast<int64_t>(m.used);
    sample->memory_total_bytes = static_cast<int64_t>(m.total);
    unsigned int celsius = 0;
    sample->temperature_c = nvml.temperature && nvml.temperature(handle, 0, &celsius) == 0 ? static_cast<int>(celsius) : -1;
  });
}

}  // extern "C"
