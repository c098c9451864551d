// loadData: turns the project's data section into train and validation sets, one branch per
// kind; every failure a user can cause says which file or field and what to do about it.
#include "data/Dataset.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <stdexcept>
#include <utility>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "Error.h"
#include "Field.h"
#include "Format.h"
#include "Names.h"
#include "data/Csv.h"
#include "data/Idx.h"
#include "data/Synthetic.h"
#include "random/Rng.h"

namespace ml {

void reserveSamples(std::vector<float>& v, size_t n) {
  v.reserve(n);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // The whole 2 MiB pages inside the allocation; nothing is touched yet, so the first writes fault
  // in huge pages. A refusal (no THP in this kernel) leaves ordinary pages: only slower.
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const auto lo = (reinterpret_cast<uintptr_t>(v.data()) + kHuge - 1) & ~(kHuge - 1);
  const auto hi = (reinterpret_cast<uintptr_t>(v.data() + v.capacity())) & ~(kHuge - 1);
  if (hi > lo) (void)madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
#endif
}

namespace {

namespace fs = std::filesystem;

// Copies the samples at `idx` (in that order) into a new set with the same description.
Dataset gather(const Dataset& all, const std::vector<int64_t>& idx, const std::string& name) {
  Dataset out;
  out.name = name;
  out.sampleShape = all.sampleShape;
  out.targetDim = all.targetDim;
  out.numClasses = all.numClasses;
  out.classNames = all.classNames;
  out.size = static_cast<int64_t>(idx.size());
  const int64_t f = all.featureCount();
  reserveSamples(out.x, static_cast<size_t>(out.size * f));
  out.x.resize(static_cast<size_t>(out.size * f));
  out.y.resize(static_cast<size_t>(out.size * all.targetDim));
  for (int64_t i = 0; i < out.size; ++i) {
    const int64_t s = idx[static_cast<size_t>(i)];
    std::copy_n(all.sample(s), f, out.x.data() + i * f);
    std::copy_n(all.target(s), all.targetDim, out.y.data() + i * all.targetDim);
  }
  return out;
}

// A test set must look like the training set; the class count is the larger of the two so that
// a test set that happens to miss (or add) the top class still fits one model.
void matchTestToTrain(Dataset& train, Dataset& test, const std::string& trainFile, const std::string& testFile) {
  if (test.sampleShape != train.sampleShape)
    throw UserError("test data '" + testFile + "' has samples of shape " + shapeToString(test.sampleShape, false) +
                    " but training data '" + trainFile + "' has " + shapeToString(train.sampleShape, false) +
                    ": use files of the same layout");
  if (train.numClasses > 0 || test.numClasses > 0) {
    const int n = std::max(train.numClasses, test.numClasses);
    train.numClasses = test.numClasses = n;
    if (train.classNames.size() != static_cast<size_t>(n)) train.classNames.clear();
    test.classNames = train.classNames;
  }
}

// The four files of Fashion-MNIST; the Debian package ships them gzipped, an unpacked copy works too.
std::string fashionFile(const std::string& dir, const std::string& base) {
  const std::string gz = (fs::path(dir) / (base + ".gz")).string();
  std::error_code ec;  // a name too long is "not found", not an exception
  if (fs::exists(gz, ec)) return gz;
  const std::string raw = (fs::path(dir) / base).string();
  if (fs::exists(raw, ec)) return raw;
  throw UserError("Fashion-MNIST not found at " + gz +
                      ": install the Debian package dataset-fashion-mnist (sudo apt-get install dataset-fashion-mnist) "
                      "or set " +
                      fieldInWords("data.path") + " to the folder that holds it",
                  "data.path");
}

DataSplit loadFashionMnist(const DataSpec& spec) {
  const std::string dir = spec.path.empty() ? std::string(kFashionMnistDir) : spec.path;
  const std::string trainImages = fashionFile(dir, "train-images-idx3-ubyte");
  const std::string trainLabels = fashionFile(dir, "train-labels-idx1-ubyte");
  const std::string testImages = fashionFile(dir, "t10k-images-idx3-ubyte");
  const std::string testLabels = fashionFile(dir, "t10k-labels-idx1-ubyte");
  DataSplit split;
  split.train = readIdxPair(trainImages, trainLabels, "Fashion-MNIST train");
  Dataset test = readIdxPair(testImages, testLabels, "Fashion-MNIST test");
  matchTestToTrain(split.train, test, trainImages, testImages);
  split.validation = std::move(test);
  return split;
}

DataSplit loadIdx(const DataSpec& spec) {
  if (spec.trainImages.empty() || spec.trainLabels.empty())
    throw UserError("IDX files as the data set need " + fieldInWords("data.train_images") + " and " +
                        fieldInWords("data.train_labels") + " (paths to IDX files, gzip or raw)",
                    spec.trainImages.empty() ? "data.train_images" : "data.train_labels");
  if (spec.testImages.empty() != spec.testLabels.empty())
    throw fieldError("data.test_images", " and " + fieldInWords("data.test_labels") + " go together: set both or neither");
  DataSplit split;
  split.train = readIdxPair(spec.trainImages, spec.trainLabels, "IDX train (" + spec.trainImages + ")");
  if (!spec.testImages.empty()) {
    Dataset test = readIdxPair(spec.testImages, spec.testLabels, "IDX test (" + spec.testImages + ")");
    matchTestToTrain(split.train, test, spec.trainImages, spec.testImages);
    split.validation = std::move(test);
  }
  return split;
}

// Reads both CSV files raw, then decides classification on all labels together and standardises
// with the statistics of the training part only (after any hold-out split).
DataSplit loadCsv(const DataSpec& spec) {
  if (spec.path.empty())
    throw UserError("no CSV file chosen: set " + fieldInWords("data.path") + " to the CSV file to train on", "data.path");
  std::error_code ec;
  for (const std::string* f : {&spec.path, &spec.testPath})
    if (!f->empty() && std::filesystem::is_directory(*f, ec)) {
      const std::string field = f == &spec.path ? "data.path" : "data.test_path";
      throw UserError("'" + *f + "' is a folder, not a CSV file: choose a .csv file as " + fieldInWords(field), field);
    }
  DataSplit split;
  split.train = readCsv(spec.path, spec.labelColumn, false, false);
  std::optional<Dataset> test;
  if (!spec.testPath.empty()) test = readCsv(spec.testPath, spec.labelColumn, false, false);
  std::vector<float> labels = split.train.y;
  if (test) labels.insert(labels.end(), test->y.begin(), test->y.end());
  if (looksLikeClassLabels(labels)) {
    makeClassification(split.train);
    if (test) makeClassification(*test);
  }
  if (test) {
    matchTestToTrain(split.train, *test, spec.path, spec.testPath);
    split.validation = std::move(test);
  } else if (spec.validationSplit > 0.0) {
    split = splitValidation(std::move(split.train), spec.validationSplit, spec.seed);
  }
  if (spec.standardize) {
    const FeatureStats stats = computeFeatureStats(split.train);
    applyFeatureStats(split.train, stats);
    if (split.validation) applyFeatureStats(*split.validation, stats);
    split.standardization = stats;
  }
  return split;
}

}  // namespace

const char* toString(DataKind k) {
  switch (k) {
    case DataKind::FashionMnist: return "fashion-mnist";
    case DataKind::Idx: return "idx";
    case DataKind::Csv: return "csv";
    case DataKind::Spirals: return "spirals";
    case DataKind::Blobs: return "blobs";
  }
  return "fashion-mnist";
}

std::optional<DataKind> dataKindNamed(const std::string& name) {
  const DataKind all[] = {DataKind::FashionMnist, DataKind::Idx, DataKind::Csv, DataKind::Spirals, DataKind::Blobs};
  return fromName(name, all);
}

DataSplit loadData(const DataSpec& spec) {
  switch (spec.kind) {
    case DataKind::FashionMnist: return loadFashionMnist(spec);
    case DataKind::Idx: {
      DataSplit s = loadIdx(spec);
      if (!s.validation && spec.validationSplit > 0.0) s = splitValidation(std::move(s.train), spec.validationSplit, spec.seed);
      return s;
    }
    case DataKind::Csv: return loadCsv(spec);
    case DataKind::Spirals:
    case DataKind::Blobs: {
      Dataset all = spec.kind == DataKind::Spirals ? makeSpirals(spec.samples, spec.classes, spec.noise, spec.seed)
                                                   : makeBlobs(spec.samples, spec.classes, spec.features, spec.noise, spec.seed);
      if (spec.validationSplit > 0.0) return splitValidation(std::move(all), spec.validationSplit, spec.seed);
      return DataSplit{std::move(all), std::nullopt};
    }
  }
  throw std::logic_error("loadData: unknown data kind");
}

DataSplit splitValidation(Dataset all, double share, uint64_t seed) {
  if (!(share >= 0.0 && share < 1.0))
    throw fieldError("data.validation_split", " is " + formatNumber("%g", share) + ": it must be at least 0 and below 1");
  if (share == 0.0) return DataSplit{std::move(all), std::nullopt};
  const int64_t n = all.size;
  const int64_t nVal = std::max<int64_t>(1, std::llround(share * static_cast<double>(n)));
  if (nVal >= n)
    throw UserError("data set '" + all.name + "' has " + std::to_string(n) + " samples, too few to hold out " +
                        formatNumber("%g", share * 100.0) + "% for validation: lower " + fieldInWords("data.validation_split") +
                        " or add data",
                    "data.validation_split");
  // Fisher-Yates keyed by seed only, so the split is the same for every device count.
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  Rng rng(hashKeys(seed, 0x5971u));
  for (int64_t i = n - 1; i > 0; --i)
    std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(rng.below(static_cast<uint64_t>(i) + 1))]);
  std::vector<int64_t> trainIdx(perm.begin(), perm.end() - nVal), valIdx(perm.end() - nVal, perm.end());
  // Each part keeps the original order: which samples are held out is random, their order is not.
  std::sort(trainIdx.begin(), trainIdx.end());
  std::sort(valIdx.begin(), valIdx.end());
  DataSplit split;
  split.validation = gather(all, valIdx, all.name + " (validation split)");
  split.train = gather(all, trainIdx, all.name);
  return split;
}

}  // namespace ml
