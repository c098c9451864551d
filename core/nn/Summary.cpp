#include "nn/Summary.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace ml {

std::string withThousands(int64_t v) {
  std::string s = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return v < 0 ? "-" + out : out;
}

std::string formatBytes(double b) {
  char buf[32];
  if (b < 1024)
    std::snprintf(buf, sizeof buf, "%.0f B", b);
  else if (b < 1024 * 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024);
  else if (b < 1024.0 * 1024 * 1024)
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1024 * 1024));
  else
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1024.0 * 1024 * 1024));
  return buf;
}

int optimizerSlotCount(const OptimizerSpec& spec) {
  switch (spec.kind) {
    case OptimizerKind::Adam: return 2;
    case OptimizerKind::RmsProp: return spec.momentum != 0 ? 2 : 1;
    case OptimizerKind::Sgd: return spec.momentum != 0 ? 1 : 0;
  }
  return 0;
}

static std::string pad(std::string s, size_t w) {
  if (s.size() < w) s.append(w - s.size(), ' ');
  return s;
}

std::string formatSummary(const Sequential& model, const std::string& name, int64_t batch, int slots) {
  std::ostringstream o;
  const auto rows = model.summary();
  // Keras' 29-character first column, widened when a name and type need more
  // ("batch_normalization_1 (BatchNormalization)").
  size_t first = 29;
  for (const auto& r : rows) first = std::max(first, r.name.size() + r.type.size() + 5);
  const std::string line(first + 36, '_'), dline(first + 36, '=');
  o << "Model: \"" << name << "\"\n" << line << "\n";
  o << pad(" Layer (type)", first) << pad("Output Shape", 26) << "Param #\n" << dline << "\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    o << pad(" " + r.name + " (" + r.type + ")", first) << pad(shapeToString(r.outputShape), 26) << withThousands(r.params)
      << "\n";
    if (i + 1 < rows.size()) o << "\n";
  }
  const int64_t p = model.paramCount();
  o << dline << "\n";
  o << "Total params: " << withThousands(p) << " (" << formatBytes(static_cast<double>(p) * 4) << ")\n";
  const int64_t frozen = model.nonTrainableCount();
  o << "Trainable params: " << withThousands(p - frozen) << " (" << formatBytes(static_cast<double>(p - frozen) * 4) << ")\n";
  o << "Non-trainable params: " << withThousands(frozen) << " (" << formatBytes(static_cast<double>(frozen) * 4) << ")\n"
    << line << "\n";
  const double params = static_cast<double>(p) * 4;
  const double low = static_cast<double>(model.lowPrecisionBytes(batch));
  o << "Memory per replica at batch " << batch << ": " << formatBytes(params) << " weights + " << formatBytes(params)
    << " gradients + " << formatBytes(params * slots) << " optimizer state + "
    << formatBytes(static_cast<double>(model.activationBytes(batch))) << " activations"
    << (low > 0 ? " + " + formatBytes(low) + " mixed-precision working copies" : std::string()) << " = "
    << formatBytes(params * (2 + slots) + static_cast<double>(model.activationBytes(batch)) + low) << "\n";
  return o.str();
}

}  // namespace ml
