// Where a data set comes from and how it is split: the plain spec the loaders take. The project
// library translates a project file into it; nothing here knows the file format.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace ml {

// Where the samples come from (the file's data.kind): fashion-mnist | idx | csv | spirals | blobs.
enum class DataKind { FashionMnist, Idx, Csv, Spirals, Blobs };
std::optional<DataKind> dataKindNamed(const std::string& name);
const char* toString(DataKind k);
inline constexpr const char* kDataKindNames = "fashion-mnist, idx, csv, spirals, blobs";
inline bool generated(DataKind k) { return k == DataKind::Spirals || k == DataKind::Blobs; }  // made, not read

struct DataSpec {
  DataKind kind = DataKind::FashionMnist;
  std::string path;                                              // fashion-mnist: folder; csv: file
  std::string trainImages, trainLabels, testImages, testLabels;  // idx
  std::string labelColumn = "label";                             // csv
  bool standardize = false;                                      // csv
  std::string testPath;                                          // csv: optional separate test file
  int64_t samples = 1000;                                        // spirals, blobs
  int classes = 3;                                               // spirals, blobs
  int features = 2;                                              // blobs
  double noise = 0.2;                                            // spirals: angle noise; blobs: cluster std
  double validationSplit = 0.0;                                  // when there is no test set: hold out this share
  uint64_t seed = 1;                                             // generators
};

}  // namespace ml
