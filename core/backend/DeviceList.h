// Device lists: "cpu:N" (N simulated CPU devices), "gpu:0,1" (physical GPUs), "gpu:0x4"
// (4 logical GPUs on GPU 0). Validated when parsed; errors say what is allowed.
#pragma once
#include <string>
#include <vector>

namespace ml {

enum class DeviceKind { Cpu, Gpu };

struct Device {
  DeviceKind kind = DeviceKind::Cpu;
  int index = 0;              // replica-visible index (cpu:0.., gpu:0..)
  int physical = 0;           // the physical GPU a logical GPU lives on; for CPU devices = index
  bool logical = false;       // one of several replicas sharing the physical GPU
  std::string label() const;  // "cpu:0", "gpu:1", "gpu:0/2" (logical 2 on GPU 0)
};

struct DeviceList {
  std::string spec;
  DeviceKind kind = DeviceKind::Cpu;
  std::vector<Device> devices;
  bool logical = false;  // several replicas share one physical GPU
  int size() const { return static_cast<int>(devices.size()); }
  // "4 replicas on cpu:0..3, simulated"
  std::string describe() const;
  // The same list as written (what a project file keeps and a screen compares).
  friend bool operator==(const DeviceList& a, const DeviceList& b) { return a.spec == b.spec; }
};

// Throws UserError with the accepted syntax.
DeviceList parseDevices(const std::string& spec);
// Parses a list for `scale`: "cpu:1,2,4" means cpu:1, cpu:2, cpu:4.
std::vector<DeviceList> parseDeviceSweep(const std::string& spec);

inline constexpr int kMaxReplicas = 64;

}  // namespace ml
