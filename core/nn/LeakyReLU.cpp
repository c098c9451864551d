// LeakyReLU, the whole layer in one file: the layer (x above zero, negative_slope * x below), its
// registry entry and how each format writes it (Keras 3's LeakyReLU, ONNX's LeakyRelu,
// nn.LeakyReLU). The CUDA plugin has no kernel for it, so GPU runs refuse it by name.
#include <cmath>

#include "Error.h"
#include "Format.h"
#include "nn/LayerKind.h"

namespace ml {

namespace {

class LeakyReLU : public Layer {
 public:
  explicit LeakyReLU(double slope) : slope_(static_cast<float>(slope)) {}
  std::string type() const override { return "LeakyReLU"; }
  Shape build(const Shape& input) override { return inputShape = outputShape = input; }
  // x (n, k) -> y (n, k)
  void forward(const float* x, float* y, int64_t n, const StepContext&) override {
    for (int64_t i = 0; i < n * outFeatures(); ++i) y[i] = x[i] > 0.0f ? x[i] : slope_ * x[i];
  }
  // dy (n, k) -> dx (n, k); the slope below zero and at zero, as TensorFlow and PyTorch take it.
  void backward(const float* x, const float*, float* dy, float* dx, int64_t n, const StepContext&) override {
    if (!dx) return;
    for (int64_t i = 0; i < n * outFeatures(); ++i) dx[i] = x[i] > 0.0f ? dy[i] : slope_ * dy[i];
  }

 private:
  float slope_;
};

std::unique_ptr<Layer> make(const LayerArgs& args, const LayerPlace& place) {
  const double slope = std::get<LeakyReLUSpec>(args).negativeSlope;
  if (!(slope >= 0.0 && std::isfinite(slope)))  // Keras refuses a negative slope too
    throw place.argError("negative_slope", " must be a number of 0 or more, got " + formatNumber("%g", slope));
  return std::make_unique<LeakyReLU>(slope);
}

double slopeOf(const LayerArgs& args) { return std::get<LeakyReLUSpec>(args).negativeSlope; }

LayerKind entry() {
  LayerKind k;
  k.type = "LeakyReLU";
  k.help = "Like relu, but lets a small share of negative values through: x above 0, negative_slope x below";
  k.icon = "layer_leaky_relu";
  k.example = LeakyReLUSpec{};
  k.exampleInput = {6};
  k.make = make;
  k.describe = [](const LayerArgs& a) { return formatNumber("%g", slopeOf(a)); };
  k.keras.cls = "LeakyReLU";
  k.keras.renamed = {{"alpha", "negative_slope"}};
  k.onnx = [](const Layer& l, OnnxGraph& g) {
    g.node("LeakyRelu", l.name + "/LeakyRelu", {}, {{"alpha", static_cast<float>(slopeOf(l.args()))}});
  };
  k.tf = [](const LayerArgs& a, const Layer&, const TfContext& c) {
    return "tf.keras.layers.LeakyReLU(negative_slope=" + pyNum(slopeOf(a)) + c.dtypeArg + c.nameArg + ")";
  };
  k.torch = [](const LayerArgs& a, const Layer&) { return "nn.LeakyReLU(negative_slope=" + pyNum(slopeOf(a)) + ")"; };
  return k;
}

}  // namespace

const LayerKind& LeakyReLUSpec::kind() {
  static const LayerKind k = entry();
  return k;
}

}  // namespace ml
