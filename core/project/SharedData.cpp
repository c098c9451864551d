// The shipped-data lookup: build tree, install prefix, XDG data folders (see SharedData.h).
#include "project/SharedData.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "project/Project.h"

namespace fs = std::filesystem;

namespace ml {

std::string executableDir() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return {};
  return fs::path(std::string(buf, static_cast<size_t>(n))).parent_path().string();
}

// The source folder of the CMake build tree that holds exeDir, or "" when exeDir is not in one.
// A build tree is recognised by its CMakeCache.txt, which records the source folder; an installed
// program has none above it, so it never reaches back into a source tree.
static std::string buildTreeSource(const fs::path& exeDir) {
  fs::path dir = exeDir;
  for (int up = 0; up < 4 && !dir.empty(); ++up, dir = dir.parent_path()) {
    std::ifstream cache(dir / "CMakeCache.txt");
    if (!cache) continue;
    const std::string key = "CMAKE_HOME_DIRECTORY:INTERNAL=";
    for (std::string line; std::getline(cache, line);)
      if (line.rfind(key, 0) == 0) return line.substr(key.size());
    return {};
  }
  return {};
}

static std::vector<std::string> splitColon(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t end = std::min(s.find(':', start), s.size());
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::vector<SharedDataDir> sharedDataCandidates(const std::string& exeDir) {
  std::vector<SharedDataDir> out;
  auto share = [&](const std::string& origin, const fs::path& base) {
    const fs::path m = base / "mirrorlab";
    out.push_back({origin, (m / "projects").lexically_normal().string(), (m / "lessons").lexically_normal().string()});
  };
  if (!exeDir.empty()) {
    if (const std::string src = buildTreeSource(exeDir); !src.empty())
      out.push_back({"build tree", (fs::path(src) / "projects").lexically_normal().string(),
                     (fs::path(src) / "projects" / "lessons").lexically_normal().string()});
    share("install prefix", fs::path(exeDir) / ".." / "share");
  }
  // The XDG base directory rules: an unset or empty variable means its default.
  const char* home = std::getenv("HOME");
  const char* dataHome = std::getenv("XDG_DATA_HOME");
  if (dataHome && *dataHome)
    share("XDG_DATA_HOME", dataHome);
  else if (home && *home)
    share("XDG_DATA_HOME", fs::path(home) / ".local" / "share");
  const char* dataDirs = std::getenv("XDG_DATA_DIRS");
  for (const auto& d : splitColon(dataDirs && *dataDirs ? dataDirs : "/usr/local/share:/usr/share"))
    if (fs::path(d).is_absolute()) share("XDG_DATA_DIRS", d);  // the spec ignores relative entries
  return out;
}

SharedDataDir findSharedData() {
  const auto candidates = sharedDataCandidates(executableDir());
  std::error_code ec;
  for (const auto& c : candidates)
    if (fs::is_directory(c.projectsDir, ec)) return c;
  SharedDataDir none = candidates.empty() ? SharedDataDir{} : candidates.front();
  none.origin.clear();
  return none;
}

std::string describeSharedDataSearch() {
  std::string text;
  for (const auto& c : sharedDataCandidates(executableDir())) text += "  " + c.projectsDir + " (" + c.origin + ")\n";
  return text;
}

std::vector<ExampleProject> listExampleProjects(const std::string& dir) {
  std::vector<ExampleProject> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".json" || !(e.is_regular_file(ec) || e.is_symlink(ec))) continue;
    ExampleProject x;
    x.path = fs::absolute(e.path()).lexically_normal().string();
    try {
      x.name = Project::load(x.path).name;
    } catch (const std::exception& err) {
      x.name = e.path().filename().string();
      x.error = err.what();
    }
    out.push_back(std::move(x));
  }
  std::sort(out.begin(), out.end(), [](const ExampleProject& a, const ExampleProject& b) { return a.path < b.path; });
  return out;
}

}  // namespace ml
