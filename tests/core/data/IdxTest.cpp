// IDX reading: good files (gzip and raw) give the written values; every kind of damage throws a
// UserError naming the file; the real Fashion-MNIST loads when installed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "DataTestUtil.h"
#include "data/Dataset.h"
#include "data/Idx.h"

using mltest::idxImages;
using mltest::idxLabels;
using mltest::TempDir;
using mltest::userErrorOf;
using mltest::writeBytes;

class IdxRoundTrip : public ::testing::TestWithParam<bool> {};

TEST_P(IdxRoundTrip, ReadsPixelsAndLabels) {
  TempDir dir;
  const bool gzip = GetParam();
  const std::string img = dir.file("img"), lbl = dir.file("lbl");
  writeBytes(img, idxImages(5, 3, 4), gzip);
  writeBytes(lbl, idxLabels({0, 3, 1, 3, 2}), gzip);
  const ml::Dataset d = ml::readIdxPair(img, lbl, "tiny");
  EXPECT_EQ(d.name, "tiny");
  EXPECT_EQ(d.size, 5);
  EXPECT_EQ(d.sampleShape, (ml::Shape{3, 4, 1}));
  EXPECT_EQ(d.targetDim, 1);
  EXPECT_EQ(d.numClasses, 4);
  EXPECT_TRUE(d.classNames.empty());
  ASSERT_EQ(d.x.size(), 60u);
  for (int i = 0; i < 5; ++i)
    for (int k = 0; k < 12; ++k) EXPECT_FLOAT_EQ(d.sample(i)[k], static_cast<float>((i * 7 + k) % 256) / 255.0f);
  EXPECT_EQ(d.y, (std::vector<float>{0, 3, 1, 3, 2}));
}

INSTANTIATE_TEST_SUITE_P(GzipAndRaw, IdxRoundTrip, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "Gzip" : "Raw"; });

TEST(Idx, FullPixelRangeMapsToZeroOne) {
  TempDir dir;
  std::string img;
  mltest::putBe32(img, 0x803);
  mltest::putBe32(img, 1);
  mltest::putBe32(img, 1);
  mltest::putBe32(img, 256);
  for (int v = 0; v < 256; ++v) img.push_back(static_cast<char>(v));
  writeBytes(dir.file("i"), img, true);
  writeBytes(dir.file("l"), idxLabels({9}), true);
  const ml::Dataset d = ml::readIdxPair(dir.file("i"), dir.file("l"), "range");
  EXPECT_EQ(*std::min_element(d.x.begin(), d.x.end()), 0.0f);
  EXPECT_EQ(*std::max_element(d.x.begin(), d.x.end()), 1.0f);
  EXPECT_EQ(d.numClasses, 10);
}

TEST(Idx, FashionNameGivesClassNames) {
  TempDir dir;
  writeBytes(dir.file("i"), idxImages(3, 2, 2), false);
  writeBytes(dir.file("l"), idxLabels({0, 1, 2}), false);
  const ml::Dataset d = ml::readIdxPair(dir.file("i"), dir.file("l"), "Fashion-MNIST train");
  EXPECT_EQ(d.numClasses, 10);
  ASSERT_EQ(d.classNames.size(), 10u);
  EXPECT_EQ(d.classNames[0], "T-shirt/top");
  EXPECT_EQ(d.classNames[9], "Ankle boot");
}

TEST(Idx, BadMagicNamesFile) {
  TempDir dir;
  writeBytes(dir.file("img"), idxImages(2, 2, 2, 0x00000801u), true);
  writeBytes(dir.file("lbl"), idxLabels({0, 1}), true);
  const std::string msg = userErrorOf([&] { ml::readIdxPair(dir.file("img"), dir.file("lbl"), "x"); });
  EXPECT_NE(msg.find(dir.file("img")), std::string::npos) << msg;
  EXPECT_NE(msg.find("magic"), std::string::npos) << msg;

  writeBytes(dir.file("img2"), idxImages(2, 2, 2), true);
  writeBytes(dir.file("lbl2"), idxLabels({0, 1}, 0x00000803u), true);
  const std::string msg2 = userErrorOf([&] { ml::readIdxPair(dir.file("img2"), dir.file("lbl2"), "x"); });
  EXPECT_NE(msg2.find(dir.file("lbl2")), std::string::npos) << msg2;
}

TEST(Idx, TruncatedDataNamesFile) {
  for (bool gzip : {true, false}) {
    TempDir dir;
    std::string img = idxImages(4, 3, 3);
    img.resize(img.size() - 5);
    writeBytes(dir.file("img"), img, gzip);
    writeBytes(dir.file("lbl"), idxLabels({0, 1, 2, 3}), gzip);
    const std::string msg = userErrorOf([&] { ml::readIdxPair(dir.file("img"), dir.file("lbl"), "x"); });
    EXPECT_NE(msg.find(dir.file("img")), std::string::npos) << msg;
    EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;

    std::string lbl = idxLabels({0, 1, 2, 3});
    lbl.pop_back();
    writeBytes(dir.file("img"), idxImages(4, 3, 3), gzip);
    writeBytes(dir.file("lbl"), lbl, gzip);
    const std::string msg2 = userErrorOf([&] { ml::readIdxPair(dir.file("img"), dir.file("lbl"), "x"); });
    EXPECT_NE(msg2.find(dir.file("lbl")), std::string::npos) << msg2;
    EXPECT_NE(msg2.find("truncated"), std::string::npos) << msg2;
  }
}

