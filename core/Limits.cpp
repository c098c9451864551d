// Size limits and checked arithmetic; see Limits.h.
#include "Limits.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>

#include "Error.h"

namespace ml {

uint64_t memoryLimitBytes() {
  if (const char* env = std::getenv("MIRRORLAB_MEMORY_LIMIT_MB"); env && *env) {
    char* end = nullptr;
    const unsigned long long mb = std::strtoull(env, &end, 10);
    if (end && *end == '\0' && mb > 0 && mb < (1ull << 40)) return static_cast<uint64_t>(mb) << 20;
  }
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
  return uint64_t{8} << 30;  // unknown: assume a small machine
}

std::string humanBytes(double bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 6) {
    bytes /= 1024.0;
    ++u;
  }
  char buf[64];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  else if (bytes >= 1e6)
    std::snprintf(buf, sizeof buf, "%.3g %s", bytes, units[u]);
  else
    std::snprintf(buf, sizeof buf, "%.2f %s", bytes, units[u]);
  return buf;
}

void requireMemory(double bytes, const std::string& what, const std::string& fix) {
  const double limit = static_cast<double>(memoryLimitBytes());
  if (!(bytes <= limit))
    throw UserError(what + " needs " + humanBytes(bytes) + " of memory, more than this machine has (" + humanBytes(limit) +
                    "): " + fix);
}

std::optional<int64_t> mulChecked(int64_t a, int64_t b) {
  int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::optional<int64_t> addChecked(int64_t a, int64_t b) {
  int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::string clipText(std::string_view s, size_t max) {
  if (s.size() <= max) return std::string(s);
  // Do not cut a UTF-8 sequence in half.
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return std::string(s.substr(0, cut)) + "... (" + std::to_string(s.size()) + " characters)";
}

void requireRegularFile(const std::string& path, const std::string& what, const std::string& missingHint) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw UserError("cannot open " + what + " '" + clipText(path, 200) + "' (" + std::strerror(errno) + "): " + missingHint);
  if (S_ISDIR(st.st_mode)) throw UserError(what + " '" + clipText(path, 200) + "' is a folder, not a file: " + missingHint);
  if (!S_ISREG(st.st_mode))
    throw UserError(what + " '" + clipText(path, 200) + "' is not a regular file (a device, pipe or socket): " + missingHint);
}

std::string readRegularFile(const std::string& path, const std::string& what, const std::string& missingHint, uint64_t maxBytes) {
  requireRegularFile(path, what, missingHint);
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    throw UserError("cannot open " + what + " '" + clipText(path, 200) + "' (" + std::strerror(errno) + "): " + missingHint);
  const std::streamoff size = in.tellg();
  const uint64_t limit = maxBytes ? maxBytes : memoryLimitBytes();
  if (size < 0) throw UserError("cannot read " + what + " '" + clipText(path, 200) + "': " + missingHint);
  if (static_cast<uint64_t>(size) > limit)
    throw UserError(what + " '" + clipText(path, 200) + "' is " + humanBytes(static_cast<double>(size)) + ", more than the " +
                    humanBytes(static_cast<double>(limit)) + " such a file may have: " + missingHint);
  std::string data(static_cast<size_t>(size), '\0');
  in.seekg(0);
  in.read(data.data(), size);
  if (in.gcount() != size)
    throw UserError("cannot read " + what + " '" + clipText(path, 200) + "' (it changed while it was read): try again");
  return data;
}

}  // namespace ml
