// The zip container: local headers, central directory and end record, CRC-32 and raw deflate from
// zlib. Only what .npz and .keras archives use: no encryption, no multi-disk archives, no data
// descriptors on writing (Python's zipfile and numpy read what this writes, and this reads theirs).
#include "export/ZipFile.h"

#include <zlib.h>

#include <limits>
#include <set>
#include <stdexcept>

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

uint32_t crcOf(const std::string& bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib takes uInt lengths: feed large entries in pieces.
  for (size_t at = 0; at < bytes.size();) {
    const size_t n = std::min<size_t>(bytes.size() - at, 1u << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + at), static_cast<uInt>(n));
    at += n;
  }
  return static_cast<uint32_t>(crc);
}

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

// The end record sits in the last 22 + 65535 bytes (after an optional comment).
size_t findEndRecord(const std::string& z) {
  if (z.size() < 22) return std::string::npos;
  const size_t lowest = z.size() > 22 + 65535 ? z.size() - 22 - 65535 : 0;
  for (size_t i = z.size() - 22 + 1; i-- > lowest;)
    if (get32(z, i) == kEndSig) return i;
  return std::string::npos;
}

}  // namespace

bool looksLikeZip(const std::string& bytes) {
  return bytes.size() >= 4 && (get32(bytes, 0) == kLocalSig || get32(bytes, 0) == kEndSig);
}

std::string zipBytes(const std::vector<ZipEntry>& entries, ZipCompression compression, const std::string& what) {
  std::string zip, central;
  std::set<std::string> names;
  for (const auto& e : entries) {
    if (e.name.empty()) throw UserError(what + ": an entry has no name");
    if (!names.insert(e.name).second) throw UserError(what + ": two entries are named '" + e.name + "'");
    const bool deflated = compression == ZipCompression::Deflated;
    const std::string body = deflated ? deflateRaw(e.bytes) : e.bytes;
    const uint32_t crc = crcOf(e.bytes);
    if (zip.size() + body.size() + e.bytes.size() > std::numeric_limits<uint32_t>::max() - (1u << 20) || e.name.size() > 0xffff ||
        entries.size() > 0xffff)
      throw UserError(what + " would exceed 4 GiB or 65,535 entries, which this writer does not support (no zip64)");
    const uint32_t offset = static_cast<uint32_t>(zip.size());
    auto common = [&](std::string& s) {
      put16(s, 20);                // version needed: 2.0 (deflate)
      put16(s, 0);                 // flags
      put16(s, deflated ? 8 : 0);  // method
      put16(s, 0);                 // time
      put16(s, kDosDate1980);      // date
      put32(s, crc);
      put32(s, static_cast<uint32_t>(body.size()));
      put32(s, static_cast<uint32_t>(e.bytes.size()));
      put16(s, static_cast<uint16_t>(e.name.size()));
      put16(s, 0);  // extra length
    };
    put32(zip, kLocalSig);
    common(zip);
    zip += e.name;
    zip += body;
    put32(central, kCentralSig);
    put16(central, 20);  // made by: 2.0, MS-DOS attributes
    common(central);
    put16(central, 0);  // comment length
    put16(central, 0);  // disk
    put16(central, 0);  // internal attributes
    put32(central, 0);  // external attributes
    put32(central, offset);
    central += e.name;
  }
  const uint32_t centralOffset = static_cast<uint32_t>(zip.size());
  zip += central;
  put32(zip, kEndSig);
  put16(zip, 0);
  put16(zip, 0);
  put16(zip, static_cast<uint16_t>(entries.size()));
  put16(zip, static_cast<uint16_t>(entries.size()));
  put32(zip, static_cast<uint32_t>(central.size()));
  put32(zip, centralOffset);
  put16(zip, 0);
  return zip;
}

// Every offset and size is checked against the archive's real size before it is used, in
// arithmetic that cannot wrap (zip64 fields reach 2^64), and the inflated sizes of all entries
// together against the memory there is: a damaged or hostile archive ends in a message.
// Long: the central directory, the zip64 extra field and the local header of an entry are
// checked in the order they are read; each check guards the next read.
std::vector<ZipEntry> readZip(const std::string& z, const std::string& what) {
  const size_t end = findEndRecord(z);
  if (end == std::string::npos) throw UserError(what + " is not a zip archive (no end-of-archive record)");
  const uint16_t count = get16(z, end + 10);
  uint64_t at = get32(z, end + 16);
  double inflated = 0;  // entries may share their data: a small file can claim terabytes
  std::vector<ZipEntry> entries;
  for (uint16_t e = 0; e < count; ++e) {
    if (at > z.size() || z.size() - at < 46 || get32(z, at) != kCentralSig)
      throw UserError(what + " is damaged (central directory)");
    const uint16_t flags = get16(z, at + 8), method = get16(z, at + 10), nameLen = get16(z, at + 28),
                   extraLen = get16(z, at + 30), commentLen = get16(z, at + 32);
    const uint32_t wantCrc = get32(z, at + 16);
    uint64_t csize = get32(z, at + 20), usize = get32(z, at + 24), offset = get32(z, at + 42);
    if (z.size() - at - 46 < uint64_t{nameLen} + extraLen + commentLen)
      throw UserError(what + " is damaged (central directory runs past the end)");
    ZipEntry entry;
    entry.name = z.substr(at + 46, nameLen);
    const std::string where = "entry '" + clipText(entry.name) + "' in " + what;
    // Zip64 (numpy's force_zip64): the real sizes sit in extra field 0x0001, inside this entry.
    const uint64_t extraEnd = at + 46 + nameLen + extraLen;
    for (uint64_t x = at + 46 + nameLen; x + 4 <= extraEnd;) {
      const uint16_t id = get16(z, x), len = get16(z, x + 2);
      if (x + 4 + len > extraEnd) throw UserError(where + " is damaged (an extra field runs past its entry)");
      if (id == 1) {
        uint64_t f = x + 4;
        auto next64 = [&](uint64_t& v) {
          if (f + 8 > x + 4 + len) throw UserError(where + " is damaged (its zip64 field is too short)");
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
    if (flags & 1) throw UserError(where + " is encrypted: save it without a password");
    if (offset > z.size() || z.size() - offset < 30 || get32(z, offset) != kLocalSig)
      throw UserError(where + " is damaged (local header)");
    const uint64_t data = offset + 30 + get16(z, offset + 26) + get16(z, offset + 28);
    if (data > z.size() || csize > z.size() - data) throw UserError(where + " is truncated");
    // Deflate never packs more than ~1032:1: a larger claimed size is a damaged header, not memory to reserve.
    if (method == 0 && usize != csize) throw UserError(where + " is damaged (its sizes disagree)");
    if (method == 8 && usize / 1100 > csize + 1)
      throw UserError(where + " is damaged (it claims " + std::to_string(usize) + " bytes from " + std::to_string(csize) +
                      " compressed ones)");
    inflated += static_cast<double>(usize);
    requireMemory(inflated, what, "it is damaged, or too large for this machine");
    if (method == 0)
      entry.bytes = z.substr(data, csize);
    else if (method == 8)
      entry.bytes = inflateRaw(z.substr(data, csize), usize, where);
    else
      throw UserError(where + " uses zip method " + std::to_string(method) + "; only stored and deflated are read");
    if (crcOf(entry.bytes) != wantCrc) throw UserError(where + " is damaged (CRC-32 mismatch)");
    entries.push_back(std::move(entry));
  }
  return entries;
}

}  // namespace ml
