// The zip container shared by NumPy's .npz and Keras' .keras archives: named entries, stored or
// deflated (zlib), CRC-32 checked on reading. No zip64 on writing (an archive stays under 4 GiB);
// zip64 sizes are read, as numpy writes them.
#pragma once
#include <string>
#include <vector>

namespace ml {

struct ZipEntry {
  std::string name;   // the path inside the archive ("config.json", "dense/kernel.npy")
  std::string bytes;  // uncompressed content
};

enum class ZipCompression { Stored, Deflated };

// The archive's bytes, entries in the given order, times fixed at 1980-01-01 so that the same
// entries give the same bytes. `what` names the archive in messages ("npz file 'w.npz'"). Throws
// UserError for duplicate or empty names and for an archive past 4 GiB.
std::string zipBytes(const std::vector<ZipEntry>& entries, ZipCompression compression, const std::string& what);

// The entries of an archive, in its central directory's order. Throws UserError naming `what`
// and the entry for a file that is not a zip, a damaged directory or header, data that does not
// inflate, a CRC-32 mismatch or a compression method other than stored and deflated.
std::vector<ZipEntry> readZip(const std::string& bytes, const std::string& what);

// True when the bytes start like a zip archive (a local header or an empty archive's end record).
bool looksLikeZip(const std::string& bytes);

}  // namespace ml
