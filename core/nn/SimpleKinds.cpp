// Activation, Flatten, Dropout and Reshape in the registry: the parameter-free layers and how each
// format writes them. Dropout is the identity at inference (no ONNX node); a softmax spans
// Mirrorlab's whole sample, which Keras writes as Softmax over every axis.
#include <charconv>

#include "Error.h"
#include "nn/LayerKind.h"
#include "nn/SimpleLayers.h"
#include "random/Rng.h"

namespace ml {

namespace {

std::string shortest(double v) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, end);
}

// ---- Activation ----

// Mirrorlab's softmax over a sample of more than one axis is Keras' Softmax over every axis.
bool wholeSampleSoftmax(Act a, const Layer& l) { return a == Act::Softmax && l.outputShape.size() > 1; }

std::string everyAxis(const Layer& l) {
  std::string axes;
  for (size_t i = 1; i <= l.outputShape.size(); ++i) axes += (axes.empty() ? "" : ", ") + std::to_string(i);
  return axes;
}

void kerasActivation(const Layer& l, std::string& cls, std::vector<KerasEntry>& config) {
  const Act a = std::get<ActivationSpec>(l.args()).activation;
  if (!wholeSampleSoftmax(a, l)) {
    config.push_back({"activation", std::string(toString(a))});
    return;
  }
  cls = "Softmax";
  std::vector<int64_t> axes;
  for (size_t i = 1; i <= l.outputShape.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  config.push_back({"axis", axes});
}

void onnxActivationLayer(const Layer& l, OnnxGraph& g) {
  const Act a = std::get<ActivationSpec>(l.args()).activation;
  if (a == Act::Softmax) g.channelsLast(l.name);  // Mirrorlab's softmax spans the sample
  onnxActivation(g, a, l.name, l.outputShape);
}

std::string tfActivation(const LayerArgs& args, const Layer& l, const TfContext& c) {
  const Act a = std::get<ActivationSpec>(args).activation;
  if (wholeSampleSoftmax(a, l)) return "tf.keras.layers.Softmax(axis=[" + everyAxis(l) + "]" + c.dtypeArg + c.nameArg + ")";
  return "tf.keras.layers.Activation(" + pyStr(toString(a)) + c.dtypeArg + c.nameArg + ")";
}

LayerKind activationEntry() {
  LayerKind k;
  k.type = "Activation";
  k.help = "Applies an activation function";
  k.example = ActivationSpec{};
  k.exampleInput = {5};
  k.gpu = true;
  k.make = [](const LayerArgs& a, const LayerPlace&) -> std::unique_ptr<Layer> {
    return std::make_unique<ActivationLayer>(std::get<ActivationSpec>(a).activation);
  };
  k.describe = [](const LayerArgs& a) { return std::string(toString(std::get<ActivationSpec>(a).activation)); };
  k.keras.cls = "Activation";
  k.keras.write = kerasActivation;
  k.keras.axis = KerasAxis::Softmax;
  k.keras.aliases = {{"ReLU", ActivationSpec{Act::Relu}, {{"max_value", nullptr}, {"negative_slope", 0.0}, {"threshold", 0.0}}},
                     {"Softmax", ActivationSpec{Act::Softmax}, {}}};
  k.onnx = onnxActivationLayer;
  k.tf = tfActivation;
  k.torch = [](const LayerArgs&, const Layer&) { return std::string(); };  // the activation is all there is
  return k;
}

// ---- Flatten ----

LayerKind flattenEntry() {
  LayerKind k;
  k.type = "Flatten";
  k.help = "Flattens each sample to a vector";
  k.example = FlattenSpec{};
  k.exampleInput = {3, 4};
  k.gpu = true;
  k.make = [](const LayerArgs&, const LayerPlace&) -> std::unique_ptr<Layer> { return std::make_unique<Flatten>(); };
  k.keras.cls = "Flatten";
  k.keras.fixed = {{"data_format", std::string("channels_last")}};
  k.onnx = [](const Layer& l, OnnxGraph& g) {
    g.channelsLast(l.name);
    g.node("Flatten", l.name + "/Flatten", {}, {{"axis", int64_t{1}}});
  };
  k.tf = [](const LayerArgs&, const Layer&, const TfContext& c) {
    return "tf.keras.layers.Flatten(" + (c.nameArg.empty() ? std::string() : c.nameArg.substr(2)) + ")";
  };
  k.torch = [](const LayerArgs&, const Layer&) { return std::string("nn.Flatten()"); };  // channels-last: Keras' order
  return k;
}

// ---- Dropout ----

std::unique_ptr<Layer> makeDropout(const LayerArgs& args, const LayerPlace& place) {
  const double rate = std::get<DropoutSpec>(args).rate;
  if (!(rate >= 0.0 && rate < 1.0)) throw place.argError("rate", " must be in [0, 1), got " + std::to_string(rate));
  // Each layer's masks apart from the others': its position keys them.
  return std::make_unique<Dropout>(rate, splitmix64(0xD409u + place.index));
}

LayerKind dropoutEntry() {
  LayerKind k;
  k.type = "Dropout";
  k.help = "Randomly zeroes a share of units while training";
  k.example = DropoutSpec{};
  k.exampleInput = {8};
  k.gpu = true;
  k.make = makeDropout;
  k.describe = [](const LayerArgs& a) { return shortest(std::get<DropoutSpec>(a).rate); };
  k.keras.cls = "Dropout";
  k.keras.fixed = {{"seed", nullptr}, {"noise_shape", nullptr}};
  k.onnx = [](const Layer&, OnnxGraph&) {};  // the identity at inference: nothing to run
  // ReplicaDropout: its own seed per layer (two layers with one seed would drop the same units).
  k.tf = [](const LayerArgs& a, const Layer&, const TfContext& c) {
    return "ReplicaDropout(" + pyNum(std::get<DropoutSpec>(a).rate) + ", seed=SEED + " + std::to_string(c.index) + c.nameArg +
           ")";
  };
  k.torch = [](const LayerArgs& a, const Layer&) { return "nn.Dropout(p=" + pyNum(std::get<DropoutSpec>(a).rate) + ")"; };
  return k;
}

// ---- Reshape ----

std::unique_ptr<Layer> makeReshape(const LayerArgs& args, const LayerPlace& place) {
  const Shape& t = std::get<ReshapeSpec>(args).targetShape;
  if (t.empty()) throw place.argError("target_shape", " must be a list of whole numbers, e.g. [28, 28, 1], got []");
  return std::make_unique<Reshape>(t);
}

std::string shapeList(const Shape& s) {
  std::string out;
  for (int64_t d : s) out += (out.empty() ? "" : ",") + std::to_string(d);
  return "[" + out + "]";
}

LayerKind reshapeEntry() {
  LayerKind k;
  k.type = "Reshape";
  k.help = "Gives each sample another shape with the same number of values";
  k.example = ReshapeSpec{};
  k.exampleInput = {784};
  k.gpu = true;
  k.make = makeReshape;
  k.describe = [](const LayerArgs& a) { return shapeList(std::get<ReshapeSpec>(a).targetShape); };
  k.keras.cls = "Reshape";
  k.onnx = [](const Layer& l, OnnxGraph& g) {
    g.channelsLast(l.name);
    std::vector<int64_t> dims{-1};
    dims.insert(dims.end(), l.outputShape.begin(), l.outputShape.end());
    g.ints(l.name + "/shape", dims);
    g.node("Reshape", l.name + "/Reshape", {l.name + "/shape"});
  };
  k.tf = [](const LayerArgs& a, const Layer&, const TfContext& c) {
    return "tf.keras.layers.Reshape(" + pyShape(std::get<ReshapeSpec>(a).targetShape) + c.nameArg + ")";
  };
  k.torch = [](const LayerArgs& a, const Layer&) { return "Reshape(" + pyShape(std::get<ReshapeSpec>(a).targetShape) + ")"; };
  k.torchHelpers = kTorchSpatial;
  return k;
}

}  // namespace

const LayerKind& ActivationSpec::kind() {
  static const LayerKind k = activationEntry();
  return k;
}

const LayerKind& FlattenSpec::kind() {
  static const LayerKind k = flattenEntry();
  return k;
}

const LayerKind& DropoutSpec::kind() {
  static const LayerKind k = dropoutEntry();
  return k;
}

const LayerKind& ReshapeSpec::kind() {
  static const LayerKind k = reshapeEntry();
  return k;
}

}  // namespace ml
