// CSV reading: values, standardisation, the classification rule of loadData, and the errors a
// hand-edited file produces (missing label column, bad cell, ragged row).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>

#include "DataTestUtil.h"
#include "data/Csv.h"
#include "data/Dataset.h"

using mltest::TempDir;
using mltest::userErrorOf;
using mltest::writeText;

TEST(Csv, ReadsValuesQuotesCrlfAndTrailingBlankLines) {
  TempDir dir;
  writeText(dir.file("a.csv"), "x1,\"label\",x2\r\n1.5,2,\"-3\"\r\n4,0,5e-1\r\n\r\n\n");
  const ml::Dataset d = ml::readCsv(dir.file("a.csv"), "label", true, false);
  EXPECT_EQ(d.size, 2);
  EXPECT_EQ(d.sampleShape, (ml::Shape{2}));
  EXPECT_EQ(d.x, (std::vector<float>{1.5f, -3.0f, 4.0f, 0.5f}));
  EXPECT_EQ(d.y, (std::vector<float>{2.0f, 0.0f}));
  EXPECT_EQ(d.numClasses, 3);
}

TEST(Csv, RegressionKeepsRealLabels) {
  TempDir dir;
  writeText(dir.file("r.csv"), "a,y\n1,0.25\n2,-1.5\n");
  const ml::Dataset d = ml::readCsv(dir.file("r.csv"), "y", false, false);
  EXPECT_EQ(d.numClasses, 0);
  EXPECT_EQ(d.y, (std::vector<float>{0.25f, -1.5f}));
}

TEST(Csv, StandardizeGivesZeroMeanUnitStd) {
  TempDir dir;
  std::string text = "a,b,label,c\n";
  for (int i = 0; i < 50; ++i)
    text += std::to_string(1000 + i * 3) + "," + std::to_string(i % 7 - 2.5) + "," + std::to_string(i % 2) + ",4\n";
  writeText(dir.file("s.csv"), text);
  const ml::Dataset d = ml::readCsv(dir.file("s.csv"), "label", true, true);
  ASSERT_EQ(d.featureCount(), 3);
  for (int j = 0; j < 2; ++j) {
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < d.size; ++i) sum += d.sample(i)[j];
    const double mean = sum / static_cast<double>(d.size);
    for (int64_t i = 0; i < d.size; ++i) sq += (d.sample(i)[j] - mean) * (d.sample(i)[j] - mean);
    EXPECT_NEAR(mean, 0.0, 1e-5) << "column " << j;
    EXPECT_NEAR(std::sqrt(sq / static_cast<double>(d.size)), 1.0, 1e-5) << "column " << j;
  }
  for (int64_t i = 0; i < d.size; ++i) EXPECT_EQ(d.sample(i)[2], 0.0f);  // constant column
}

