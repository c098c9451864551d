// Weights files against damage and NaN: the checksum is the standard FNV-1a 64 (checked against
// an independent implementation and the published test vectors), version 1 files (the old basis)
// still load, NaN and infinite weights are refused when written and when read naming the layer,
// and a corrupted count or size is damage, not "another architecture".
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "Error.h"
#include "NnTestUtil.h"
#include "nn/WeightsFile.h"

namespace ml {
namespace {

namespace fs = std::filesystem;

// FNV-1a 64 as published (http://www.isthe.com/chongo/tech/comp/fnv/): offset basis 0xcbf29ce484222325.
uint64_t referenceFnv1a(const std::string& bytes, uint64_t h = 0xcbf29ce484222325ull) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

class WeightsChecks : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mirrorlab_wchecks_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    model_.initialize(4);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  static std::string readAll(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  static void writeAll(const std::string& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }
  std::string loadError(const std::string& p) {
    try {
      loadWeights(model_, p);
    } catch (const UserError& e) {
      return e.what();
    }
    return "";
  }
  // The file's fields: architecture length, parameter bytes and where they start.
  struct Layout {
    uint32_t len;
    size_t paramsAt, paramBytes;
  };
  static Layout layout(const std::string& bytes) {
    Layout l{};
    std::memcpy(&l.len, bytes.data() + 12, 4);
    uint64_t count = 0;
    std::memcpy(&count, bytes.data() + 16 + l.len, 8);
    l.paramsAt = 24 + l.len;
    l.paramBytes = count * 4;
    return l;
  }
  static void putChecksum(std::string& bytes, uint64_t sum) { std::memcpy(bytes.data() + bytes.size() - 8, &sum, 8); }

  fs::path dir_;
  Sequential model_{test::modelSpec({3}, {test::dense(5, "relu"), test::dense(2, "softmax")})};
};

TEST_F(WeightsChecks, TheChecksumIsStandardFnv1a64) {
  // The published test vectors: "" -> the offset basis, "a" -> 0xaf63dc4c8601ec8c.
  EXPECT_EQ(fnv1a("", 0), kFnvOffsetBasis);
  EXPECT_EQ(kFnvOffsetBasis, 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a("a", 1), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a("foobar", 6), 0x85944171f73967e8ull);
  const uint64_t written = saveWeights(model_, path("w.mlw"));
  const std::string bytes = readAll(path("w.mlw"));
  const Layout l = layout(bytes);
  uint32_t version = 0;
  std::memcpy(&version, bytes.data() + 8, 4);
  EXPECT_EQ(version, 2u);
  uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + bytes.size() - 8, 8);
  EXPECT_EQ(stored, written);
  EXPECT_EQ(stored, referenceFnv1a(bytes.substr(l.paramsAt, l.paramBytes)));
}

TEST_F(WeightsChecks, VersionOneFilesWithTheOldBasisStillLoad) {
  saveWeights(model_, path("w.mlw"));
  std::string bytes = readAll(path("w.mlw"));
  const Layout l = layout(bytes);
  const std::string params = bytes.substr(l.paramsAt, l.paramBytes);
  const uint32_t one = 1;
  std::memcpy(bytes.data() + 8, &one, 4);
  putChecksum(bytes, referenceFnv1a(params, 1469598103934665603ull));
  writeAll(path("v1.mlw"), bytes);
  Sequential other(test::modelSpec({3}, {test::dense(5, "relu"), test::dense(2, "softmax")}));
  other.initialize(9);
  loadWeights(other, path("v1.mlw"));
  EXPECT_EQ(other.checksum(), model_.checksum());
  // A version 1 file checksummed with the standard basis, or a version 2 with the old one, is damaged.
  putChecksum(bytes, referenceFnv1a(params));
  writeAll(path("v1-new.mlw"), bytes);
  EXPECT_NE(loadError(path("v1-new.mlw")).find("checksum mismatch"), std::string::npos);
  const uint32_t two = 2;
  std::memcpy(bytes.data() + 8, &two, 4);
  putChecksum(bytes, referenceFnv1a(params, 1469598103934665603ull));
  writeAll(path("v2-old.mlw"), bytes);
  EXPECT_NE(loadError(path("v2-old.mlw")).find("checksum mismatch"), std::string::npos);
  const uint32_t three = 3;
  std::memcpy(bytes.data() + 8, &three, 4);
  writeAll(path("v3.mlw"), bytes);
  EXPECT_NE(loadError(path("v3.mlw")).find("reads versions 1 to 2"), std::string::npos);
}

TEST_F(WeightsChecks, NanAndInfiniteWeightsAreRefusedNamingTheLayer) {
  saveWeights(model_, path("w.mlw"));
  const std::string good = readAll(path("w.mlw"));
  const Layout l = layout(good);
  const uint64_t before = model_.checksum();
  // Layer 1: 3x5 + 5 = 20 values; value 23 of the buffer is value 3 of layer 2.
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
    std::string bytes = good;
    std::memcpy(bytes.data() + l.paramsAt + 22 * 4, &bad, 4);
    putChecksum(bytes, referenceFnv1a(bytes.substr(l.paramsAt, l.paramBytes)));
    writeAll(path("bad.mlw"), bytes);
    const std::string msg = loadError(path("bad.mlw"));
    EXPECT_NE(msg.find("weights file '" + path("bad.mlw") + "' holds " + (std::isnan(bad) ? "NaN" : "-inf") +
                       " in layer 2 'dense_1' (Dense), value 3 of its 12"),
              std::string::npos)
        << msg;
    EXPECT_EQ(model_.checksum(), before) << "a refused file leaves the model as it was";
  }
  // Written: refused before anything reaches the disk, the old file intact.
  model_.params()[4] = std::numeric_limits<float>::infinity();
  try {
    saveWeights(model_, path("w.mlw"));
    FAIL() << "infinite weights were written";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("+inf in layer 1 'dense' (Dense), value 5 of its 20"), std::string::npos) << e.what();
  }
  EXPECT_EQ(readAll(path("w.mlw")), good);
}

