// Nothing silently wrong (issue 11): every numeric field against its real range, JSON nested too
// deep or holding 1e309, sizes refused with the memory they need, long values cut in messages,
// and files written whole or not at all (AtomicFile).
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "AtomicFile.h"
#include "Error.h"
#include "JsonFile.h"
#include "Limits.h"
#include "data/Synthetic.h"
#include "nn/Sequential.h"
#include "project/Project.h"
#include "support/Errors.h"

namespace ml {
namespace {

namespace fs = std::filesystem;
using mltest::errorOf;
using mltest::projectError;
using nlohmann::json;

json valid() {
  return json::parse(R"({"schema_version": 1, "name": "t",
    "model": {"input_shape": [2], "layers": [{"type": "Dense", "units": 3, "activation": "softmax"}]},
    "data": {"kind": "spirals", "samples": 90, "classes": 3},
    "training": {"epochs": 2, "batch_size": 8, "optimizer": {"name": "adam"}},
    "distribute": {"devices": "cpu:1"}})");
}

#define EXPECT_MENTIONS(msg, ...)                                                                              \
  do {                                                                                                         \
    const std::string m_ = (msg);                                                                              \
    ASSERT_FALSE(m_.empty()) << "expected a UserError";                                                        \
    for (const char* w_ : {__VA_ARGS__}) EXPECT_NE(m_.find(w_), std::string::npos) << w_ << " not in: " << m_; \
  } while (0)

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "mirrorlab-robust-XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(NumericRanges, OptimizerArgumentsFollowKeras) {
  for (auto [key, value, want] : std::vector<std::tuple<const char*, double, const char*>>{
           {"beta_1", 5, "(beta_1 in the file's training › optimizer section) must be in [0, 1)"},
           {"beta_2", 1, "(beta_2 in the file's training › optimizer section) must be in [0, 1)"},
           {"beta_1", -0.1, "got -0.1"},
           {"epsilon", 0, "(epsilon in the file's training › optimizer section) must be a positive finite number"},
           {"learning_rate", -1,
            "(learning_rate in the file's training › optimizer section) must be a positive finite number"}}) {
    json j = valid();
    j["training"]["optimizer"][key] = value;
    EXPECT_MENTIONS(projectError(j), want);
  }
  json j = valid();
  j["training"]["optimizer"] = {{"name", "rmsprop"}, {"rho", 1.5}};
  EXPECT_MENTIONS(projectError(j), "(rho in the file's training › optimizer section) must be in [0, 1)");
  j = valid();
  j["training"]["optimizer"] = {{"name", "adam"}, {"beta_1", 0.5}, {"beta_2", 0.99}, {"epsilon", 1e-8}};
  EXPECT_EQ(projectError(j), "");
}

TEST(NumericRanges, NotANumberAndInfinityAreRefused) {
  Project p = Project::fromJson(valid(), "p.json");
  p.training.warmupEpochs = std::nan("");
  EXPECT_MENTIONS(errorOf([&] { validate(p, "command line"); }),
                  "command line: Training screen › Warm-up (warmup_epochs in the file's training section)", "got nan");
  p = Project::fromJson(valid(), "p.json");
  p.training.optimizer.learningRate = INFINITY;
  EXPECT_MENTIONS(
      errorOf([&] { validate(p); }),
      "Training screen › Base rate (learning_rate in the file's training › optimizer section) must be a positive finite number");
  p = Project::fromJson(valid(), "p.json");
  p.data.validationSplit = std::nan("");
  EXPECT_MENTIONS(errorOf([&] { validate(p); }), "Data screen › Validation split (validation_split in the file's data section)");
  p = Project::fromJson(valid(), "p.json");
  p.distribute.threadsPerDevice = -5;
  EXPECT_MENTIONS(errorOf([&] { validate(p); }),
                  "Devices screen › Threads per device (threads_per_device in the file's distribute section)", "got -5");
}

