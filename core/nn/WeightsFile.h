// Weights files (.mlw), little-endian:
//   8 bytes  magic "MLWEIGHT"
//   u32      format version (2; version 1 files are read too)
//   u32      length L of the architecture JSON
//   L bytes  architecture: {"input_shape": [...], "layers": [{"type", "name", "output_shape", "params"}...]}
//   u64      parameter count P
//   P x f32  the flat parameter buffer (layer order, kernel (in, out) row-major, then bias)
//   u64      FNV-1a 64 checksum of the P x f32 bytes: the standard offset basis 14695981039346656037
//            from version 2 on, so any FNV-1a tool verifies it; version 1 used kFnvLegacyBasis
// Loading into a model whose architecture differs is refused with the reason; NaN or infinite
// parameters are refused when written and when read, naming the layer.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "nn/Sequential.h"

namespace ml {

inline constexpr uint32_t kWeightsVersion = 2;

nlohmann::json architectureJson(const Sequential& model);
// Returns the checksum written. Throws UserError naming the layer when a parameter is NaN or infinite.
uint64_t saveWeights(const Sequential& model, const std::string& path);
// Throws UserError: missing file, not a weights file, damaged (checksum, sizes), other
// architecture, NaN or infinite parameters. The model is unchanged when it throws.
void loadWeights(Sequential& model, const std::string& path);

// Where the first NaN or infinity of a flat parameter buffer (or of an optimizer slot laid out
// like it) sits, in words: "NaN in layer 2 'dense_1' (Dense), value 5 of its 40". architecture
// is what architectureJson writes (its "params" counts place the index). nullopt when all are finite.
std::optional<std::string> nonFiniteParameter(const nlohmann::json& architecture, std::span<const float> values);
// Throws UserError "<subject> holds <where>: <fix>" when a parameter of model is not finite.
void requireFiniteParameters(const Sequential& model, std::span<const float> values, const std::string& subject,
                             const std::string& fix);

}  // namespace ml
