// Writing and reading .mlw weights files; see WeightsFile.h for the format. Every size in a file
// is checked against the file's real size before anything is allocated.
#include "project/WeightsFile.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "AtomicFile.h"
#include "Error.h"
#include "JsonFile.h"
#include "tensor/Finite.h"

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

std::optional<std::string> nonFiniteParameter(const nlohmann::json& architecture, std::span<const float> values) {
  if (allFinite(values.data(), values.size())) return std::nullopt;
  size_t bad = 0;
  while (bad < values.size() && std::isfinite(values[bad])) ++bad;
  const std::string kind = std::isnan(values[bad]) ? "NaN" : values[bad] > 0 ? "+inf" : "-inf";
  // Place the index in its layer by the layers' parameter counts.
  int64_t start = 0;
  // find, not operator[]: a const object without "layers" (a damaged file) is undefined behaviour there.
  const auto found = architecture.is_object() ? architecture.find("layers") : architecture.end();
  const nlohmann::json* layers = architecture.is_object() && found != architecture.end() ? &*found : nullptr;
  if (layers && layers->is_array()) {
    for (size_t i = 0; i < layers->size(); ++i) {
      const nlohmann::json& l = (*layers)[i];
      const int64_t n = l.is_object() && l.value("params", nlohmann::json()).is_number_integer() ? l["params"].get<int64_t>() : 0;
      if (n > 0 && static_cast<int64_t>(bad) < start + n) {
        const std::string name = l.value("name", std::string()), type = l.value("type", std::string());
        return kind + " in layer " + std::to_string(i + 1) + (name.empty() ? "" : " '" + clipText(name, 40) + "'") +
               (type.empty() ? "" : " (" + clipText(type, 40) + ")") + ", value " + std::to_string(bad - start + 1) + " of its " +
               std::to_string(n);
      }
      start += std::max<int64_t>(n, 0);
    }
  }
  return kind + " at parameter " + std::to_string(bad + 1) + " of " + std::to_string(values.size());
}

void requireFiniteParameters(const Sequential& model, std::span<const float> values, const std::string& subject,
                             const std::string& fix) {
  if (const auto where = nonFiniteParameter(architectureJson(model), values))
    throw UserError(subject + " holds " + *where + ": " + fix);
}

uint64_t saveWeights(const Sequential& model, const std::string& path) {
  requireFiniteParameters(model, model.params(), "the model whose weights were to be written to '" + path + "'",
                          "nothing was written; these weights come from a diverged run (lower the learning rate and train "
                          "again)");
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

// The parameters an architecture header declares (the sum of its layers' counts), or nullopt
// when a count is missing, negative or the sum is absurd.
static std::optional<uint64_t> declaredParams(const nlohmann::json& a) {
  uint64_t sum = 0;
  for (const auto& l : a.at("layers")) {
    if (!l.contains("params")) continue;
    const auto& p = l.at("params");
    if (!p.is_number_unsigned() || p.get<uint64_t>() > (uint64_t{1} << 40)) return std::nullopt;
    sum += p.get<uint64_t>();
  }
  return sum;
}

void loadWeights(Sequential& model, const std::string& path) {
  requireRegularFile(path, "weights file", "give a file saved with train --save-weights PATH");
  std::error_code ec;
  const uint64_t fileSize = std::filesystem::file_size(path, ec);
  std::ifstream in(path, std::ios::binary);
  if (ec || !in) throw UserError("cannot open weights file '" + path + "': check the path (train with --save-weights PATH)");
  char magic[8] = {};
  uint32_t version = 0, len = 0;
  in.read(magic, 8);
  in.read(reinterpret_cast<char*>(&version), 4);
  in.read(reinterpret_cast<char*>(&len), 4);
  if (!in || std::memcmp(magic, kMagic, 8) != 0)
    throw UserError("'" + path + "' is not a Mirrorlab weights file (bad magic): give a file saved with --save-weights");
  if (version < 1 || version > kWeightsVersion)
    throw UserError("weights file '" + path + "' has format version " + std::to_string(version) +
                    "; this Mirrorlab reads versions 1 to " + std::to_string(kWeightsVersion));
  // 16 bytes before the architecture, 16 after it (the count and the checksum): the rest are floats.
  if (uint64_t{len} + 32 > fileSize)
    throw UserError("weights file '" + path + "' is truncated or damaged (its architecture header claims " + std::to_string(len) +
                    " bytes of a " + std::to_string(fileSize) + "-byte file)");
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
  if (strip(saved) != strip(want))
    throw UserError("weights file '" + path + "' belongs to another architecture: it was saved for " + describeArch(saved) +
                    " but this model is " + describeArch(want));
  // The same architecture: a count that disagrees with it (or with the file's size) is damage.
  const uint64_t floatBytes = fileSize - len - 32, need = static_cast<uint64_t>(model.paramCount());
  if (count != need || declaredParams(saved) != need)
    throw UserError("weights file '" + path + "' is damaged (its parameter count " + std::to_string(count) +
                    " does not match its own architecture, which has " + std::to_string(need) +
                    " parameters): save the weights again");
  if (floatBytes != need * 4)
    throw UserError("weights file '" + path + "' is " + (floatBytes < need * 4 ? "truncated" : "damaged") + " (" +
                    std::to_string(need) + " parameters need " + std::to_string(need * 4 + len + 32) + " bytes; the file has " +
                    std::to_string(fileSize) + "): save the weights again");
  std::vector<float> buf(count);
  in.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(count * sizeof(float)));
  uint64_t sum = 0;
  in.read(reinterpret_cast<char*>(&sum), 8);
  if (!in) throw UserError("weights file '" + path + "' is truncated");
  if (fnv1a(buf.data(), count * sizeof(float), version == 1 ? kFnvLegacyBasis : kFnvOffsetBasis) != sum)
    throw UserError("weights file '" + path + "' is damaged (checksum mismatch): save the weights again");
  requireFiniteParameters(model, buf, "weights file '" + path + "'",
                          "these weights come from a diverged run and would only give NaN; train again with a lower "
                          "learning rate");
  std::copy(buf.begin(), buf.end(), model.params().begin());
}

}  // namespace ml
