// .npz archives: what Mirrorlab writes, numpy reads bit for bit (stored and deflated); what numpy
// writes (np.savez, np.savez_compressed, zip64 entries), Mirrorlab reads; a model's weights by
// name reproduce its forward pass in numpy; damaged and mismatched files are refused.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "Error.h"
#include "LearnTestUtil.h"
#include "NnTestUtil.h"
#include "export/NpzFile.h"
#include "export/WeightsNpz.h"
#include "nn/Sequential.h"

using namespace ml;
using namespace mltest;

namespace {

bool haveNumpy(std::string* why) {
  const CommandResult r = runCommand(std::string(kPython) + " -c 'import numpy'");
  if (r.exitCode != 0)
    *why = "numpy is not installed for " + std::string(kPython) + " (Debian package python3-numpy): " + r.output;
  return r.exitCode == 0;
}

std::string hexOf(const std::vector<float>& v) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  const auto* p = reinterpret_cast<const unsigned char*>(v.data());
  for (size_t i = 0; i < v.size() * 4; ++i) s += std::string{digits[p[i] >> 4], digits[p[i] & 15]};
  return s;
}

std::vector<NpyArray> sampleArrays() {
  std::vector<NpyArray> a;
  a.push_back({"dense_1/kernel", {3, 4}, test::randomVector(12, 1)});
  a.push_back({"dense_1/bias", {4}, test::randomVector(4, 2)});
  a.push_back({"scalar", {}, {3.25f}});
  a.push_back({"empty", {0, 5}, {}});
  a[0].data[5] = -0.0f;
  a[0].data[7] = 1e-42f;  // a denormal survives too
  return a;
}

}  // namespace

TEST(NpzFile, NumpyReadsWhatMirrorlabWritesBitForBit) {
  std::string why;
  if (!haveNumpy(&why)) GTEST_SKIP() << why;
  TempDir dir("npz");
  const auto arrays = sampleArrays();
  for (NpzCompression c : {NpzCompression::Stored, NpzCompression::Deflated}) {
    const auto file = dir.path() / (c == NpzCompression::Stored ? "stored.npz" : "deflated.npz");
    writeNpz(file.string(), arrays, c);
    writeFile(dir.path() / "read.py",
              "import sys, numpy as np\n"
              "with np.load(sys.argv[1]) as z:\n"
              "    for k in z.files:\n"
              "        a = z[k]\n"
              "        print(k, a.dtype.str, ','.join(map(str, a.shape)), a.tobytes().hex())\n");
    const CommandResult r = runCommand(std::string(kPython) + " " + (dir.path() / "read.py").string() + " " + file.string());
    ASSERT_EQ(r.exitCode, 0) << r.output;
    std::istringstream lines(r.output);
    for (const auto& a : arrays) {
      std::string name, dtype, shape, hex;
      lines >> name >> dtype;
      // An empty shape prints as an empty field: read the rest of the line by hand.
      std::string rest;
      std::getline(lines, rest);
      std::istringstream rs(rest);
      std::vector<std::string> fields;
      for (std::string f; rs >> f;) fields.push_back(f);
      std::string wantShape;
      for (size_t i = 0; i < a.shape.size(); ++i) wantShape += (i ? "," : "") + std::to_string(a.shape[i]);
      EXPECT_EQ(name, a.name);
      EXPECT_EQ(dtype, "<f4");
      if (a.shape.empty() || a.data.empty()) {
        ASSERT_EQ(fields.size(), 1u) << rest;
        EXPECT_EQ(fields[0], a.shape.empty() ? hexOf(a.data) : wantShape) << a.name;
      } else {
        ASSERT_EQ(fields.size(), 2u) << rest;
        EXPECT_EQ(fields[0], wantShape) << a.name;
        EXPECT_EQ(fields[1], hexOf(a.data)) << a.name;
      }
    }
  }
  // Deflate really compresses: a kernel of zeros shrinks far below its raw size.
  writeNpz((dir.path() / "zeros.npz").string(), {{"z", {256, 256}, std::vector<float>(65536, 0.0f)}});
  EXPECT_LT(std::filesystem::file_size(dir.path() / "zeros.npz"), 4096u);
}

TEST(NpzFile, MirrorlabReadsWhatNumpyWrites) {
  std::string why;
  if (!haveNumpy(&why)) GTEST_SKIP() << why;
  TempDir dir("npz-numpy");
  for (const char* fn : {"savez", "savez_compressed"}) {
    const auto file = dir.path() / (std::string(fn) + ".npz");
    const CommandResult r = runCommand(std::string(kPython) + " -c 'import numpy as np; np." + fn + "(\"" + file.string() +
                                       "\", **{\"a/kernel\": np.arange(6, dtype=np.float32).reshape(2, 3) / 7, "
                                       "\"b\": np.array([1.5, -2.25], dtype=np.float64)})'");
    ASSERT_EQ(r.exitCode, 0) << r.output;
    const auto arrays = readNpz(file.string());
    ASSERT_EQ(arrays.size(), 2u) << fn;
    EXPECT_EQ(arrays[0].name, "a/kernel");
    EXPECT_EQ(arrays[0].shape, (std::vector<int64_t>{2, 3}));
    for (int i = 0; i < 6; ++i) EXPECT_EQ(arrays[0].data[static_cast<size_t>(i)], static_cast<float>(i) / 7.0f) << fn;
    EXPECT_EQ(arrays[1].shape, (std::vector<int64_t>{2}));
    EXPECT_EQ(arrays[1].data, (std::vector<float>{1.5f, -2.25f}));
  }
}