TEST(Csv, MissingLabelColumnListsColumns) {
  TempDir dir;
  writeText(dir.file("m.csv"), "alpha,beta\n1,2\n");
  const std::string msg = userErrorOf([&] { ml::readCsv(dir.file("m.csv"), "label", true, false); });
  EXPECT_NE(msg.find(dir.file("m.csv")), std::string::npos) << msg;
  EXPECT_NE(msg.find("'label'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("alpha, beta"), std::string::npos) << msg;
}

TEST(Csv, NonNumericCellNamesRowAndColumn) {
  TempDir dir;
  writeText(dir.file("n.csv"), "label,width,height\n1,2,3\n0,abc,5\n");
  const std::string msg = userErrorOf([&] { ml::readCsv(dir.file("n.csv"), "label", false, false); });
  EXPECT_NE(msg.find(dir.file("n.csv")), std::string::npos) << msg;
  EXPECT_NE(msg.find("row 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'width'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("abc"), std::string::npos) << msg;

  EXPECT_NE(msg.find("'abc' is not a number. Fix the cell or remove the row"), std::string::npos) << msg;

  // An empty cell says so (it read "'' is not a number").
  writeText(dir.file("e.csv"), "label,width\n1,\n");
  EXPECT_EQ(userErrorOf([&] { ml::readCsv(dir.file("e.csv"), "label", false, false); }),
            "CSV file '" + dir.file("e.csv") +
                "', row 2, column 'width' is empty: fill it in (every cell needs a number) or "
                "remove the row");
}

// A column of text (names, categories) is dropped, not fixed row by row.
TEST(Csv, ATextColumnIsToBeDroppedNotFixedRowByRow) {
  TempDir dir;
  writeText(dir.file("t.csv"), "name,age,label\nAlice,31,1\nBob,45,0\nCarol,,1\n");
  std::string msg = userErrorOf([&] { ml::readCsv(dir.file("t.csv"), "label", false, false); });
  EXPECT_EQ(msg, "CSV file '" + dir.file("t.csv") +
                     "', row 2, column 'name' holds text ('Alice' and 2 more): Mirrorlab reads numbers only. Drop the column "
                     "'name' from the file, or turn its values into numbers");
  writeText(dir.file("l.csv"), "x,species\n1.5,setosa\n2.5,virginica\n");
  msg = userErrorOf([&] { ml::readCsv(dir.file("l.csv"), "species", true, false); });
  EXPECT_NE(msg.find("is the label column and holds text ('setosa'): Mirrorlab needs class numbers 0, 1, 2"), std::string::npos)
      << msg;
}

TEST(Csv, RaggedRowIsAnError) {
  TempDir dir;
  writeText(dir.file("g.csv"), "label,a,b\n1,2,3\n1,2\n");
  const std::string msg = userErrorOf([&] { ml::readCsv(dir.file("g.csv"), "label", false, false); });
  EXPECT_NE(msg.find(dir.file("g.csv")), std::string::npos) << msg;
  EXPECT_NE(msg.find("row 3"), std::string::npos) << msg;
}

TEST(Csv, ClassificationRejectsFractionalLabel) {
  TempDir dir;
  writeText(dir.file("f.csv"), "label,a\n1,2\n0.5,3\n");
  const std::string msg = userErrorOf([&] { ml::readCsv(dir.file("f.csv"), "label", true, false); });
  EXPECT_NE(msg.find("row 3"), std::string::npos) << msg;
}

TEST(Csv, EmptyAndMissingFiles) {
  TempDir dir;
  writeText(dir.file("empty.csv"), "");
  writeText(dir.file("hdr.csv"), "label,a\n");
  EXPECT_NE(userErrorOf([&] { ml::readCsv(dir.file("empty.csv"), "label", true, false); }).find("empty.csv"), std::string::npos);
  EXPECT_NE(userErrorOf([&] { ml::readCsv(dir.file("hdr.csv"), "label", true, false); }).find("hdr.csv"), std::string::npos);
  EXPECT_NE(userErrorOf([&] { ml::readCsv(dir.file("nope.csv"), "label", true, false); }).find("nope.csv"), std::string::npos);
}

TEST(Csv, ClassLabelRule) {
  EXPECT_TRUE(ml::looksLikeClassLabels({0, 1, 2, 2, 7}));
  EXPECT_FALSE(ml::looksLikeClassLabels({0, 1.5f}));
  EXPECT_FALSE(ml::looksLikeClassLabels({0, -1}));
  std::vector<float> many(1001);
  for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<float>(i);
  EXPECT_FALSE(ml::looksLikeClassLabels(many));
  many.pop_back();
  EXPECT_TRUE(ml::looksLikeClassLabels(many));
}

TEST(Csv, LoadDataDecidesTaskAndStandardizesWithTrainStats) {
  TempDir dir;
  writeText(dir.file("train.csv"), "a,label\n0,0\n2,1\n4,2\n6,1\n");
  writeText(dir.file("test.csv"), "a,label\n3,3\n");
  ml::DataSpec spec;
  spec.kind = ml::DataKind::Csv;
  spec.path = dir.file("train.csv");
  spec.testPath = dir.file("test.csv");
  spec.standardize = true;
  const ml::DataSplit s = ml::loadData(spec);
  EXPECT_EQ(s.train.numClasses, 4);
  ASSERT_TRUE(s.validation.has_value());
  EXPECT_EQ(s.validation->numClasses, 4);
  // train mean 3, std sqrt(5): the test value 3 maps to 0 with the train statistics.
  EXPECT_NEAR(s.validation->x[0], 0.0f, 1e-6);
  EXPECT_NEAR(s.train.x[0], -3.0 / std::sqrt(5.0), 1e-6);

  writeText(dir.file("reg.csv"), "a,label\n0,0.5\n2,1\n");
  spec.path = dir.file("reg.csv");
  spec.testPath.clear();
  EXPECT_EQ(ml::loadData(spec).train.numClasses, 0);
}

TEST(Csv, LoadDataHoldsOutValidationShare) {
  TempDir dir;
  std::string text = "a,label\n";
  for (int i = 0; i < 40; ++i) text += std::to_string(i) + "," + std::to_string(i % 2) + "\n";
  writeText(dir.file("t.csv"), text);
  ml::DataSpec spec;
  spec.kind = ml::DataKind::Csv;
  spec.path = dir.file("t.csv");
  spec.validationSplit = 0.25;
  const ml::DataSplit s = ml::loadData(spec);
  EXPECT_EQ(s.train.size, 30);
  ASSERT_TRUE(s.validation.has_value());
  EXPECT_EQ(s.validation->size, 10);
}
