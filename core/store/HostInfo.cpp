// Host description from /proc and uname; see HostInfo.h.
#include "store/HostInfo.h"

#include <sys/utsname.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <thread>

#include <cblas.h>

#ifndef MIRRORLAB_VERSION
#define MIRRORLAB_VERSION "unknown"
#endif

namespace ml {
namespace {

std::string trim(std::string s) {
  size_t b = s.find_first_not_of(" \t\"");
  size_t e = s.find_last_not_of(" \t\"\r\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// Value after "key<spaces>:" on the first matching line, or "".
std::string field(const std::string& line, const std::string& key) {
  if (line.rfind(key, 0) != 0) return {};
  size_t colon = line.find(':');
  if (colon == std::string::npos) return {};
  return trim(line.substr(colon + 1));
}

void readCpu(nlohmann::json& j) {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model;
  std::set<std::pair<std::string, std::string>> cores;  // (physical id, core id)
  std::string physId;
  while (std::getline(in, line)) {
    if (std::string v = field(line, "model name"); !v.empty() && model.empty()) model = v;
    if (std::string v = field(line, "physical id"); !v.empty()) physId = v;
    if (std::string v = field(line, "core id"); !v.empty()) cores.emplace(physId, v);
  }
  j["cpu_model"] = model.empty() ? "unknown" : model;
  j["logical_cores"] = std::thread::hardware_concurrency();
  j["physical_cores"] = cores.empty() ? std::thread::hardware_concurrency() : cores.size();
}

void readMemory(nlohmann::json& j) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (std::string v = field(line, "MemTotal"); !v.empty()) {
      j["memory_bytes"] = std::stoll(v) * 1024;  // "16318412 kB"
      return;
    }
  }
}

std::string osName() {
  std::ifstream in("/etc/os-release");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("PRETTY_NAME=", 0) == 0) return trim(line.substr(12));
  return {};
}

}  // namespace

int64_t processStartTicks(int64_t pid, bool* zombie) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t close = s.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos || close + 2 > s.size()) return 0;
  std::istringstream fields(s.substr(close + 2));
  std::string f;
  for (int i = 0; i < 20 && fields >> f; ++i) {
    if (i == 0 && zombie) *zombie = (f == "Z" || f == "X");
    if (i == 19) return std::atoll(f.c_str());  // field 22: starttime
  }
  return 0;
}

std::string hostName() {
  utsname u{};
  return uname(&u) == 0 ? std::string(u.nodename) : std::string();
}

nlohmann::json hostInfo(const std::vector<std::string>& gpuNames, const nlohmann::json& extra) {
  nlohmann::json j;
  j["hostname"] = hostName();
  readCpu(j);
  readMemory(j);
  utsname u{};
  if (uname(&u) == 0) {
    std::string os = osName();
    j["os"] = os.empty() ? std::string(u.sysname) : os;
    j["kernel"] = std::string(u.sysname) + " " + u.release + " " + u.machine;
  }
  j["mirrorlab_version"] = MIRRORLAB_VERSION;
  const char* blas = openblas_get_config();
  j["openblas"] = blas ? trim(blas) : "unknown";
  j["gpus"] = gpuNames;
  if (extra.is_object())
    for (auto& [k, v] : extra.items()) j[k] = v;
  return j;
}

}  // namespace ml
