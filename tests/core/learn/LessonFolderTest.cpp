// A lesson folder as a teacher keeps one: a broken lesson file is named and the valid lessons
// beside it still load; a shipped lesson copied elsewhere still finds its project (the shipped
// one); a project that is nowhere names every place it was looked for.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "Error.h"
#include "LearnTestUtil.h"
#include "learn/Lesson.h"

namespace fs = std::filesystem;

namespace {

const fs::path kShipped = fs::path(MIRRORLAB_SOURCE_DIR) / "projects" / "lessons";

TEST(LessonFolder, ABrokenLessonIsNamedAndTheOthersStillLoad) {
  mltest::TempDir dir("lesson-folder");
  const fs::path d = dir.path() / "mine";
  fs::create_directories(d);
  fs::copy_file(kShipped / "01-copies-and-shards.json", d / "01-copies-and-shards.json");
  fs::copy_file(kShipped / "07-one-slow-device.json", d / "07-one-slow-device.json");
  std::ofstream(d / "03-broken.json") << R"({"id": "broken", "title": )";
  std::ofstream(d / "04-duplicate.json") << std::ifstream(kShipped / "01-copies-and-shards.json").rdbuf();
  const ml::LessonFolder f = ml::scanLessons(d.string());
  ASSERT_EQ(f.lessons.size(), 2u);
  EXPECT_EQ(f.lessons[0].id, "copies-and-shards");
  EXPECT_EQ(f.lessons[1].id, "one-slow-device");
  ASSERT_EQ(f.problems.size(), 2u);
  EXPECT_NE(f.problems[0].find((d / "03-broken.json").string() + ": not valid JSON"), std::string::npos) << f.problems[0];
  EXPECT_NE(f.problems[1].find("id 'copies-and-shards' is already used"), std::string::npos) << f.problems[1];
  // loadLessons (the studio's list) still refuses the folder, naming the first broken file.
  try {
    (void)ml::loadLessons(d.string());
    ADD_FAILURE() << "loadLessons accepted a folder with a broken lesson";
  } catch (const ml::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("03-broken.json"), std::string::npos) << e.what();
  }
}

TEST(LessonFolder, ACopiedShippedLessonFindsItsProject) {
  // Copied into a folder with no projects beside or above it: "spirals.json" is the shipped one.
  mltest::TempDir dir("lesson-copy");
  const fs::path d = dir.path() / "deep" / "mine";
  fs::create_directories(d);
  fs::copy_file(kShipped / "07-one-slow-device.json", d / "07.json");
  const ml::Lesson l = ml::loadLesson((d / "07.json").string(), (dir.path() / "deep").string());
  EXPECT_EQ(l.projectRef, "spirals.json");
  EXPECT_EQ(l.project.data.kind, ml::DataKind::Spirals);
  // A project beside the lesson file wins over the shipped one.
  std::ofstream(d / "spirals.json") << std::ifstream(fs::path(MIRRORLAB_SOURCE_DIR) / "projects" / "spirals.json").rdbuf();
  {
    std::ifstream in(d / "spirals.json");
    nlohmann::json j = nlohmann::json::parse(in);
    j["name"] = "my own spirals";
    std::ofstream(d / "spirals.json") << j.dump();
  }
  EXPECT_EQ(ml::loadLesson((d / "07.json").string(), (dir.path() / "deep").string()).project.name, "my own spirals");
  // Nowhere: every place is named.
  nlohmann::json j = nlohmann::json::parse(std::ifstream(kShipped / "07-one-slow-device.json"));
  j["project"] = "no-such-project.json";
  std::ofstream(d / "lost.json") << j.dump();
  try {
    (void)ml::loadLesson((d / "lost.json").string(), (dir.path() / "deep").string());
    ADD_FAILURE() << "a lesson without its project loaded";
  } catch (const ml::UserError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("names 'no-such-project.json', which is not at " + (dir.path() / "deep" / "no-such-project.json").string() +
                     ", " + (d / "no-such-project.json").string() + ", "),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("give a file in projects/, beside the lesson, or its full path"), std::string::npos) << m;
  }
}

}  // namespace