TEST(NumericRanges, IntegersMustBeWholeAndInRange) {
  json j = valid();
  j["training"]["epochs"] = 2.5;
  EXPECT_MENTIONS(projectError(j), "(epochs in the file's training section) must be a whole number", "2.5");
  j = valid();
  j["training"]["epochs"] = 3.0;  // a whole number written as a float is fine
  EXPECT_EQ(Project::fromJson(j, "p.json").training.epochs, 3);
  j = valid();
  j["training"]["batch_size"] = 1e300;
  EXPECT_MENTIONS(projectError(j), "Training screen › Batch size (batch_size in the file's training section) is out of range",
                  "1e+300");
  // Beyond the field's type, the message gives the field's own range, not the type's.
  for (const json& v : {json(1e20), json(int64_t{1} << 40), json(-(int64_t{1} << 40)), json(uint64_t{1} << 63)}) {
    j = valid();
    j["training"]["epochs"] = v;
    const std::string m = projectError(j);
    EXPECT_MENTIONS(m,
                    "Training screen › Epochs (epochs in the file's training section) is out of range: must be at least 1 and "
                    "at most 1000000, got");
    EXPECT_EQ(m.find("2147483647"), std::string::npos) << m;
  }
  j = valid();
  j["training"]["epochs"] = 1e20;
  EXPECT_MENTIONS(projectError(j), "got 1e+20");
  j = valid();
  j["training"]["seed"] = -1;
  EXPECT_MENTIONS(projectError(j), "Training screen › Seed (seed in the file's training section)");
  j = valid();
  j["data"]["samples"] = int64_t{1} << 40;
  EXPECT_MENTIONS(projectError(j),
                  "Data screen › Samples (samples in the file's data section) must be at least 1 and at most 268435456");
}

TEST(NumericRanges, LayerUnitsAreWholeAndFitInMemory) {
  Project p = Project::fromJson(valid(), "p.json");
  auto modelError = [&](json units) {  // a whole number is the model's to refuse, anything else the file reader's
    json j = valid();
    j["model"]["layers"][0]["units"] = units;
    return errorOf([&] { Sequential s(Project::fromJson(j, "p.json").model); });
  };
  EXPECT_MENTIONS(modelError(2.7),
                  "› Units (units of entry 1 of layers in the file's model section) must be a whole number, got 2.7");
  EXPECT_MENTIONS(modelError(1e300), "› Units (units of entry 1 of layers in the file's model section) is out of range");
  EXPECT_MENTIONS(modelError(int64_t{1} << 62), "more weights than any machine holds");
  ::setenv("MIRRORLAB_MEMORY_LIMIT_MB", "64", 1);
  const std::string big = modelError(2000000000);
  ::unsetenv("MIRRORLAB_MEMORY_LIMIT_MB");
  EXPECT_MENTIONS(big, "6000000000 parameters", "needs 44.70 GiB of memory", "64.00 MiB", "use fewer or smaller layers");
  ModelSpec m = p.model;
  m.inputShape = {4294967295, 4294967295, 4294967295};
  EXPECT_MENTIONS(errorOf([&] { Sequential s(m); }), "values per sample");
}

TEST(Limits, DataSetsAskForTheirMemoryFirst) {
  ::setenv("MIRRORLAB_MEMORY_LIMIT_MB", "64", 1);
  const std::string msg = errorOf([] { makeBlobs(int64_t{1} << 28, 3, 100000, 0.1, 1); });
  ::unsetenv("MIRRORLAB_MEMORY_LIMIT_MB");
  EXPECT_MENTIONS(msg, "blobs of 268435456 samples x 100000 features needs 97.66 TiB of memory",
                  "lower Data screen › Samples (samples in the file's data section) or Data screen › Features");
}

TEST(Limits, CheckedArithmeticAndClippedText) {
  EXPECT_EQ(mulChecked(3, 4), 12);
  EXPECT_FALSE(mulChecked(int64_t{1} << 32, int64_t{1} << 31));
  EXPECT_FALSE(mulChecked(-1, 2));
  EXPECT_FALSE(addChecked(INT64_MAX, 1));
  EXPECT_EQ(clipText("short"), "short");
  const std::string clipped = clipText(std::string(1000000, 'x'), 80);
  EXPECT_EQ(clipped, std::string(80, 'x') + "... (1000000 characters)");
  EXPECT_EQ(humanBytes(1536), "1.50 KiB");
}

