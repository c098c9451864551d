// The .npz writer and reader: .npy arrays (numpy's own header format) in the zip container of
// ZipFile.h, whose fixed times make the same weights give the same bytes.
#include "export/NpzFile.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "Error.h"
#include "Limits.h"
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

// The header dict of a .npy file -> (descr, fortran_order, shape): a small parser for numpy's own
// format that never reads past the header, whatever it holds (the file may be damaged or hostile).
void parseNpyHeader(const std::string& h, std::string& descr, bool& fortran, std::vector<int64_t>& shape,
                    const std::string& what) {
  auto damaged = [&](const std::string& why) -> UserError {
    return UserError(what + " has a damaged .npy header (" + why + "): save the array again with numpy");
  };
  auto valueAfter = [&](const std::string& key) {
    const size_t k = h.find("'" + key + "'");
    if (k == std::string::npos) throw UserError(what + ": the .npy header has no '" + key + "'");
    size_t v = h.find(':', k);
    if (v == std::string::npos) throw damaged("no ':' after '" + key + "'");
    ++v;
    while (v < h.size() && h[v] == ' ') ++v;
    if (v >= h.size()) throw damaged("'" + key + "' has no value");
    return v;
  };
  const size_t d = valueAfter("descr");
  const char quote = h[d];
  const size_t dEnd = quote == '\'' || quote == '"' ? h.find(quote, d + 1) : std::string::npos;
  if (dEnd == std::string::npos) throw damaged("'descr' is not a quoted text");
  descr = h.substr(d + 1, dEnd - d - 1);
  fortran = h.compare(valueAfter("fortran_order"), 4, "True") == 0;
  const size_t s = valueAfter("shape");
  if (h[s] != '(') throw damaged("'shape' is not a tuple such as (3, 4)");
  const size_t sEnd = h.find(')', s);
  if (sEnd == std::string::npos) throw damaged("'shape' has no closing ')'");
  shape.clear();
  int64_t dim = -1;  // -1: no digit yet
  for (size_t i = s + 1; i <= sEnd; ++i) {
    const char c = h[i];
    if (c >= '0' && c <= '9') {
      // A size past 2^62 is no array's; checking before multiplying keeps the arithmetic from wrapping.
      constexpr int64_t kMaxDim = int64_t{1} << 62;
      if (dim > kMaxDim / 10) throw damaged("a size in 'shape' is larger than any array");
      dim = (dim < 0 ? 0 : dim) * 10 + (c - '0');
      if (dim > kMaxDim) throw damaged("a size in 'shape' is larger than any array");
    } else if (c == ',' || c == ')' || c == ' ') {
      if (dim >= 0) shape.push_back(dim);
      dim = -1;
    } else {
      throw damaged("'shape' holds '" + clipText(std::string(1, c)) + "', not sizes");
    }
    if (shape.size() > 32) throw damaged("'shape' has more than 32 dimensions");
  }
}

NpyArray parseNpyBytes(const std::string& bytes, const std::string& name, const std::string& what) {
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) throw UserError(what + " is not a .npy array (bad magic)");
  const int major = static_cast<unsigned char>(bytes[6]);
  if (major < 1 || major > 3)
    throw UserError(what + " is a .npy array of format version " + std::to_string(major) + "; versions 1 to 3 are read");
  if (major > 1 && bytes.size() < 12) throw UserError(what + " is truncated (inside its header)");
  const size_t hlen = major == 1 ? get16(bytes, 8) : get32(bytes, 8), hstart = major == 1 ? 10 : 12;
  if (hlen > bytes.size() - hstart) throw UserError(what + " is truncated (its header runs past the end)");
  std::string descr;
  bool fortran = false;
  NpyArray a;
  a.name = name;
  parseNpyHeader(bytes.substr(hstart, hlen), descr, fortran, a.shape, what);
  if (fortran) throw UserError(what + " is stored in Fortran order: save it with np.ascontiguousarray");
  if (descr != "<f4" && descr != "<f8")
    throw UserError(what + " holds dtype '" + clipText(descr, 40) + "': weights must be float32 ('<f4') or float64 ('<f8')");
  const int64_t width = descr == "<f4" ? 4 : 8;
  // The sizes are checked against the bytes really there before anything is allocated.
  std::optional<int64_t> n = 1;
  for (int64_t d : a.shape) n = n ? mulChecked(*n, d) : std::nullopt;
  const std::optional<int64_t> need = n ? mulChecked(*n, width) : std::nullopt;
  const size_t have = bytes.size() - hstart - hlen;
  if (!need || static_cast<uint64_t>(*need) != have)
    throw UserError(what + " holds " + std::to_string(have) + " data bytes, but its shape " + shapeText(a.shape) +
                    (need ? " needs " + std::to_string(*need) : " needs more than any file holds"));
  a.data.resize(static_cast<size_t>(*n));
  const char* p = bytes.data() + hstart + hlen;
  for (int64_t i = 0; i < *n; ++i) {
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

NpyArray readNpy(const std::string& bytes, const std::string& name, const std::string& what) {
  return parseNpyBytes(bytes, name, what);
}

std::vector<NpyArray> readNpz(const std::string& path) {
  // A regular file within the memory limit (not /dev/zero); readZip checks every record against it.
  const std::string z = readRegularFile(path, "npz file", "give a file saved with train --save-weights FILE.npz or np.savez");
  std::vector<NpyArray> arrays;
  for (const auto& e : readZip(z, "npz file '" + path + "'")) {
    const std::string what = "array '" + clipText(e.name) + "' in npz file '" + path + "'";
    const std::string key =
        e.name.size() > 4 && e.name.compare(e.name.size() - 4, 4, ".npy") == 0 ? e.name.substr(0, e.name.size() - 4) : e.name;
    arrays.push_back(parseNpyBytes(e.bytes, key, what));
  }
  return arrays;
}

}  // namespace ml