TEST(NpzFile, ModelWeightsReproduceTheForwardPassInNumpy) {
  std::string why;
  if (!haveNumpy(&why)) GTEST_SKIP() << why;
  TempDir dir("npz-model");
  Sequential model(
      test::modelSpec({2, 3}, {test::layerSpec("Flatten"), test::dense(5, "relu"),
                               test::layerSpec("Dense", {{"units", 3}, {"use_bias", false}}), test::dense(2, "linear")}));
  model.initialize(7);
  const auto arrays = weightArrays(model);
  std::vector<std::string> names;
  for (const auto& a : arrays) names.push_back(a.name);
  EXPECT_EQ(names, (std::vector<std::string>{"dense/kernel", "dense/bias", "dense_1/kernel", "dense_2/kernel", "dense_2/bias"}));
  const auto file = dir.path() / "w.npz";
  saveWeightsNpz(model, file.string());
  const std::vector<float> x = test::randomVector(4 * 6, 3);
  const float* y = model.forward(x.data(), 4, StepContext{});
  writeNpz((dir.path() / "x.npz").string(), {{"x", {4, 2, 3}, x}});
  writeFile(dir.path() / "fwd.py",
            "import sys, numpy as np\n"
            "w, x = np.load(sys.argv[1]), np.load(sys.argv[2])['x'].reshape(4, -1).astype(np.float64)\n"
            "h = np.maximum(x @ w['dense/kernel'] + w['dense/bias'], 0)\n"
            "h = h @ w['dense_1/kernel']\n"
            "print(' '.join(repr(float(v)) for v in (h @ w['dense_2/kernel'] + w['dense_2/bias']).ravel()))\n");
  const CommandResult r = runCommand(std::string(kPython) + " " + (dir.path() / "fwd.py").string() + " " + file.string() + " " +
                                     (dir.path() / "x.npz").string());
  ASSERT_EQ(r.exitCode, 0) << r.output;
  std::istringstream in(r.output);
  for (int i = 0; i < 8; ++i) {
    double v = 0;
    ASSERT_TRUE(in >> v) << r.output;
    EXPECT_NEAR(y[i], v, 1e-5 * (1 + std::abs(v))) << i;
  }
  // Round trip into a fresh model: the same bits.
  Sequential other(model.spec());
  other.initialize(99);
  loadWeightsNpz(other, file.string());
  EXPECT_EQ(other.checksum(), model.checksum());
}

TEST(NpzFile, RefusesDamagedAndMismatchedFiles) {
  TempDir dir("npz-bad");
  Sequential model(test::modelSpec({3}, {test::dense(4, "relu"), test::dense(2, "linear")}));
  model.initialize(1);
  const std::string good = (dir.path() / "w.npz").string();
  writeNpz(good, weightArrays(model), NpzCompression::Stored);
  auto message = [&](const std::string& path) {
    try {
      loadWeightsNpz(model, path);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  // One flipped byte in the data: the CRC names it.
  std::string bytes;
  {
    std::ifstream in(good, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  bytes[200] = static_cast<char>(bytes[200] ^ 0x40);
  const std::string bad = (dir.path() / "bad.npz").string();
  std::ofstream(bad, std::ios::binary) << bytes;
  EXPECT_NE(message(bad).find("CRC-32"), std::string::npos) << message(bad);
  // Another architecture: the array and both shapes are named.
  Sequential wider(test::modelSpec({3}, {test::dense(5, "relu"), test::dense(2, "linear")}));
  saveWeightsNpz(wider, (dir.path() / "wider.npz").string());
  EXPECT_NE(message((dir.path() / "wider.npz").string()).find("'dense/kernel' in npz file"), std::string::npos);
  EXPECT_NE(message((dir.path() / "wider.npz").string()).find("has shape (3, 5) but the model needs (3, 4)"), std::string::npos);
  EXPECT_NE(message((dir.path() / "missing.npz").string()).find("cannot open"), std::string::npos);
  std::ofstream(dir.path() / "text.npz") << "not a zip";
  EXPECT_NE(message((dir.path() / "text.npz").string())
                .find("npz file '" + (dir.path() / "text.npz").string() + "' is not a zip archive"),
            std::string::npos);
  EXPECT_THROW(writeNpz(good, {{"a", {2, 2}, {1.0f}}}), UserError);
  EXPECT_THROW(writeNpz(good, {{"a", {1}, {1.0f}}, {"a", {1}, {2.0f}}}), UserError);
  EXPECT_NO_THROW(loadWeightsNpz(model, good));  // the failed writes left the good file intact
}
