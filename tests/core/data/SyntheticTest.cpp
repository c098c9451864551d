// Synthetic sets and the validation split: sizes, label ranges, and bit-exact determinism by seed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include "DataTestUtil.h"
#include "data/Dataset.h"
#include "data/Synthetic.h"

using mltest::userErrorOf;

namespace {

bool sameBytes(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST(Synthetic, SpiralsShapeLabelsAndRadius) {
  const ml::Dataset d = ml::makeSpirals(301, 3, 0.2, 7);
  EXPECT_EQ(d.size, 301);
  EXPECT_EQ(d.sampleShape, (ml::Shape{2}));
  EXPECT_EQ(d.numClasses, 3);
  ASSERT_EQ(d.x.size(), 602u);
  ASSERT_EQ(d.y.size(), 301u);
  int count[3] = {0, 0, 0};
  double maxR = 0;
  for (int64_t i = 0; i < d.size; ++i) {
    const float y = d.target(i)[0];
    ASSERT_TRUE(y == 0 || y == 1 || y == 2);
    ++count[static_cast<int>(y)];
    maxR = std::max(maxR, std::hypot(double{d.sample(i)[0]}, double{d.sample(i)[1]}));
  }
  EXPECT_EQ(count[0], 101);
  EXPECT_EQ(count[1], 100);
  EXPECT_EQ(count[2], 100);
  EXPECT_LE(maxR, 1.0 + 1e-6);
  EXPECT_GT(maxR, 0.99);  // the arms reach the unit circle
}

TEST(Synthetic, BlobsShapeLabelsAndSpread) {
  const ml::Dataset d = ml::makeBlobs(2000, 4, 5, 0.5, 3);
  EXPECT_EQ(d.size, 2000);
  EXPECT_EQ(d.sampleShape, (ml::Shape{5}));
  EXPECT_EQ(d.numClasses, 4);
  ASSERT_EQ(d.x.size(), 10000u);
  // Per class, the spread around the class mean is close to the requested std.
  for (int c = 0; c < 4; ++c) {
    std::vector<double> mean(5, 0.0);
    int n = 0;
    for (int64_t i = 0; i < d.size; ++i)
      if (d.target(i)[0] == c) {
        ++n;
        for (int f = 0; f < 5; ++f) mean[f] += d.sample(i)[f];
      }
    ASSERT_EQ(n, 500);
    double sq = 0;
    for (int f = 0; f < 5; ++f) {
      mean[f] /= n;
      EXPECT_GE(mean[f], -5.2);
      EXPECT_LE(mean[f], 5.2);
    }
    for (int64_t i = 0; i < d.size; ++i)
      if (d.target(i)[0] == c)
        for (int f = 0; f < 5; ++f) sq += (d.sample(i)[f] - mean[f]) * (d.sample(i)[f] - mean[f]);
    EXPECT_NEAR(std::sqrt(sq / (n * 5)), 0.5, 0.05) << "class " << c;
  }
}

TEST(Synthetic, DeterministicBySeed) {
  EXPECT_TRUE(sameBytes(ml::makeSpirals(500, 3, 0.3, 11).x, ml::makeSpirals(500, 3, 0.3, 11).x));
  EXPECT_FALSE(sameBytes(ml::makeSpirals(500, 3, 0.3, 11).x, ml::makeSpirals(500, 3, 0.3, 12).x));
  EXPECT_TRUE(sameBytes(ml::makeBlobs(500, 3, 4, 1.0, 11).x, ml::makeBlobs(500, 3, 4, 1.0, 11).x));
  EXPECT_FALSE(sameBytes(ml::makeBlobs(500, 3, 4, 1.0, 11).x, ml::makeBlobs(500, 3, 4, 1.0, 12).x));
}

TEST(Synthetic, BadArgumentsNameTheField) {
  EXPECT_NE(userErrorOf([] {
              ml::makeSpirals(100, 0, 0.1, 1);
            }).find("Data screen › Classes (classes in the file's data section) is 0"),
            std::string::npos);
  EXPECT_NE(userErrorOf([] {
              ml::makeSpirals(2, 3, 0.1, 1);
            }).find("Data screen › Samples (samples in the file's data section) is 2: it must be at least Classes (3)"),
            std::string::npos);
  EXPECT_NE(userErrorOf([] {
              ml::makeBlobs(100, 2, 0, 0.1, 1);
            }).find("Data screen › Features (features in the file's data section) is 0"),
            std::string::npos);
  EXPECT_NE(userErrorOf([] {
              ml::makeBlobs(100, 2, 2, -1.0, 1);
            }).find("Data screen › Noise (noise in the file's data section) must be"),
            std::string::npos);
}

TEST(Synthetic, LoadDataKindsAndUnknownKind) {
  ml::DataSpec spec;
  spec.kind = ml::DataKind::Blobs;
  spec.samples = 200;
  spec.classes = 2;
  spec.features = 3;
  const ml::DataSplit s = ml::loadData(spec);
  EXPECT_EQ(s.train.size, 200);
  EXPECT_EQ(s.train.featureCount(), 3);
  EXPECT_FALSE(s.validation.has_value());

  spec.kind = ml::DataKind::Spirals;
  spec.validationSplit = 0.2;
  const ml::DataSplit t = ml::loadData(spec);
  EXPECT_EQ(t.train.size, 160);
  ASSERT_TRUE(t.validation.has_value());
  EXPECT_EQ(t.validation->size, 40);

  // The names are the file's; an unknown one is no kind (the project reader refuses it by field).
  for (const char* name : {"fashion-mnist", "idx", "csv", "spirals", "blobs"}) {
    ASSERT_TRUE(ml::dataKindNamed(name).has_value()) << name;
    EXPECT_STREQ(ml::toString(*ml::dataKindNamed(name)), name);
  }
  EXPECT_FALSE(ml::dataKindNamed("mnist-ish").has_value());
}

TEST(Synthetic, SplitValidationPartitionsAndIsKeyedBySeed) {
  ml::Dataset all;
  all.name = "ramp";
  all.sampleShape = {1};
  all.size = 100;
  all.numClasses = 0;
  for (int i = 0; i < 100; ++i) {
    all.x.push_back(static_cast<float>(i));
    all.y.push_back(static_cast<float>(2 * i));
  }
  const ml::DataSplit a = ml::splitValidation(all, 0.3, 5);
  ASSERT_TRUE(a.validation.has_value());
  EXPECT_EQ(a.train.size, 70);
  EXPECT_EQ(a.validation->size, 30);
  std::set<float> seen;
  for (const ml::Dataset* d : {&a.train, &*a.validation})
    for (int64_t i = 0; i < d->size; ++i) {
      EXPECT_EQ(d->target(i)[0], 2 * d->sample(i)[0]);  // features and targets stay paired
      seen.insert(d->sample(i)[0]);
    }
  EXPECT_EQ(seen.size(), 100u);  // a partition: nothing lost, nothing doubled
  EXPECT_EQ(ml::splitValidation(all, 0.3, 5).validation->x, a.validation->x);
  EXPECT_NE(ml::splitValidation(all, 0.3, 6).validation->x, a.validation->x);
  EXPECT_FALSE(ml::splitValidation(all, 0.0, 5).validation.has_value());
  const std::string whole = userErrorOf([&] { ml::splitValidation(all, 1.0, 5); });
  EXPECT_NE(whole.find("Data screen › Validation split (validation_split in the file's data section) is 1: it must be at least 0 "
                       "and below 1"),
            std::string::npos)
      << whole;
}
