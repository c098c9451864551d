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
  // Control bytes are written as \xNN: a NUL would end the message where C strings end (stderr,
  // a dialog), and a newline or escape sequence would rearrange the terminal.
  std::string out;
  size_t i = 0;
  for (; i < s.size() && out.size() < max; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (i == s.size()) return out;
  // Do not cut a UTF-8 sequence in half: when the next byte continues one, drop its start too.
  if ((static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) {
    while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();
    if (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0xC0) out.pop_back();
  }
  return out + "... (" + std::to_string(s.size()) + " characters)";
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
