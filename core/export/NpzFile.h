// NumPy .npz archives: a zip file of .npy arrays (format 1.0, little-endian float32, C order),
// which `np.load(path)["dense_1/kernel"]` reads, in the zip container of ZipFile.h (no zip64 written,
// so an archive stays under 4 GiB, refused with a message above that).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ml {

struct NpyArray {
  std::string name;            // the key np.load gives it ("dense_1/kernel"); ".npy" is appended in the zip
  std::vector<int64_t> shape;  // C order; {} is a scalar
  std::vector<float> data;     // product(shape) values
};

enum class NpzCompression { Stored, Deflated };

// The .npy bytes of one array (magic, version 1.0, header dict padded to 64 bytes, data).
std::string npyBytes(const std::vector<int64_t>& shape, std::span<const float> data);

// Writes the archive (to PATH.tmp, then renamed, so a failed write leaves no half file).
// Throws UserError for an unwritable path, duplicate or empty names, or a shape/data mismatch.
void writeNpz(const std::string& path, const std::vector<NpyArray>& arrays,
              NpzCompression compression = NpzCompression::Deflated);

// Reads an archive written by writeNpz or by numpy (np.savez / np.savez_compressed) holding
// little-endian float32 arrays in C order. Throws UserError naming the file and what is wrong.
std::vector<NpyArray> readNpz(const std::string& path);
// One .npy array from its bytes (as an archive entry holds them); what names it in messages.
NpyArray readNpy(const std::string& bytes, const std::string& name, const std::string& what);

}  // namespace ml
