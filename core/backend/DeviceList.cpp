#include "backend/DeviceList.h"

#include <charconv>
#include <set>

#include "Error.h"

namespace ml {

static const char* kSyntax =
    "use cpu:N (N simulated CPU devices, 1..64), gpu:0,1 (those GPUs) or gpu:0x4 (4 logical GPUs on GPU 0)";

std::string Device::label() const {
  if (kind == DeviceKind::Cpu) return "cpu:" + std::to_string(index);
  if (logical) return "gpu:" + std::to_string(physical) + "/" + std::to_string(index);
  return "gpu:" + std::to_string(physical);  // gpu:1x1 is gpu:1
}

static int parseInt(const std::string& s, const std::string& spec) {
  int v = -1;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty())
    throw UserError("device list '" + spec + "': '" + s + "' is not a number; " + kSyntax);
  return v;
}

DeviceList parseDevices(const std::string& spec) {
  DeviceList list;
  list.spec = spec;
  const auto colon = spec.find(':');
  if (colon == std::string::npos) throw UserError("device list '" + spec + "' has no ':'; " + kSyntax);
  const std::string kind = spec.substr(0, colon), rest = spec.substr(colon + 1);
  if (kind == "cpu") {
    const int n = parseInt(rest, spec);
    if (n < 1 || n > kMaxReplicas)
      throw UserError("device list '" + spec + "': the number of CPU devices must be 1.." + std::to_string(kMaxReplicas) + "; " +
                      kSyntax);
    for (int i = 0; i < n; ++i) list.devices.push_back({DeviceKind::Cpu, i, i});
    return list;
  }
  if (kind != "gpu") throw UserError("device list '" + spec + "': unknown device kind '" + kind + "'; " + kSyntax);
  list.kind = DeviceKind::Gpu;
  if (const auto x = rest.find('x'); x != std::string::npos) {
    const int gpu = parseInt(rest.substr(0, x), spec), n = parseInt(rest.substr(x + 1), spec);
    if (gpu < 0 || n < 1 || n > kMaxReplicas) throw UserError("device list '" + spec + "': " + kSyntax);
    list.logical = n > 1;
    for (int i = 0; i < n; ++i) list.devices.push_back({DeviceKind::Gpu, i, gpu, list.logical});
    return list;
  }
  std::set<int> seen;
  size_t start = 0;
  while (start <= rest.size()) {
    const auto comma = rest.find(',', start);
    const int g = parseInt(rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start), spec);
    if (g < 0 || !seen.insert(g).second)
      throw UserError("device list '" + spec + "': GPU " + std::to_string(g) + " is negative or repeated; " + kSyntax);
    list.devices.push_back({DeviceKind::Gpu, g, g});
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return list;
}

std::vector<DeviceList> parseDeviceSweep(const std::string& spec) {
  const auto colon = spec.find(':');
  if (colon == std::string::npos) throw UserError("device sweep '" + spec + "' has no ':'; use e.g. cpu:1,2,4");
  const std::string kind = spec.substr(0, colon), rest = spec.substr(colon + 1);
  std::vector<DeviceList> out;
  if (kind == "cpu") {
    size_t start = 0;
    while (true) {
      const auto comma = rest.find(',', start);
      out.push_back(parseDevices("cpu:" + rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    return out;
  }
  // GPUs: "gpu:0x1,0x2,0x4" style entries separated by ';' are each a list.
  size_t start = 0;
  while (true) {
    const auto semi = rest.find(';', start);
    out.push_back(parseDevices(kind + ":" + rest.substr(start, semi == std::string::npos ? std::string::npos : semi - start)));
    if (semi == std::string::npos) break;
    start = semi + 1;
  }
  return out;
}

std::string DeviceList::describe() const {
  const int n = size();
  std::string s = std::to_string(n) + (n == 1 ? " replica on " : " replicas on ");
  if (kind == DeviceKind::Cpu) {
    s += n == 1 ? "cpu:0" : "cpu:0.." + std::to_string(n - 1);
    return s + ", simulated";
  }
  for (int i = 0; i < n; ++i) s += (i ? "," : "") + devices[static_cast<size_t>(i)].label();
  if (logical) s += " (logical GPUs sharing GPU " + std::to_string(devices[0].physical) + ")";
  return s;
}

}  // namespace ml
