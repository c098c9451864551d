// The .npz writer and reader: .npy arrays (numpy's own header format) in the zip container of
// ZipFile.h, whose fixed times make the same weights give the same bytes.
#include "export/NpzFile.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "Error.h"
#include "export/ZipFile.h"

namespace ml {
namespace {

uint16_t get16(const std::string& s, size_t o) {
  return static_cast<uint16_t>(static_cast<unsigned char>(s[o]) | (static_cast<unsigned char>(s[o + 1]) << 8));
}
uint32_t get32(const std::string& s, size_t o) { return get16(s, o) | (uint32_t{get16(s, o + 2)} << 16); }
void put16(std::string& s, uint16_t v) {
  s += static_cast<char>(v & 0xff);
  s += static_cast<char>(v >> 8);
}

std::string shapeText(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    s += std::to_string(shape[i]) + (shape.size() == 1 ? "," : i + 1 < shape.size() ? ", " : "");
  return s + ")";
}

// The header dict of a .npy file -> (descr, fortran_order, shape); a small parser for numpy's own format.
void parseNpyHeader(const std::string& h, std::string& descr, bool& fortran, std::vector<int64_t>& shape,
                    const std::string& what) {
  auto valueAfter = [&](const std::string& key) {
    const size_t k = h.find("'" + key + "'");
    if (k == std::string::npos) throw UserError(what + ": the .npy header has no '" + key + "'");
    size_t v = h.find(':', k);
    while (v + 1 < h.size() && h[v + 1] == ' ') ++v;
    return v + 1;
  };
  size_t d = valueAfter("descr");
  const size_t dEnd = h.find('\'', d + 1);
  descr = h.substr(d + 1, dEnd - d - 1);
  fortran = h.compare(valueAfter("fortran_order"), 4, "True") == 0;
  const size_t s = valueAfter("shape"), sEnd = h.find(')', s);
  shape.clear();
  std::string num;
  for (size_t i = s + 1; i <= sEnd; ++i) {
    if (h[i] >= '0' && h[i] <= '9')
      num += h[i];
    else if (!num.empty()) {
      shape.push_back(std::stoll(num));
      num.clear();
    }
  }
}

NpyArray parseNpy(const std::string& bytes, const std::string& name, const std::string& what) {
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) throw UserError(what + " is not a .npy array (bad magic)");
  const int major = static_cast<unsigned char>(bytes[6]);
  const size_t hlen = major == 1 ? get16(bytes, 8) : get32(bytes, 8), hstart = major == 1 ? 10 : 12;
  if (hstart + hlen > bytes.size()) throw UserError(what + " is truncated (its header runs past the end)");
  std::string descr;
  bool fortran = false;
  NpyArray a;
  a.name = name;
  parseNpyHeader(bytes.substr(hstart, hlen), descr, fortran, a.shape, what);
  if (fortran) throw UserError(what + " is stored in Fortran order: save it with np.ascontiguousarray");
  if (descr != "<f4" && descr != "<f8")
    throw UserError(what + " holds dtype '" + descr + "': weights must be float32 ('<f4') or float64 ('<f8')");
  int64_t n = 1;
  for (int64_t d : a.shape) n *= d;
  const size_t width = descr == "<f4" ? 4 : 8;
  if (bytes.size() - hstart - hlen != static_cast<size_t>(n) * width)
    throw UserError(what + " holds " + std::to_string(bytes.size() - hstart - hlen) + " data bytes, but its shape " +
                    shapeText(a.shape) + " needs " + std::to_string(static_cast<size_t>(n) * width));
  a.data.resize(static_cast<size_t>(n));
  const char* p = bytes.data() + hstart + hlen;
  for (int64_t i = 0; i < n; ++i) {
    if (width == 4)
      std::memcpy(&a.data[static_cast<size_t>(i)], p + 4 * i, 4);
    else {
      double v;
      std::memcpy(&v, p + 8 * i, 8);
      a.data[static_cast<size_t>(i)] = static_cast<float>(v);
    }
  }
  return a;
}

// PATH.tmp, then renamed over PATH: a failed write never leaves a half file under the real name.
void writeAtomically(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw UserError("cannot write npz file '" + path + "': check that the folder exists and is writable");
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) {
      out.close();
      std::remove(tmp.c_str());
      throw UserError("writing npz file '" + path + "' failed: is the disk full?");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw UserError("cannot write npz file '" + path + "': " + ec.message());
  }
}

}  // namespace

std::string npyBytes(const std::vector<int64_t>& shape, std::span<const float> data) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shapeText(shape) + ", }";
  // magic (6) + version (2) + length (2) + header, padded with spaces and ended by '\n' to a multiple of 64.
  const size_t total = (10 + header.size() + 1 + 63) / 64 * 64;
  header.append(total - 10 - header.size() - 1, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  put16(out, static_cast<uint16_t>(header.size()));
  out += header;
  out.append(reinterpret_cast<const char*>(data.data()), data.size_bytes());  // x86-64 and aarch64 are little-endian
  return out;
}

void writeNpz(const std::string& path, const std::vector<NpyArray>& arrays, NpzCompression compression) {
  const std::string what = "npz file '" + path + "'";
  std::vector<ZipEntry> entries;
  for (const auto& a : arrays) {
    if (a.name.empty()) throw UserError(what + ": an array has no name");
    int64_t n = 1;
    for (int64_t d : a.shape) n *= d;
    if (n != static_cast<int64_t>(a.data.size()))
      throw UserError(what + ": array '" + a.name + "' has shape " + shapeText(a.shape) + " but " +
                      std::to_string(a.data.size()) + " values");
    entries.push_back({a.name + ".npy", npyBytes(a.shape, a.data)});
  }
  writeAtomically(
      path, zipBytes(entries, compression == NpzCompression::Deflated ? ZipCompression::Deflated : ZipCompression::Stored, what));
}

std::vector<NpyArray> readNpz(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("cannot open npz file '" + path + "': check the path");
  const std::string z((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<NpyArray> arrays;
  for (const auto& e : readZip(z, "npz file '" + path + "'")) {
    const std::string what = "array '" + e.name + "' in npz file '" + path + "'";
    const std::string key =
        e.name.size() > 4 && e.name.compare(e.name.size() - 4, 4, ".npy") == 0 ? e.name.substr(0, e.name.size() - 4) : e.name;
    arrays.push_back(parseNpy(e.bytes, key, what));
  }
  return arrays;
}

}  // namespace ml
