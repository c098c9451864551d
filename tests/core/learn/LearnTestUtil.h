// Helpers for the learn tests: temporary folders, running a command, the shipped projects.
#pragma once
#include <sys/wait.h>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>

#ifndef MIRRORLAB_SOURCE_DIR
#error "MIRRORLAB_SOURCE_DIR must point at the repository (see tests/core/learn/CMakeLists.txt)"
#endif

namespace mltest {

// Debian's interpreter, which has numpy and python3-torch; `python3` on PATH may be another one.
inline constexpr const char* kPython = "/usr/bin/python3";

inline std::string projectPath(const std::string& name) {
  return (std::filesystem::path(MIRRORLAB_SOURCE_DIR) / "projects" / name).string();
}

class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() / ("mirrorlab-" + tag + "-" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline void writeFile(const std::filesystem::path& p, const std::string& text) {
  std::ofstream out(p);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + p.string());
}

struct CommandResult {
  int exitCode = -1;
  std::string output;  // stdout and stderr
};

inline CommandResult runCommand(const std::string& cmd) {
  CommandResult r;
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  if (!f) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(f);
  r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace mltest
