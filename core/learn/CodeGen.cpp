// Shared parts of the program generators: literals, the model plan and the opening comment (the
// data loader both programs share is in CodeGenData.cpp).
#include <algorithm>
#include <cctype>
#include <charconv>

#include "Error.h"
#include "backend/DeviceList.h"
#include "learn/CodeGen.h"
#include "learn/CodeGenParts.h"
#include "nn/Loss.h"
#include "nn/Sequential.h"

namespace ml {

Framework parseFramework(const std::string& name) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (n == "tf" || n == "tensorflow" || n == "keras") return Framework::TensorFlow;
  if (n == "torch" || n == "pytorch") return Framework::PyTorch;
  throw UserError("unknown framework '" + name + "' (allowed: tf, torch)");
}

const char* toString(Framework f) { return f == Framework::TensorFlow ? "tf" : "torch"; }

std::string generateProgram(const Project& project, Framework framework) {
  return framework == Framework::TensorFlow ? generateTensorFlowProgram(project) : generatePyTorchProgram(project);
}

std::string suggestedFileName(const Project& project, Framework framework) {
  std::string stem;
  for (unsigned char c : project.name) {
    if (std::isalnum(c))
      stem += static_cast<char>(std::tolower(c));
    else if (!stem.empty() && stem.back() != '_')
      stem += '_';
  }
  while (!stem.empty() && stem.back() == '_') stem.pop_back();
  if (stem.empty() || std::isdigit(static_cast<unsigned char>(stem.front()))) stem = "project_" + stem;
  return stem + (framework == Framework::TensorFlow ? "_mirrored_tf.py" : "_ddp_torch.py");
}

namespace codegen {

std::string pyStr(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);  // UTF-8 passes through: Python 3 source is UTF-8
        }
    }
  }
  return out + "\"";
}

std::string pyNum(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, end);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string pyDocText(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n' || c == '\r' || c == '\t')
      out += ' ';
    else if (c == '\\')
      out += '/';
    else if (c == '"' && out.size() >= 2 && out.compare(out.size() - 2, 2, "\"\"") == 0)
      out += '\'';
    else
      out += c;
  }
  return out;
}

std::string pyInt(int64_t v) { return std::to_string(v); }
std::string pyBool(bool b) { return b ? "True" : "False"; }

std::string pyShape(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

ModelPlan planModel(const Project& p) {
  Sequential model(p.model);  // validates shapes and fills in generated names
  ModelPlan plan;
  plan.input = p.model.inputShape;
  plan.params = model.paramCount();
  plan.outputs = model.outFeatures();
  int64_t in = numel(plan.input);
  const auto& layers = model.spec().layers;
  for (size_t i = 0; i < layers.size(); ++i) {
    const auto& s = layers[i];
    const auto& a = s.args;
    LayerPlan l;
    l.type = s.type;
    l.name = s.name;
    l.inFeatures = in;
    if (s.type == "Dense") {
      l.units = a.at("units").get<int64_t>();
      l.activation = a.value("activation", std::string("linear"));
      l.useBias = a.value("use_bias", true);
      l.kernelInit = a.value("kernel_initializer", std::string("glorot_uniform"));
      l.biasInit = a.value("bias_initializer", std::string("zeros"));
    } else if (s.type == "Activation") {
      l.activation = a.value("activation", std::string("linear"));
    } else if (s.type == "Dropout") {
      l.rate = a.value("rate", 0.5);
    }
    l.args = model.layer(i).args();
    l.inputShape = model.layer(i).inputShape;
    l.outputShape = model.layer(i).outputShape;
    if (s.type == "Conv2D") {
      l.activation = l.args.value("activation", std::string("linear"));
      l.useBias = l.args.value("use_bias", true);
      l.kernelInit = l.args.value("kernel_initializer", std::string("glorot_uniform"));
      l.biasInit = l.args.value("bias_initializer", std::string("zeros"));
    }
    if (l.activation == "none" || l.activation.empty()) l.activation = "linear";
    in = numel(model.layer(i).outputShape);
    plan.layers.push_back(l);
  }
  for (auto it = plan.layers.rbegin(); it != plan.layers.rend(); ++it) {
    if (it->type == "Dense" || it->type == "Activation") {
      plan.endsInSoftmax = it->activation == "softmax";
      break;
    }
  }
  return plan;
}

int projectReplicas(const Project& p) { return std::max(1, parseDevices(p.distribute.devices).size()); }

int projectWorkers(const Project& p) { return std::max(1, p.distribute.workers); }

std::string globalBatchPython(const Project& p) {
  const TrainingSpec& t = p.training;
  if (!t.perDeviceBatch)
    return "GLOBAL_BATCH = " + pyInt(t.batchSize) + "  # the project's global batch: samples per optimizer update\n";
  const int devices = projectReplicas(p), workers = projectWorkers(p);
  return "PER_REPLICA_BATCH = " + pyInt(t.batchSize) + "  # the project's batch per device and micro-batch\n" +
         "GLOBAL_BATCH = " + pyInt(t.batchSize * devices * workers * t.accumulate) + "  # " + pyInt(t.batchSize) + " x " +
         std::to_string(devices) + " device(s)" + (workers > 1 ? " x " + std::to_string(workers) + " workers" : "") + " x " +
         std::to_string(t.accumulate) + " micro-batch(es): Mirrorlab's samples per optimizer update\n";
}

bool isClassification(const Project& p) { return Loss::make(p.training.loss, p.training.fromLogits).isClassification(); }

std::string headerComment(const Project& p, const std::string& framework, const std::vector<std::string>& mapping) {
  std::string out = "# Mirrorlab project " + pyStr(p.name) + " as a " + framework + " program (generated by Mirrorlab " +
                    MIRRORLAB_VERSION + ").\n";
  for (const auto& line : mapping) out += "# " + line + "\n";
  return out;
}

}  // namespace codegen
}  // namespace ml
