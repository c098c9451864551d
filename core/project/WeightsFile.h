// Weights files (.mlw), version 1, little-endian:
//   8 bytes  magic "MLWEIGHT"
//   u32      format version (1)
//   u32      length L of the architecture JSON
//   L bytes  architecture: {"input_shape": [...], "layers": [{"type", "name", "output_shape", "params"}...]}
//   u64      parameter count P
//   P x f32  the flat parameter buffer (layer order, kernel (in, out) row-major, then bias)
//   u64      FNV-1a 64 checksum of the P x f32 bytes
// Loading into a model whose architecture differs is refused with the reason. In project/ because
// its header is JSON, which only project/ reads and writes.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "nn/Sequential.h"

namespace ml {

inline constexpr uint32_t kWeightsVersion = 1;

nlohmann::json architectureJson(const Sequential& model);
// Returns the checksum written.
uint64_t saveWeights(const Sequential& model, const std::string& path);
// Throws UserError: missing file, not a weights file, damaged (checksum), other architecture.
void loadWeights(Sequential& model, const std::string& path);

}  // namespace ml
