// Helpers for the data tests: a fresh temp folder per test and small IDX/CSV writers.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "Error.h"
#include "support/Errors.h"

namespace mltest {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() / ("mirrorlab_data_" + std::string(info->test_suite_name()) + "_" + info->name() + "_" +
                                         std::to_string(static_cast<long>(::getpid())));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

inline void putBe32(std::string& s, uint32_t v) {
  s.push_back(static_cast<char>(v >> 24));
  s.push_back(static_cast<char>(v >> 16));
  s.push_back(static_cast<char>(v >> 8));
  s.push_back(static_cast<char>(v));
}

inline void writeBytes(const std::string& path, const std::string& bytes, bool gzip) {
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
}

// An images file: n images of rows x cols with pixel (i, k) = (i * 7 + k) % 256.
inline std::string idxImages(uint32_t n, uint32_t rows, uint32_t cols, uint32_t magic = 0x00000803u) {
  std::string s;
  putBe32(s, magic);
  putBe32(s, n);
  putBe32(s, rows);
  putBe32(s, cols);
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t k = 0; k < rows * cols; ++k) s.push_back(static_cast<char>((i * 7 + k) % 256));
  return s;
}

inline std::string idxLabels(const std::vector<uint8_t>& labels, uint32_t magic = 0x00000801u) {
  std::string s;
  putBe32(s, magic);
  putBe32(s, static_cast<uint32_t>(labels.size()));
  for (uint8_t l : labels) s.push_back(static_cast<char>(l));
  return s;
}

inline void writeText(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

}  // namespace mltest
