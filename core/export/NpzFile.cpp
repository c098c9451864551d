// The .npz writer and reader: the zip container (local headers, central directory, end record;
// CRC-32 and raw deflate from zlib) around .npy arrays. Times are fixed at 1980-01-01 so the same
// weights give the same bytes.
#include "export/NpzFile.h"

#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <set>

#include "Error.h"
#include "Limits.h"

namespace ml {
namespace {

constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50;
constexpr uint16_t kDosDate1980 = (0 << 9) | (1 << 5) | 1;  // 1980-01-01, time 00:00

void put16(std::string& s, uint16_t v) {
  s += static_cast<char>(v & 0xff);
  s += static_cast<char>(v >> 8);
}
void put32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
}
uint16_t get16(const std::string& s, size_t o) {
  return static_cast<uint16_t>(static_cast<unsigned char>(s[o]) | (static_cast<unsigned char>(s[o + 1]) << 8));
}
uint32_t get32(const std::string& s, size_t o) { return get16(s, o) | (uint32_t{get16(s, o + 2)} << 16); }
uint64_t get64(const std::string& s, size_t o) { return get32(s, o) | (uint64_t{get32(s, o + 4)} << 32); }

std::string deflateRaw(const std::string& in) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("zlib deflateInit2 failed");
  std::string out(deflateBound(&z, static_cast<uLong>(in.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("zlib deflate failed");
  return out;
}

std::string inflateRaw(const std::string& in, uint64_t size, const std::string& what) {
  std::string out(size, '\0');
  z_stream z{};
  if (inflateInit2(&z, -15) != Z_OK) throw std::runtime_error("zlib inflateInit2 failed");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = inflate(&z, Z_FINISH);
  const bool ok = rc == Z_STREAM_END && z.total_out == size;
  inflateEnd(&z);
  if (!ok) throw UserError(what + " is damaged (its compressed data does not inflate)");
  return out;
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
  std::string zip, central;
  std::set<std::string> names;
  for (const auto& a : arrays) {
    if (a.name.empty()) throw UserError("npz file '" + path + "': an array has no name");
    if (!names.insert(a.name).second) throw UserError("npz file '" + path + "': two arrays are named '" + a.name + "'");
    int64_t n = 1;
    for (int64_t d : a.shape) n *= d;
    if (n != static_cast<int64_t>(a.data.size()))
      throw UserError("npz file '" + path + "': array '" + a.name + "' has shape " + shapeText(a.shape) + " but " +
                      std::to_string(a.data.size()) + " values");
    const std::string raw = npyBytes(a.shape, a.data), file = a.name + ".npy";
    const bool deflated = compression == NpzCompression::Deflated;
    const std::string body = deflated ? deflateRaw(raw) : raw;
    const uint32_t crc =
        static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(raw.data()), static_cast<uInt>(raw.size())));
    if (zip.size() + body.size() + raw.size() > std::numeric_limits<uint32_t>::max() - (1u << 20))
      throw UserError("npz file '" + path + "' would exceed 4 GiB, which this writer does not support (no zip64)");
    const uint32_t offset = static_cast<uint32_t>(zip.size());
    auto common = [&](std::string& s) {
      put16(s, 20);                // version needed: 2.0 (deflate)
      put16(s, 0);                 // flags
      put16(s, deflated ? 8 : 0);  // method
      put16(s, 0);                 // time
      put16(s, kDosDate1980);      // date
      put32(s, crc);
      put32(s, static_cast<uint32_t>(body.size()));
      put32(s, static_cast<uint32_t>(raw.size()));
      put16(s, static_cast<uint16_t>(file.size()));
      put16(s, 0);  // extra length
    };
    put32(zip, kLocalSig);
    common(zip);
    zip += file;
    zip += body;
    put32(central, kCentralSig);
    put16(central, 20);  // made by: 2.0, MS-DOS attributes
    common(central);
    put16(central, 0);  // comment length
    put16(central, 0);  // disk
    put16(central, 0);  // internal attributes
    put32(central, 0);  // external attributes
    put32(central, offset);
    central += file;
  }
  const uint32_t centralOffset = static_cast<uint32_t>(zip.size());
  zip += central;
  put32(zip, kEndSig);
  put16(zip, 0);
  put16(zip, 0);
  put16(zip, static_cast<uint16_t>(arrays.size()));
  put16(zip, static_cast<uint16_t>(arrays.size()));
  put32(zip, static_cast<uint32_t>(central.size()));
  put32(zip, centralOffset);
  put16(zip, 0);
  writeAtomically(path, zip);
}

NpyArray readNpy(const std::string& bytes, const std::string& name, const std::string& what) {
  return parseNpyBytes(bytes, name, what);
}

// Every offset and size of the zip structures is checked against the file's real size before it
// is used or allocated, so a damaged or hostile archive ends in a message, never a crash.
std::vector<NpyArray> readNpz(const std::string& path) {
  const std::string z = readRegularFile(path, "npz file", "give a file saved with train --save-weights FILE.npz or np.savez");
  // The end record sits in the last 22 + 65535 bytes (after an optional comment).
  size_t end = std::string::npos;
  if (z.size() >= 22) {
    const size_t lowest = z.size() > 22 + 65535 ? z.size() - 22 - 65535 : 0;
    for (size_t i = z.size() - 22 + 1; i-- > lowest;)
      if (get32(z, i) == kEndSig) {
        end = i;
        break;
      }
  }
  if (end == std::string::npos) throw UserError("'" + path + "' is not an npz (zip) file: no end-of-archive record");
  const uint16_t count = get16(z, end + 10);
  uint64_t at = get32(z, end + 16);
  // Inflated bytes of all entries together: a small archive can claim gigabytes (a zip bomb).
  double inflated = 0;
  std::vector<NpyArray> arrays;
  for (uint16_t e = 0; e < count; ++e) {
    if (at > z.size() || z.size() - at < 46 || get32(z, at) != kCentralSig)
      throw UserError("npz file '" + path + "' is damaged (central directory)");
    const uint16_t method = get16(z, at + 10), nameLen = get16(z, at + 28), extraLen = get16(z, at + 30),
                   commentLen = get16(z, at + 32);
    if (z.size() - at - 46 < uint64_t{nameLen} + extraLen + commentLen)
      throw UserError("npz file '" + path + "' is damaged (central directory runs past the end)");
    const uint32_t wantCrc = get32(z, at + 16);
    uint64_t csize = get32(z, at + 20), usize = get32(z, at + 24), offset = get32(z, at + 42);
    const std::string file = z.substr(at + 46, nameLen);
    // numpy writes zip64 entries (force_zip64): the real sizes sit in extra field 0x0001.
    const uint64_t extraEnd = at + 46 + nameLen + extraLen;
    for (uint64_t x = at + 46 + nameLen; x + 4 <= extraEnd;) {
      const uint16_t id = get16(z, x), len = get16(z, x + 2);
      if (x + 4 + len > extraEnd) throw UserError("npz file '" + path + "' is damaged (an extra field runs past its entry)");
      if (id == 1) {
        uint64_t f = x + 4;
        auto next64 = [&](uint64_t& v) {
          if (f + 8 > x + 4 + len) throw UserError("npz file '" + path + "' is damaged (zip64 field too short)");
          v = get64(z, f);
          f += 8;
        };
        if (usize == 0xffffffffu) next64(usize);
        if (csize == 0xffffffffu) next64(csize);
        if (offset == 0xffffffffu) next64(offset);
      }
      x += 4 + len;
    }
    at = extraEnd + commentLen;
    const std::string what = "array '" + clipText(file) + "' in npz file '" + path + "'";
    if (offset > z.size() || z.size() - offset < 30 || get32(z, offset) != kLocalSig)
      throw UserError(what + " is damaged (local header)");
    const uint64_t data = offset + 30 + get16(z, offset + 26) + get16(z, offset + 28);
    if (data > z.size() || csize > z.size() - data) throw UserError(what + " is truncated");
    std::string bytes;
    if (method == 0) {
      bytes = z.substr(data, csize);
    } else if (method == 8) {
      // Deflate expands at most 1032-fold: a larger claim is damage, and the memory is checked first.
      if (usize / 1032 > csize + 1)
        throw UserError(what + " is damaged (it claims " + std::to_string(usize) + " bytes from " + std::to_string(csize) +
                        " compressed ones)");
      inflated += static_cast<double>(usize);
      requireMemory(inflated, "npz file '" + path + "'", "it is damaged, or too large for this machine");
      bytes = inflateRaw(z.substr(data, csize), usize, what);
    } else {
      throw UserError(what + " uses zip method " + std::to_string(method) + "; only stored and deflated are read");
    }
    const uint32_t crc =
        static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
    if (crc != wantCrc) throw UserError(what + " is damaged (CRC-32 mismatch)");
    const std::string key =
        file.size() > 4 && file.compare(file.size() - 4, 4, ".npy") == 0 ? file.substr(0, file.size() - 4) : file;
    arrays.push_back(parseNpyBytes(bytes, key, what));
  }
  return arrays;
}

}  // namespace ml
