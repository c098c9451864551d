#include "project/WeightsFile.h"

#include <cstring>
#include <fstream>

#include "AtomicFile.h"
#include "Error.h"
#include "JsonFile.h"

namespace ml {

static constexpr char kMagic[8] = {'M', 'L', 'W', 'E', 'I', 'G', 'H', 'T'};

nlohmann::json architectureJson(const Sequential& model) {
  nlohmann::json layers = nlohmann::json::array();
  for (size_t i = 0; i < model.layerCount(); ++i) {
    const Layer& l = model.layer(i);
    layers.push_back({{"type", l.type()}, {"name", l.name}, {"output_shape", l.outputShape}, {"params", l.paramCount()}});
  }
  return {{"input_shape", model.inputShape()}, {"layers", layers}};
}

uint64_t saveWeights(const Sequential& model, const std::string& path) {
  const std::string arch = architectureJson(model).dump();
  const uint32_t version = kWeightsVersion, len = static_cast<uint32_t>(arch.size());
  const uint64_t count = static_cast<uint64_t>(model.paramCount());
  const uint64_t sum = fnv1a(model.params().data(), count * sizeof(float));
  // Temporary file, fsync, rename: a full disk never leaves a truncated file or destroys the old one.
  AtomicFile out(path, "weights file");
  out.write(kMagic, 8);
  out.write(&version, 4);
  out.write(&len, 4);
  out.write(arch);
  out.write(&count, 8);
  out.write(model.params().data(), count * sizeof(float));
  out.write(&sum, 8);
  out.commit();
  return sum;
}

// Only called on architectures that passed wellFormed().
static std::string describeArch(const nlohmann::json& a) {
  std::string s = "input " + shortDump(a.at("input_shape"), 40);
  for (const auto& l : a.at("layers"))
    s += " -> " + clipText(l.at("type").get<std::string>(), 40) +
         (l.contains("output_shape") ? shortDump(l.at("output_shape"), 40) : "");
  return clipText(s, 400);
}

// The shape a stored architecture must have before it is compared or described.
static bool wellFormed(const nlohmann::json& a) {
  if (!a.is_object() || !a.contains("input_shape") || !a.contains("layers") || !a.at("layers").is_array()) return false;
  for (const auto& l : a.at("layers"))
    if (!l.is_object() || !l.contains("type") || !l.at("type").is_string()) return false;
  return true;
}

void loadWeights(Sequential& model, const std::string& path) {
  requireRegularFile(path, "weights file", "give a file saved with train --save-weights PATH");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("cannot open weights file '" + path + "': check the path (train with --save-weights PATH)");
  char magic[8] = {};
  uint32_t version = 0, len = 0;
  in.read(magic, 8);
  in.read(reinterpret_cast<char*>(&version), 4);
  in.read(reinterpret_cast<char*>(&len), 4);
  if (!in || std::memcmp(magic, kMagic, 8) != 0)
    throw UserError("'" + path + "' is not a Mirrorlab weights file (bad magic): give a file saved with --save-weights");
  if (version != kWeightsVersion)
    throw UserError("weights file '" + path + "' has format version " + std::to_string(version) +
                    "; this Mirrorlab reads version " + std::to_string(kWeightsVersion));
  if (len > (64u << 20))
    throw UserError("weights file '" + path + "' is damaged (architecture length " + std::to_string(len) + ")");
  std::string arch(len, '\0');
  in.read(arch.data(), len);
  uint64_t count = 0;
  in.read(reinterpret_cast<char*>(&count), 8);
  if (!in) throw UserError("weights file '" + path + "' is truncated");
  const nlohmann::json saved = parseJsonOrDiscarded(arch);
  if (saved.is_discarded() || !wellFormed(saved))
    throw UserError("weights file '" + path +
                    "' is damaged (its architecture header is not the JSON object Mirrorlab writes): save the weights again");
  // Compare shapes and parameter counts, not names: a renamed layer may take the same weights.
  nlohmann::json want = architectureJson(model);
  auto strip = [](nlohmann::json a) {
    for (auto& l : a["layers"]) l.erase("name");
    return a;
  };
  if (strip(saved) != strip(want) || count != static_cast<uint64_t>(model.paramCount()))
    throw UserError("weights file '" + path + "' belongs to another architecture: it was saved for " + describeArch(saved) +
                    " but this model is " + describeArch(want));
  std::vector<float> buf(count);
  in.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(count * sizeof(float)));
  uint64_t sum = 0;
  in.read(reinterpret_cast<char*>(&sum), 8);
  if (!in) throw UserError("weights file '" + path + "' is truncated");
  if (fnv1a(buf.data(), count * sizeof(float)) != sum)
    throw UserError("weights file '" + path + "' is damaged (checksum mismatch): save the weights again");
  std::copy(buf.begin(), buf.end(), model.params().begin());
}

}  // namespace ml
