// Data that is damaged rather than wrong: one IDX label far outside the others is a damaged byte
// (not a 201st class), while real class sets (gaps, many classes, rare classes) still load; a CSV
// header naming a column twice is refused; NaN and infinite features in a predict input are
// refused; bytes such as NUL quoted in a message are escaped instead of ending it.
#include <gtest/gtest.h>

#include "DataTestUtil.h"
#include "Limits.h"
#include "data/Csv.h"
#include "data/Features.h"
#include "data/Idx.h"

namespace {

using mltest::userErrorOf;

std::vector<uint8_t> cycle(size_t n, int classes) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i % static_cast<size_t>(classes));
  return v;
}

class DamagedData : public ::testing::Test {
 protected:
  // Writes an images file of n 2x2 images and these labels; reads the pair.
  ml::Dataset read(const std::vector<uint8_t>& labels) {
    mltest::writeBytes(dir_.file("img"), mltest::idxImages(static_cast<uint32_t>(labels.size()), 2, 2), false);
    mltest::writeBytes(dir_.file("lbl"), mltest::idxLabels(labels), false);
    return ml::readIdxPair(dir_.file("img"), dir_.file("lbl"), "test");
  }
  mltest::TempDir dir_;
};

TEST_F(DamagedData, OneLabelFarOutsideTheOthersIsDamage) {
  auto labels = cycle(1000, 10);
  labels[417] = 200;
  const std::string msg = userErrorOf([&] { (void)read(labels); });
  EXPECT_NE(msg.find("labels file '" + dir_.file("lbl") +
                     "' is damaged: sample 418 has label 200, far outside the labels "
                     "0..9 of 999 of its 1000 samples"),
            std::string::npos)
      << msg;
  EXPECT_EQ(msg.find("Units"), std::string::npos) << msg;
  // Ten such bytes in 1000 (1%) are still damage; a label just past the rest (10, 25) is a class.
  for (size_t i = 0; i < 10; ++i) labels[i * 97] = 255;
  labels[417] = 9;
  EXPECT_NE(userErrorOf([&] { (void)read(labels); }).find("has label 255"), std::string::npos);
}

TEST_F(DamagedData, RealClassSetsStillLoad) {
  // 256 classes, evenly: every byte value is a class.
  EXPECT_EQ(read(cycle(2560, 256)).numClasses, 256);
  // Ten classes and one rare class just past them: a class (2 x 10 + 10 is the limit).
  auto labels = cycle(1000, 10);
  labels[3] = 25;
  EXPECT_EQ(read(labels).numClasses, 26);
  // A class far out but held by more than 1% of the samples: a class.
  labels = cycle(1000, 10);
  for (size_t i = 0; i < 20; ++i) labels[i * 50] = 200;
  EXPECT_EQ(read(labels).numClasses, 201);
  // A small set says nothing: 3 samples 0, 1 and 200 load as 201 classes (the fit check names the units).
  EXPECT_EQ(read({0, 1, 200}).numClasses, 201);
}

TEST_F(DamagedData, DuplicateCsvColumnsAreRefused) {
  mltest::writeText(dir_.file("d.csv"), "label,x,y,x\n0,1,2,3\n1,4,5,6\n");
  const std::string msg = userErrorOf([&] { (void)ml::readCsv(dir_.file("d.csv"), "label", true, false); });
  EXPECT_NE(msg.find("has two columns named 'x' (columns 2 and 4): give every column of the header row its own name"),
            std::string::npos)
      << msg;
  mltest::writeText(dir_.file("l.csv"), "label,x,label\n0,1,2\n");
  EXPECT_NE(userErrorOf([&] { (void)ml::readCsv(dir_.file("l.csv"), "label", true, false); }).find("two columns named 'label'"),
            std::string::npos);
}

TEST_F(DamagedData, NonFiniteFeaturesToPredictAreRefused) {
  mltest::writeText(dir_.file("in.csv"), "0.1,0.2\nnan,0.3\n");
  EXPECT_NE(
      userErrorOf([&] { (void)ml::readFeatures(dir_.file("in.csv")); }).find("row 2 holds 'nan', which is not a finite number"),
      std::string::npos);
  mltest::writeText(dir_.file("inf.csv"), "0.1,inf\n");
  EXPECT_NE(userErrorOf([&] { (void)ml::readFeatures(dir_.file("inf.csv")); }).find("'inf'"), std::string::npos);
}

TEST_F(DamagedData, BinaryBytesInMessagesAreEscapedNotCut) {
  mltest::writeText(dir_.file("nul.csv"), std::string("label,x\n1,ab\0cd\x1b[2J\n", 20));
  const std::string msg = userErrorOf([&] { (void)ml::readCsv(dir_.file("nul.csv"), "label", true, false); });
  EXPECT_EQ(msg.find('\0'), std::string::npos);
  EXPECT_NE(msg.find("column 'x' holds text ('ab\\x00cd\\x1B[2J'): Mirrorlab reads numbers only. Drop the column 'x'"),
            std::string::npos)
      << msg;
  // clipText escapes and still cuts long values, counting the original characters.
  EXPECT_EQ(ml::clipText(std::string("a\0b\n", 4)), "a\\x00b\\x0A");
  const std::string cut = ml::clipText(std::string(100, '\0'), 10);
  EXPECT_EQ(cut, "\\x00\\x00\\x00... (100 characters)");
  // A UTF-8 character is never cut in half.
  EXPECT_EQ(ml::clipText("ééééé", 3), "é... (10 characters)");
}

}  // namespace
