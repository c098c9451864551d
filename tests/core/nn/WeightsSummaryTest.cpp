// Weights files (round trip, refusals) and the Keras-style summary.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "Error.h"
#include "NnTestUtil.h"
#include "nn/Summary.h"
#include "project/WeightsFile.h"

namespace ml {
namespace {

using test::dense;
using test::layerSpec;
using test::modelSpec;

namespace fs = std::filesystem;

ModelSpec defaultModel() { return modelSpec({28, 28}, {layerSpec("Flatten"), dense(128, "relu"), dense(10, "softmax")}); }

ModelSpec smallModel(int64_t hidden = 8) {
  return modelSpec({3, 4},
                   {layerSpec("Flatten"), dense(hidden, "relu"), layerSpec("Dropout", {{"rate", 0.2}}), dense(4, "softmax")});
}

// A fresh folder per test, removed afterwards.
class WeightsFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("mirrorlab_nn_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  static std::string readAll(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  static void writeAll(const std::string& p, const std::string& bytes) {
    std::ofstream out(p, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  static std::string loadError(Sequential& m, const std::string& p) {
    try {
      loadWeights(m, p);
    } catch (const UserError& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
};

TEST_F(WeightsFileTest, RoundTripGivesIdenticalParams) {
  Sequential a(smallModel()), b(smallModel());
  a.initialize(1);
  b.initialize(2);
  ASSERT_NE(a.checksum(), b.checksum());
  const uint64_t written = saveWeights(a, path("w.mlw"));
  EXPECT_EQ(written, a.checksum());
  loadWeights(b, path("w.mlw"));
  ASSERT_EQ(a.paramCount(), b.paramCount());
  EXPECT_EQ(std::memcmp(a.params().data(), b.params().data(), a.params().size() * sizeof(float)), 0);
  EXPECT_EQ(a.checksum(), b.checksum());
  // Saving the loaded model gives the same bytes.
  saveWeights(b, path("w2.mlw"));
  EXPECT_EQ(readAll(path("w.mlw")), readAll(path("w2.mlw")));
}

TEST_F(WeightsFileTest, FileLayoutMatchesTheHeaderComment) {
  Sequential a(smallModel());
  a.initialize(3);
  saveWeights(a, path("w.mlw"));
  const std::string bytes = readAll(path("w.mlw"));
  ASSERT_GE(bytes.size(), 16u);
  EXPECT_EQ(bytes.substr(0, 8), "MLWEIGHT");
  uint32_t version = 0, len = 0;
  std::memcpy(&version, bytes.data() + 8, 4);
  std::memcpy(&len, bytes.data() + 12, 4);
  EXPECT_EQ(version, kWeightsVersion);
  const auto arch = nlohmann::json::parse(bytes.substr(16, len));
  EXPECT_EQ(arch, architectureJson(a));
  uint64_t count = 0;
  std::memcpy(&count, bytes.data() + 16 + len, 8);
  EXPECT_EQ(count, static_cast<uint64_t>(a.paramCount()));
  EXPECT_EQ(bytes.size(), 16 + len + 8 + count * 4 + 8);
}

TEST_F(WeightsFileTest, RenamedLayersStillLoad) {
  Sequential a(smallModel());
  a.initialize(1);
  saveWeights(a, path("w.mlw"));
  ModelSpec renamed = smallModel();
  renamed.layers[1].name = "hidden";
  renamed.layers[3].name = "classes";
  Sequential b(renamed);
  EXPECT_NO_THROW(loadWeights(b, path("w.mlw")));
  EXPECT_EQ(a.checksum(), b.checksum());
}

TEST_F(WeightsFileTest, AnotherArchitectureIsRefused) {
  Sequential a(smallModel(8));
  a.initialize(1);
  saveWeights(a, path("w.mlw"));
  for (const ModelSpec& other :
       {smallModel(9), modelSpec({12}, {dense(8, "relu"), layerSpec("Dropout", {{"rate", 0.2}}), dense(4, "softmax")}),
        modelSpec({3, 4}, {layerSpec("Flatten"), dense(8, "relu"), dense(4, "softmax")})}) {
    Sequential b(other);
    b.initialize(5);
    const uint64_t before = b.checksum();
    const std::string msg = loadError(b, path("w.mlw"));
    EXPECT_NE(msg.find("another architecture"), std::string::npos) << msg;
    EXPECT_EQ(b.checksum(), before) << "a refused load must not change the parameters";
  }
}

TEST_F(WeightsFileTest, TruncatedFilesAreRefused) {
  Sequential a(smallModel());
  a.initialize(1);
  saveWeights(a, path("w.mlw"));
  const std::string bytes = readAll(path("w.mlw"));
  Sequential b(smallModel());
  // Cut in the checksum, in the parameters, in the architecture, in the header.
  for (size_t keep : {bytes.size() - 3, bytes.size() - 8 - 40, size_t{30}, size_t{10}}) {
    writeAll(path("cut.mlw"), bytes.substr(0, keep));
    const std::string msg = loadError(b, path("cut.mlw"));
    EXPECT_FALSE(msg.empty()) << "kept " << keep << " of " << bytes.size() << " bytes";
    EXPECT_TRUE(msg.find("truncated") != std::string::npos || msg.find("damaged") != std::string::npos ||
                msg.find("not a Mirrorlab weights file") != std::string::npos)
        << msg;
  }
  writeAll(path("cut.mlw"), bytes.substr(0, bytes.size() - 3));
  EXPECT_NE(loadError(b, path("cut.mlw")).find("truncated"), std::string::npos);
}

TEST_F(WeightsFileTest, FlippedParameterByteFailsTheChecksum) {
  Sequential a(smallModel());
  a.initialize(1);
  saveWeights(a, path("w.mlw"));
  std::string bytes = readAll(path("w.mlw"));
  bytes[bytes.size() - 8 - 5] ^= 0x10;  // inside the last parameter
  writeAll(path("flip.mlw"), bytes);
  Sequential b(smallModel());
  b.initialize(2);
  const uint64_t before = b.checksum();
  const std::string msg = loadError(b, path("flip.mlw"));
  EXPECT_NE(msg.find("checksum"), std::string::npos) << msg;
  EXPECT_EQ(b.checksum(), before);
}

TEST_F(WeightsFileTest, NotAWeightsFile) {
  writeAll(path("project.json"), R"({"schema_version": 1, "name": "not weights", "model": {}})");
  Sequential b(smallModel());
  const std::string msg = loadError(b, path("project.json"));
  EXPECT_NE(msg.find("not a Mirrorlab weights file"), std::string::npos) << msg;
  writeAll(path("empty.mlw"), "");
  EXPECT_NE(loadError(b, path("empty.mlw")).find("not a Mirrorlab weights file"), std::string::npos);
}

TEST_F(WeightsFileTest, NewerFormatVersionIsRefused) {
  Sequential a(smallModel());
  saveWeights(a, path("w.mlw"));
  std::string bytes = readAll(path("w.mlw"));
  bytes[8] = static_cast<char>(kWeightsVersion + 1);
  writeAll(path("newer.mlw"), bytes);
  const std::string msg = loadError(a, path("newer.mlw"));
  EXPECT_NE(msg.find("format version " + std::to_string(kWeightsVersion + 1)), std::string::npos) << msg;
}

TEST_F(WeightsFileTest, MissingFileAndUnwritableFolder) {
  Sequential a(smallModel());
  EXPECT_NE(loadError(a, path("nope.mlw")).find("cannot open"), std::string::npos);
  EXPECT_THROW(saveWeights(a, path("no/such/dir/w.mlw")), UserError);
}

// ---- Summary ----------------------------------------------------------------------------------

TEST(Summary, DefaultModelKerasNumbers) {
  Sequential m(defaultModel());
  EXPECT_EQ(m.paramCount(), 101770);  // 784 * 128 + 128 + 128 * 10 + 10
  const auto rows = m.summary();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].name, "flatten");
  EXPECT_EQ(rows[0].outputShape, (Shape{784}));
  EXPECT_EQ(rows[0].params, 0);
  EXPECT_EQ(rows[1].params, 100480);
  EXPECT_EQ(rows[2].params, 1290);
  const std::string s = formatSummary(m, "fashion", 128, 2);
  for (const char* want : {"Total params: 101,770", "Trainable params: 101,770", "Non-trainable params: 0", "(None, 784)",
                           "(None, 128)", "(None, 10)", "flatten (Flatten)", "dense (Dense)", "dense_1 (Dense)", "100,480",
                           "1,290", "Model: \"fashion\"", "397.5 KiB"})
    EXPECT_NE(s.find(want), std::string::npos) << "missing \"" << want << "\" in\n" << s;
}

TEST(Summary, HelpersFormatNumbersAndBytes) {
  EXPECT_EQ(withThousands(0), "0");
  EXPECT_EQ(withThousands(999), "999");
  EXPECT_EQ(withThousands(1000), "1,000");
  EXPECT_EQ(withThousands(101770), "101,770");
  EXPECT_EQ(withThousands(1234567), "1,234,567");
  EXPECT_EQ(withThousands(-1234), "-1,234");
  EXPECT_EQ(formatBytes(512), "512 B");
  EXPECT_EQ(formatBytes(2048), "2.0 KiB");
  EXPECT_EQ(formatBytes(3.5 * 1024 * 1024), "3.5 MiB");
  EXPECT_EQ(formatBytes(2.0 * 1024 * 1024 * 1024), "2.00 GiB");
  OptimizerSpec o;
  o.kind = ml::OptimizerKind::Adam;
  EXPECT_EQ(optimizerSlotCount(o), 2);
  o.kind = ml::OptimizerKind::Sgd;
  EXPECT_EQ(optimizerSlotCount(o), 0);
  o.momentum = 0.9;
  EXPECT_EQ(optimizerSlotCount(o), 1);
  o.kind = ml::OptimizerKind::RmsProp;
  EXPECT_EQ(optimizerSlotCount(o), 2);
}

TEST(Summary, ActivationBytesCountsOutputsAndGradients) {
  Sequential m(defaultModel());
  // Flatten is a reshape (gradient only): 784; Dense 128 and 10: output + gradient.
  EXPECT_EQ(m.activationBytes(32), 4 * 32 * (784 + 2 * 128 + 2 * 10));
}

}  // namespace
}  // namespace ml