TEST_F(WeightsChecks, ACorruptedCountOrSizeIsDamageNotAnotherArchitecture) {
  saveWeights(model_, path("w.mlw"));
  const std::string good = readAll(path("w.mlw"));
  const Layout l = layout(good);
  std::string bytes = good;
  const uint64_t wrong = 33;
  std::memcpy(bytes.data() + 16 + l.len, &wrong, 8);
  writeAll(path("count.mlw"), bytes);
  std::string msg = loadError(path("count.mlw"));
  EXPECT_NE(msg.find("is damaged (its parameter count 33 does not match its own architecture, which has 32 parameters)"),
            std::string::npos)
      << msg;
  EXPECT_EQ(msg.find("another architecture"), std::string::npos) << msg;
  // An architecture length past the end: refused before 60 MB are allocated for it.
  bytes = good.substr(0, 12);
  const uint32_t huge = 60u << 20;
  bytes.append(reinterpret_cast<const char*>(&huge), 4);
  bytes += "{}";
  writeAll(path("len.mlw"), bytes);
  msg = loadError(path("len.mlw"));
  EXPECT_NE(msg.find("claims 62914560 bytes of a 18-byte file"), std::string::npos) << msg;
  // Bytes after the checksum, and a file cut inside the parameters.
  writeAll(path("long.mlw"), good + "xyz");
  EXPECT_NE(loadError(path("long.mlw")).find("is damaged (32 parameters need"), std::string::npos);
  writeAll(path("short.mlw"), good.substr(0, good.size() - 12));
  EXPECT_NE(loadError(path("short.mlw")).find("is truncated (32 parameters need"), std::string::npos);
}

TEST(NonFiniteParameter, PlacesTheIndexInItsLayer) {
  const nlohmann::json arch = {{"input_shape", {2}},
                               {"layers",
                                {{{"type", "Dense"}, {"name", "a"}, {"params", 6}},
                                 {{"type", "Dropout"}, {"name", "d"}, {"params", 0}},
                                 {{"type", "Dense"}, {"name", "b"}, {"params", 4}}}}};
  std::vector<float> v(10, 1.0f);
  EXPECT_FALSE(nonFiniteParameter(arch, v));
  v[6] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(nonFiniteParameter(arch, v).value_or(""), "NaN in layer 3 'b' (Dense), value 1 of its 4");
  v[6] = 1.0f;
  v[5] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(nonFiniteParameter(arch, v).value_or(""), "+inf in layer 1 'a' (Dense), value 6 of its 6");
  // An architecture that does not cover the index still places it in the buffer.
  EXPECT_EQ(nonFiniteParameter(nlohmann::json::object(), v).value_or(""), "+inf at parameter 6 of 10");
}

}  // namespace
}  // namespace ml
