// Dense in the registry: y = activation(x W + b) built from its arguments, and how each format
// writes it (Keras' Dense, ONNX's Gemm or MatMul, the generated programs' layers).
#include "nn/Dense.h"
#include "nn/LayerKind.h"

namespace ml {

namespace {

std::unique_ptr<Layer> make(const LayerArgs& args, const LayerPlace& place) {
  const auto& s = std::get<DenseSpec>(args);
  requirePositive(place, "units", s.units);
  requireInitializer(place, "kernel_initializer", s.kernelInitializer);
  requireInitializer(place, "bias_initializer", s.biasInitializer);
  return std::make_unique<Dense>(s.units, s.activation, s.useBias, s.kernelInitializer.name, s.biasInitializer.name);
}

std::string describe(const LayerArgs& args) {
  const auto& s = std::get<DenseSpec>(args);
  return std::to_string(s.units) + (s.activation != Act::Linear ? std::string(", ") + toString(s.activation) : "");
}

// kernel (in, units), then bias (units).
std::vector<WeightArray> weights(const Layer& l) {
  const int64_t in = l.inFeatures(), units = l.outFeatures();
  std::vector<WeightArray> w = {{"kernel", {in, units}, 0}};
  if (std::get<DenseSpec>(l.args()).useBias) w.push_back({"bias", {units}, in * units});
  return w;
}

void onnx(const Layer& layer, OnnxGraph& g) {
  const auto& d = dynamic_cast<const Dense&>(layer);
  const std::string& n = d.name;
  g.channelsLast(n);
  g.floats(n + "/kernel", {d.inFeatures(), d.outFeatures()}, d.kernel());
  if (d.bias()) {
    g.floats(n + "/bias", {d.outFeatures()}, d.bias());
    g.node("Gemm", n + "/Gemm", {n + "/kernel", n + "/bias"});
  } else {
    g.node("MatMul", n + "/MatMul", {n + "/kernel"});
  }
  onnxActivation(g, d.activation(), n, d.outputShape);
}

std::string tf(const LayerArgs& args, const Layer&, const TfContext& c) {
  const auto& s = std::get<DenseSpec>(args);
  return "tf.keras.layers.Dense(" + pyInt(s.units) + ", activation=" + pyStr(toString(s.activation)) +
         ", use_bias=" + pyBool(s.useBias) + ", kernel_initializer=" + pyStr(s.kernelInitializer.name) +
         ", bias_initializer=" + pyStr(s.biasInitializer.name) + c.nameArg + ")";
}

// dense() of the generated program: nn.Linear with Keras' initialisers and the layer's name.
std::string torch(const LayerArgs& args, const Layer& l) {
  const auto& s = std::get<DenseSpec>(args);
  return "dense(" + pyStr(l.name) + ", " + pyInt(l.inFeatures()) + ", " + pyInt(s.units) + ", " +
         pyStr(s.kernelInitializer.name) + ", " + pyStr(s.biasInitializer.name) + ", " + pyBool(s.useBias) + ")";
}

LayerKind entry() {
  LayerKind k;
  k.type = "Dense";
  k.help = "Fully connected: y = activation(x W + b)";
  k.example = DenseSpec{.units = 64, .activation = Act::Relu};
  k.exampleInput = {6};
  k.gpu = true;
  k.make = make;
  k.describe = describe;
  k.weights = weights;
  k.keras.cls = "Dense";
  for (const char* key : {"kernel_regularizer", "bias_regularizer", "kernel_constraint", "bias_constraint"})
    k.keras.fixed.push_back({key, nullptr});
  k.onnx = onnx;
  k.tf = tf;
  k.torch = torch;
  return k;
}

}  // namespace

const LayerKind& DenseSpec::kind() {
  static const LayerKind k = entry();
  return k;
}

}  // namespace ml
