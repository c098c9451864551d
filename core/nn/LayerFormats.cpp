// What several kinds' hooks share: an activation and a window as ONNX nodes, and Python literals.
#include <algorithm>
#include <charconv>
#include <cstdio>

#include "nn/LayerKind.h"

namespace ml {

void onnxActivation(OnnxGraph& g, Act act, const std::string& prefix, const Shape& shape) {
  switch (act) {
    case Act::Linear: return;
    case Act::Relu: g.node("Relu", prefix + "/Relu"); return;
    case Act::Sigmoid: g.node("Sigmoid", prefix + "/Sigmoid"); return;
    case Act::Tanh: g.node("Tanh", prefix + "/Tanh"); return;
    case Act::Softmax:
      if (shape.size() == 1) {
        g.node("Softmax", prefix + "/Softmax", {}, {{"axis", int64_t{1}}});
        return;
      }
      // Mirrorlab's softmax spans the sample's numel(shape) values, ONNX's one axis.
      g.node("Flatten", prefix + "/SoftmaxFlatten", {}, {{"axis", int64_t{1}}});
      g.node("Softmax", prefix + "/Softmax", {}, {{"axis", int64_t{1}}});
      std::vector<int64_t> dims{-1};
      dims.insert(dims.end(), shape.begin(), shape.end());
      g.ints(prefix + "/shape", dims);
      g.node("Reshape", prefix + "/SoftmaxReshape", {prefix + "/shape"});
      return;
  }
}

std::vector<OnnxAttr> onnxWindow(const Window& w, const Geometry& g) {
  const int64_t padH = std::max<int64_t>((g.oh - 1) * w.sh + w.kh - g.h, 0);
  const int64_t padW = std::max<int64_t>((g.ow - 1) * w.sw + w.kw - g.w, 0);
  std::vector<OnnxAttr> attrs = {{"kernel_shape", std::vector<int64_t>{w.kh, w.kw}},
                                 {"strides", std::vector<int64_t>{w.sh, w.sw}}};
  if (w.same) attrs.push_back({"pads", std::vector<int64_t>{g.padTop, g.padLeft, padH - g.padTop, padW - g.padLeft}});
  return attrs;
}

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

std::string pyInt(int64_t v) { return std::to_string(v); }
std::string pyBool(bool b) { return b ? "True" : "False"; }

std::string pyShape(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

}  // namespace ml