TEST(Limits, DevicesAndFoldersAreNotReadAsFiles) {
  EXPECT_MENTIONS(errorOf([] { readRegularFile("/dev/zero", "CSV file", "check data.path"); }),
                  "'/dev/zero' is not a regular file", "check data.path");
  EXPECT_MENTIONS(errorOf([] { readRegularFile("/tmp", "project file", "fix"); }), "is a folder");
  Project p = Project::fromJson(valid(), "p.json");
  EXPECT_MENTIONS(errorOf([] { Project::load("/dev/zero"); }), "not a regular file");
}

TEST(JsonLimits, DeepNestingIsRefusedWithANamedError) {
  TempDir dir;
  const fs::path file = dir.path / "deep.json";
  std::ofstream(file) << R"({"name": )" << std::string(100000, '[') << std::string(100000, ']') << "}";
  const std::string name = file.string();
  EXPECT_MENTIONS(errorOf([&] { Project::load(name); }), name.c_str(), "nested more than 64 levels");
  // Brackets inside strings are text, not nesting; 64 levels are still read.
  EXPECT_FALSE(jsonTooDeep("\"" + std::string(1000, '[') + "\""));
  EXPECT_FALSE(jsonTooDeep(std::string(64, '[') + std::string(64, ']')));
  EXPECT_TRUE(jsonTooDeep(std::string(65, '[') + std::string(65, ']')));
  EXPECT_TRUE(parseJsonOrDiscarded(std::string(100000, '[')).is_discarded());
}

TEST(JsonLimits, NumbersBeyondADoubleAreExplained) {
  const std::string msg = errorOf([] { parseJsonText(R"({"training": {"seed": 1e309}})", "p.json", "fix the file"); });
  EXPECT_MENTIONS(msg, "p.json: the number 1e309 is too large", "fix the file");
  EXPECT_EQ(msg.find("json.exception"), std::string::npos) << msg;
}

TEST(JsonLimits, LongValuesAreCutInMessages) {
  json j = valid();
  j["training"]["optimizer"]["name"] = std::string(1 << 20, 'x');
  const std::string msg = projectError(j);
  EXPECT_MENTIONS(msg, "Training screen › Optimizer (name in the file's training › optimizer section)", "(1048576 characters)");
  EXPECT_LT(msg.size(), 400u);
  j = valid();
  j["training"]["epochs"] = std::string(1 << 20, 'y');
  EXPECT_LT(projectError(j).size(), 400u);
}

TEST(AtomicFileTest, WritesTheWholeFile) {
  TempDir dir;
  const fs::path f = dir.path / "out.txt";
  writeFileAtomically(f.string(), "hello\n", "test file");
  EXPECT_EQ(slurp(f), "hello\n");
  writeFileAtomically(f.string(), "second\n", "test file");
  EXPECT_EQ(slurp(f), "second\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator{}), 1) << "a temporary file was left";
}

TEST(AtomicFileTest, MissingFolderAndFolderTargetsAreNamed) {
  TempDir dir;
  EXPECT_MENTIONS(errorOf([&] { writeFileAtomically((dir.path / "no" / "f").string(), "x", "report file"); }), "report file",
                  "does not exist");
  EXPECT_MENTIONS(errorOf([&] { checkCanWrite((dir.path / "no" / "f").string(), "report file"); }), "does not exist");
  EXPECT_MENTIONS(errorOf([&] { writeFileAtomically(dir.path.string(), "x", "weights file"); }), "it is a folder");
}

// A write that fails (here at a 4 KiB file-size limit, as on a full disk) leaves the old file as
// it was and no temporary file behind.
TEST(AtomicFileTest, AFailedWriteKeepsTheOldFile) {
  TempDir dir;
  const fs::path f = dir.path / "w.mlw";
  writeFileAtomically(f.string(), "old contents", "weights file");
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto oldSignal = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string msg = errorOf([&] { writeFileAtomically(f.string(), std::string(1 << 20, 'z'), "weights file"); });
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, oldSignal);
  EXPECT_MENTIONS(msg, "writing weights file", "File too large", "the existing file was left unchanged");
  EXPECT_EQ(slurp(f), "old contents");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator{}), 1) << "a temporary file was left";
}

}  // namespace
}  // namespace ml
