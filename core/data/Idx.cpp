// IDX reader: the whole file is read through zlib in large chunks (gzread passes raw files
// through unchanged), then the header is checked against the data before anything is converted.
#include "data/Idx.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "Error.h"
#include "Limits.h"

namespace ml {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803u;  // uint8, 3 dimensions
constexpr uint32_t kLabelsMagic = 0x00000801u;  // uint8, 1 dimension

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// Whole file, decompressed when it is gzip. Chunks of 4 MiB keep 60,000 images to ~a dozen calls;
// reading the whole file first means a corrupt header cannot trigger a huge allocation.
std::string readWholeFile(const std::string& path, const char* what) {
  requireRegularFile(path, std::string(what) + " file", "check the path in the project's data section");
  GzFile f(gzopen(path.c_str(), "rb"));
  if (!f) throw UserError("cannot open " + std::string(what) + " file '" + path + "': check that it exists and is readable");
  gzbuffer(f.get(), 1u << 20);
  std::string data;
  constexpr unsigned kChunk = 4u << 20;
  // A gzip file can expand a thousandfold: stop at what the floats made from it could fill.
  const uint64_t limit = memoryLimitBytes() / (1 + sizeof(float));
  for (;;) {
    if (data.size() > limit)
      requireMemory(static_cast<double>(data.size()) * (1 + sizeof(float)),
                    std::string(what) + " file '" + path + "' (more than " + humanBytes(static_cast<double>(data.size())) +
                        " decompressed)",
                    "use a smaller file");
    const size_t old = data.size();
    data.resize(old + kChunk);
    const int n = gzread(f.get(), data.data() + old, kChunk);
    if (n < 0) {
      int code = 0;
      const char* msg = gzerror(f.get(), &code);
      throw UserError(std::string(what) + " file '" + path + "' is damaged (" + (msg ? msg : "read error") +
                      "): download it again");
    }
    data.resize(old + static_cast<size_t>(n));
    if (n == 0) break;
  }
  return data;
}

uint32_t be32(const std::string& d, size_t off) {
  const auto* p = reinterpret_cast<const unsigned char*>(d.data() + off);
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

std::string hex32(uint32_t v) {
  std::array<char, 11> buf{};
  std::snprintf(buf.data(), buf.size(), "0x%08X", v);
  return buf.data();
}

// Checks magic and size; returns the header length. `dims` receives the dimension sizes.
size_t checkHeader(const std::string& d, const std::string& path, uint32_t magic, size_t ndims, const char* what,
                   std::vector<uint32_t>& dims) {
  const size_t header = 4 + 4 * ndims;
  if (d.size() < 4 || be32(d, 0) != magic) {
    const std::string got = d.size() < 4 ? "a file of " + std::to_string(d.size()) + " bytes" : "magic " + hex32(be32(d, 0));
    throw UserError(std::string(what) + " file '" + path + "' is not an IDX " + what + " file: expected magic " + hex32(magic) +
                    ", found " + got + ". Check that the images and labels paths are not swapped");
  }
  if (d.size() < header)
    throw UserError(std::string(what) + " file '" + path + "' is truncated inside its header: download it again");
  dims.clear();
  uint64_t count = 1;
  for (size_t i = 0; i < ndims; ++i) {
    dims.push_back(be32(d, 4 + 4 * i));
    if (dims.back() == 0)
      throw UserError(std::string(what) + " file '" + path + "' declares dimension " + std::to_string(i) +
                      " of size 0: the file is empty or damaged");
    if (__builtin_mul_overflow(count, uint64_t{dims.back()}, &count))
      throw UserError(std::string(what) + " file '" + path +
                      "' declares dimensions whose product overflows: it is damaged or not an IDX file");
  }
  if (d.size() - header < count)
    throw UserError(std::string(what) + " file '" + path + "' is truncated: the header promises " + std::to_string(count) +
                    " bytes of data but only " + std::to_string(d.size() - header) + " are there. Download it again");
  if (d.size() - header > count)
    throw UserError(std::string(what) + " file '" + path + "' has " + std::to_string(d.size() - header - count) +
                    " bytes after the data its header declares: it is damaged or not an IDX file");
  return header;
}

// A label far above the labels nearly every sample has (one 200 among 0..9) is a damaged byte,
// not a class: the model would need 201 outputs for it. Refused when at most 1% of the samples
// lie more than twice (plus 10) above all the others.
void checkLabelsPlausible(const unsigned char* labels, size_t n, const std::string& path) {
  std::array<size_t, 256> count{};
  for (size_t i = 0; i < n; ++i) ++count[labels[i]];
  size_t below = 0;  // samples with a label up to v
  int lowest = 0;
  while (count[static_cast<size_t>(lowest)] == 0 && lowest < 255) ++lowest;
  for (int v = 0; v < 256; ++v) {
    below += count[static_cast<size_t>(v)];
    if (count[static_cast<size_t>(v)] == 0 || below == n) continue;
    int next = v + 1;
    while (count[static_cast<size_t>(next)] == 0) ++next;
    if (next <= 2 * (v + 1) + 10 || (n - below) * 100 > n) continue;
    const size_t at = static_cast<size_t>(std::find(labels, labels + n, next) - labels);
    throw UserError("labels file '" + path + "' is damaged: sample " + std::to_string(at + 1) + " has label " +
                    std::to_string(next) + ", far outside the labels " + std::to_string(lowest) + ".." + std::to_string(v) +
                    " of " + std::to_string(below) + " of its " + std::to_string(n) +
                    " samples (a class index this far from the rest is a damaged byte, not a class): download the file "
                    "again or fix that label");
  }
}

const std::vector<std::string>& fashionClassNames() {
  static const std::vector<std::string> names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                 "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return names;
}

}  // namespace

Dataset readIdxPair(const std::string& imagesPath, const std::string& labelsPath, const std::string& name) {
  std::vector<uint32_t> imgDims, lblDims;
  const std::string img = readWholeFile(imagesPath, "images");
  const size_t imgOff = checkHeader(img, imagesPath, kImagesMagic, 3, "images", imgDims);
  const std::string lbl = readWholeFile(labelsPath, "labels");
  const size_t lblOff = checkHeader(lbl, labelsPath, kLabelsMagic, 1, "labels", lblDims);
  if (imgDims[0] != lblDims[0])
    throw UserError("images file '" + imagesPath + "' holds " + std::to_string(imgDims[0]) + " images but labels file '" +
                    labelsPath + "' holds " + std::to_string(lblDims[0]) + " labels: the two files do not belong together");

  Dataset ds;
  ds.name = name;
  ds.size = imgDims[0];
  // Channels-last like Keras' image layers expect: 28x28 grey images are (28, 28, 1), so a Conv2D
  // takes them as they are; Dense models put a Flatten first as before (the value count is the same).
  ds.sampleShape = {imgDims[1], imgDims[2], 1};
  ds.targetDim = 1;

  // A lookup table keeps the conversion one load per pixel; the loop vectorises.
  std::array<float, 256> scale{};
  for (int v = 0; v < 256; ++v) scale[static_cast<size_t>(v)] = static_cast<float>(v) / 255.0f;
  const auto* px = reinterpret_cast<const unsigned char*>(img.data() + imgOff);
  reserveSamples(ds.x, img.size() - imgOff);
  ds.x.resize(img.size() - imgOff);
  for (size_t i = 0; i < ds.x.size(); ++i) ds.x[i] = scale[px[i]];

  const auto* lb = reinterpret_cast<const unsigned char*>(lbl.data() + lblOff);
  ds.y.resize(static_cast<size_t>(ds.size));
  int maxLabel = 0;
  for (size_t i = 0; i < ds.y.size(); ++i) {
    ds.y[i] = static_cast<float>(lb[i]);
    maxLabel = std::max(maxLabel, static_cast<int>(lb[i]));
  }
  checkLabelsPlausible(lb, ds.y.size(), labelsPath);
  ds.numClasses = maxLabel + 1;
  if (name.find("Fashion") != std::string::npos && ds.numClasses <= 10) {
    ds.numClasses = 10;  // a small subset may miss the last class; the model still has 10 outputs
    ds.classNames = fashionClassNames();
  }
  return ds;
}

}  // namespace ml
