// The shipped-data lookup: build tree first, then the install prefix, then XDG_DATA_HOME and
// XDG_DATA_DIRS; the example listing names a damaged file by its path and lists the rest.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include "project/SharedData.h"

namespace fs = std::filesystem;
using namespace ml;

namespace {

// Sets (or unsets, with nullptr) an environment variable for one test.
struct ScopedEnv {
  std::string name;
  std::optional<std::string> old;
  ScopedEnv(const char* n, const char* value) : name(n) {
    if (const char* o = std::getenv(n)) old = o;
    if (value)
      setenv(n, value, 1);
    else
      unsetenv(n);
  }
  ~ScopedEnv() {
    if (old)
      setenv(name.c_str(), old->c_str(), 1);
    else
      unsetenv(name.c_str());
  }
};

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("mirrorlab-shared-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

}  // namespace

TEST(SharedData, ABuildTreeComesFirstThenThePrefixThenXdgHomeThenXdgDirs) {
  TempDir t;
  write(t.path / "build" / "CMakeCache.txt", "# cache\nCMAKE_HOME_DIRECTORY:INTERNAL=" + (t.path / "src").string() + "\n");
  ScopedEnv home("XDG_DATA_HOME", (t.path / "home").c_str());
  ScopedEnv dirs("XDG_DATA_DIRS", ((t.path / "a").string() + ":relative/ignored::" + (t.path / "b").string()).c_str());
  const auto c = sharedDataCandidates((t.path / "build" / "app").string());
  ASSERT_EQ(c.size(), 5u);
  EXPECT_EQ(c[0].origin, "build tree");
  EXPECT_EQ(c[0].projectsDir, (t.path / "src" / "projects").string());
  EXPECT_EQ(c[0].lessonsDir, (t.path / "src" / "projects" / "lessons").string());
  EXPECT_EQ(c[1].origin, "install prefix");
  EXPECT_EQ(c[1].projectsDir, (t.path / "build" / "share" / "mirrorlab" / "projects").string());
  EXPECT_EQ(c[1].lessonsDir, (t.path / "build" / "share" / "mirrorlab" / "lessons").string());
  EXPECT_EQ(c[2].origin, "XDG_DATA_HOME");
  EXPECT_EQ(c[2].projectsDir, (t.path / "home" / "mirrorlab" / "projects").string());
  EXPECT_EQ(c[3].projectsDir, (t.path / "a" / "mirrorlab" / "projects").string());
  EXPECT_EQ(c[4].projectsDir, (t.path / "b" / "mirrorlab" / "projects").string());
  EXPECT_EQ(c[4].origin, "XDG_DATA_DIRS");
}

TEST(SharedData, AnInstalledProgramNeverLooksIntoABuildTree) {
  TempDir t;  // prefix/bin with no CMakeCache.txt above it
  ScopedEnv home("XDG_DATA_HOME", nullptr);
  ScopedEnv dirs("XDG_DATA_DIRS", nullptr);
  const auto c = sharedDataCandidates((t.path / "prefix" / "bin").string());
  ASSERT_GE(c.size(), 3u);
  EXPECT_EQ(c[0].origin, "install prefix");
  EXPECT_EQ(c[0].projectsDir, (t.path / "prefix" / "share" / "mirrorlab" / "projects").string());
  // Unset XDG variables mean their defaults: ~/.local/share, then /usr/local/share and /usr/share.
  EXPECT_EQ(c[c.size() - 2].projectsDir, "/usr/local/share/mirrorlab/projects");
  EXPECT_EQ(c.back().projectsDir, "/usr/share/mirrorlab/projects");
}

TEST(SharedData, ThisTestRunsFromTheBuildTreeAndFindsTheSourceProjects) {
  const SharedDataDir d = findSharedData();
  EXPECT_EQ(d.origin, "build tree");
  EXPECT_EQ(fs::canonical(d.projectsDir), fs::canonical(fs::path(MIRRORLAB_SOURCE_DIR) / "projects"));
  EXPECT_TRUE(fs::is_regular_file(fs::path(d.lessonsDir) / "01-copies-and-shards.json"));
}

TEST(SharedData, ExamplesAreListedByNameAndADamagedOneIsNamedByItsPath) {
  TempDir t;
  for (const char* f : {"spirals.json", "fashion-mlp.json"})
    fs::copy_file(fs::path(MIRRORLAB_SOURCE_DIR) / "projects" / f, t.path / f);
  write(t.path / "broken.json", "{\"schema_version\": 1, \"name\": ");
  write(t.path / "notes.txt", "not a project");
  write(t.path / "lessons" / "01.json", "{}");  // lessons are not examples
  const auto list = listExampleProjects(t.path.string());
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].name, "broken.json");
  EXPECT_NE(list[0].error.find((t.path / "broken.json").string()), std::string::npos) << list[0].error;
  EXPECT_EQ(list[1].name, "Fashion-MNIST MLP");
  EXPECT_TRUE(list[1].error.empty());
  EXPECT_EQ(list[2].path, (t.path / "spirals.json").string());
  EXPECT_TRUE(list[2].error.empty()) << list[2].error;
  EXPECT_TRUE(listExampleProjects((t.path / "nowhere").string()).empty());
}