TEST(Idx, TruncatedHeaderAndEmptyFile) {
  TempDir dir;
  writeBytes(dir.file("img"), idxImages(2, 2, 2).substr(0, 10), false);
  writeBytes(dir.file("empty"), "", false);
  writeBytes(dir.file("lbl"), idxLabels({0, 1}), false);
  EXPECT_NE(userErrorOf([&] { ml::readIdxPair(dir.file("img"), dir.file("lbl"), "x"); }).find(dir.file("img")),
            std::string::npos);
  EXPECT_NE(userErrorOf([&] { ml::readIdxPair(dir.file("empty"), dir.file("lbl"), "x"); }).find(dir.file("empty")),
            std::string::npos);
}

TEST(Idx, DamagedGzipNamesFile) {
  TempDir dir;
  writeBytes(dir.file("img.gz"), idxImages(50, 8, 8), true);
  std::string bytes;
  {
    std::ifstream in(dir.file("img.gz"), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes.resize(bytes.size() / 2);  // cut the deflate stream in the middle
  writeBytes(dir.file("img.gz"), bytes, false);
  writeBytes(dir.file("lbl"), idxLabels(std::vector<uint8_t>(50, 1)), false);
  const std::string msg = userErrorOf([&] { ml::readIdxPair(dir.file("img.gz"), dir.file("lbl"), "x"); });
  EXPECT_NE(msg.find(dir.file("img.gz")), std::string::npos) << msg;
}

TEST(Idx, CountMismatchNamesBothFiles) {
  TempDir dir;
  writeBytes(dir.file("img"), idxImages(3, 2, 2), true);
  writeBytes(dir.file("lbl"), idxLabels({0, 1}), true);
  const std::string msg = userErrorOf([&] { ml::readIdxPair(dir.file("img"), dir.file("lbl"), "x"); });
  EXPECT_NE(msg.find(dir.file("img")), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir.file("lbl")), std::string::npos) << msg;
  EXPECT_NE(msg.find('3'), std::string::npos) << msg;
}

TEST(Idx, MissingFileNamesFile) {
  TempDir dir;
  writeBytes(dir.file("lbl"), idxLabels({0}), true);
  const std::string missing = dir.file("does-not-exist.gz");
  const std::string msg = userErrorOf([&] { ml::readIdxPair(missing, dir.file("lbl"), "x"); });
  EXPECT_NE(msg.find(missing), std::string::npos) << msg;
}

TEST(Idx, LoadDataIdxKindWithTestSet) {
  TempDir dir;
  writeBytes(dir.file("ti"), idxImages(6, 2, 3), true);
  writeBytes(dir.file("tl"), idxLabels({0, 1, 2, 0, 1, 2}), true);
  writeBytes(dir.file("vi"), idxImages(2, 2, 3), false);
  writeBytes(dir.file("vl"), idxLabels({3, 0}), false);
  ml::DataSpec spec;
  spec.kind = ml::DataKind::Idx;
  spec.trainImages = dir.file("ti");
  spec.trainLabels = dir.file("tl");
  spec.testImages = dir.file("vi");
  spec.testLabels = dir.file("vl");
  const ml::DataSplit s = ml::loadData(spec);
  EXPECT_EQ(s.train.size, 6);
  ASSERT_TRUE(s.validation.has_value());
  EXPECT_EQ(s.validation->size, 2);
  EXPECT_EQ(s.train.numClasses, 4);  // the test set's top class counts too
  EXPECT_EQ(s.validation->numClasses, 4);

  spec.testLabels.clear();
  const std::string half = userErrorOf([&] { ml::loadData(spec); });
  EXPECT_NE(half.find("Data screen › Test images (test_images in the file's data section) and Data screen › Test labels "
                      "(test_labels in the file's data section) go together"),
            std::string::npos)
      << half;
  EXPECT_EQ(half.find("testLabels"), std::string::npos) << half;
}

TEST(Idx, LoadDataFashionMissingSaysHowToInstall) {
  TempDir dir;
  ml::DataSpec spec;
  spec.kind = ml::DataKind::FashionMnist;
  spec.path = dir.file("nowhere");
  const std::string msg = userErrorOf([&] { ml::loadData(spec); });
  EXPECT_NE(msg.find("Fashion-MNIST not found at " + spec.path), std::string::npos) << msg;
  EXPECT_NE(msg.find("sudo apt-get install dataset-fashion-mnist"), std::string::npos) << msg;
  EXPECT_NE(msg.find("set Data screen › Folder / Training file (path in the file's data section) to the folder"),
            std::string::npos)
      << msg;
}

TEST(Idx, RealFashionMnist) {
  if (!std::filesystem::exists(std::string(ml::kFashionMnistDir) + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST is not installed at " << ml::kFashionMnistDir
                 << " (sudo apt-get install dataset-fashion-mnist)";
  ml::DataSpec spec;  // kind fashion-mnist, default path
  const ml::DataSplit s = ml::loadData(spec);
  EXPECT_EQ(s.train.size, 60000);
  ASSERT_TRUE(s.validation.has_value());
  EXPECT_EQ(s.validation->size, 10000);
  EXPECT_EQ(s.train.sampleShape, (ml::Shape{28, 28, 1}));
  EXPECT_EQ(s.validation->sampleShape, (ml::Shape{28, 28, 1}));
  EXPECT_EQ(s.train.numClasses, 10);
  EXPECT_EQ(s.train.classNames.size(), 10u);
  const auto [lo, hi] = std::minmax_element(s.train.x.begin(), s.train.x.end());
  EXPECT_EQ(*lo, 0.0f);
  EXPECT_EQ(*hi, 1.0f);
  for (float v : s.validation->y) ASSERT_TRUE(v >= 0.0f && v <= 9.0f && v == static_cast<int>(v));
}
