#include "data/Features.h"

#include <zlib.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "Error.h"
#include "Limits.h"

namespace ml {

static std::string readAll(const std::string& path) {
  requireRegularFile(path, "input file", "give an IDX images file or a CSV of features");
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw UserError("cannot open input file '" + path + "': check the path");
  std::string data;
  char buf[1 << 16];
  int n;
  const uint64_t limit = memoryLimitBytes() / (1 + sizeof(float));
  while ((n = gzread(f, buf, sizeof buf)) > 0) {
    data.append(buf, static_cast<size_t>(n));
    if (data.size() > limit) {
      gzclose(f);
      requireMemory(static_cast<double>(data.size()) * (1 + sizeof(float)), "input file '" + path + "'", "use a smaller file");
    }
  }
  const bool bad = n < 0;
  gzclose(f);
  if (bad) throw UserError("input file '" + path + "' is damaged (gzip error)");
  return data;
}

static uint32_t be32(const std::string& d, size_t off) {
  const auto* p = reinterpret_cast<const unsigned char*>(d.data() + off);
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Long: the two formats a features file may have (IDX images, a numeric text table), each read
// and checked in full where it is recognised.
Dataset readFeatures(const std::string& path) {
  const std::string d = readAll(path);
  Dataset ds;
  ds.name = path;
  if (d.size() >= 16 && be32(d, 0) == 0x00000803u) {
    const uint32_t n = be32(d, 4), rows = be32(d, 8), cols = be32(d, 12);
    // Each product checked: 0xffffffff^3 must not wrap into a small number.
    uint64_t pixels = 0, need = 0;
    const bool overflow = __builtin_mul_overflow(uint64_t{rows}, uint64_t{cols}, &pixels) ||
                          __builtin_mul_overflow(pixels, uint64_t{n}, &need) || __builtin_add_overflow(need, uint64_t{16}, &need);
    if (n == 0 || rows == 0 || cols == 0)
      throw UserError("IDX file '" + path + "' declares " + std::to_string(n) + " images of " + std::to_string(rows) + "x" +
                      std::to_string(cols) + ": it holds no pixels");
    if (overflow || d.size() < need)
      throw UserError("IDX file '" + path + "' is truncated: the header promises " + std::to_string(n) + " images of " +
                      std::to_string(rows) + "x" + std::to_string(cols));
    ds.size = n;
    ds.sampleShape = {rows, cols};
    ds.x.resize(static_cast<size_t>(uint64_t{n} * rows * cols));
    for (size_t i = 0; i < ds.x.size(); ++i) ds.x[i] = static_cast<unsigned char>(d[16 + i]) / 255.0f;
    return ds;
  }
  std::istringstream in(d);
  std::string line;
  int64_t row = 0, width = -1;
  while (std::getline(in, line)) {
    ++row;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::vector<float> vals;
    std::stringstream ls(line);
    std::string cell;
    bool numeric = true;
    while (std::getline(ls, cell, ',')) {
      char* end = nullptr;
      const float v = std::strtof(cell.c_str(), &end);
      if (end == cell.c_str() || *end != '\0') {
        numeric = false;
        break;
      }
      if (!std::isfinite(v))
        throw UserError("input file '" + path + "': row " + std::to_string(row) + " holds '" + clipText(cell, 40) +
                        "', which is not a finite number: fix the cell or remove the row");
      vals.push_back(v);
    }
    if (!numeric) {
      if (row == 1) continue;  // header
      throw UserError("input file '" + path + "': row " + std::to_string(row) + " has a non-numeric cell");
    }
    if (width < 0) width = static_cast<int64_t>(vals.size());
    if (static_cast<int64_t>(vals.size()) != width)
      throw UserError("input file '" + path + "': row " + std::to_string(row) + " has " + std::to_string(vals.size()) +
                      " values, expected " + std::to_string(width));
    ds.x.insert(ds.x.end(), vals.begin(), vals.end());
    ++ds.size;
  }
  if (ds.size == 0)
    throw UserError("input file '" + path + "' holds no samples (expected an IDX images file or a CSV of numbers)");
  ds.sampleShape = {width};
  return ds;
}

}  // namespace ml
