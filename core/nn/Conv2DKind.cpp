// Conv2D in the registry: the convolution built from Keras' arguments, and how each format writes
// it (Keras' Conv2D, ONNX's channels-first Conv, the generated programs' layers).
#include "nn/Conv2D.h"
#include "nn/LayerKind.h"

namespace ml {

namespace {

std::unique_ptr<Layer> make(const LayerArgs& args, const LayerPlace& place) {
  const auto& s = std::get<Conv2DSpec>(args);
  requirePositive(place, "filters", s.filters);
  requireWindow(place, "kernel_size", s.kernelSize);
  requireWindow(place, "strides", s.strides);
  requireInitializer(place, "kernel_initializer", s.kernelInitializer);
  requireInitializer(place, "bias_initializer", s.biasInitializer);
  const Window w{s.kernelSize.rows, s.kernelSize.cols, s.strides.rows, s.strides.cols, s.padding == Padding::Same};
  return std::make_unique<Conv2D>(s.filters, w, s.activation, s.useBias, s.kernelInitializer.name, s.biasInitializer.name);
}

std::string describe(const LayerArgs& args) {
  const auto& s = std::get<Conv2DSpec>(args);
  return std::to_string(s.filters) + ", " + pairText(s.kernelSize) + (s.padding == Padding::Same ? ", same" : "") +
         (s.activation != Act::Linear ? std::string(", ") + toString(s.activation) : "");
}

// kernel (kh, kw, in channels, filters), Keras' layout and Mirrorlab's, then bias (filters).
std::vector<WeightArray> weights(const Layer& layer) {
  const auto& c = dynamic_cast<const Conv2D&>(layer);
  const Window& w = c.window();
  const int64_t k = w.kh * w.kw * c.geometry().c * c.filters();
  std::vector<WeightArray> out = {{"kernel", {w.kh, w.kw, c.geometry().c, c.filters()}, 0}};
  if (c.useBias()) out.push_back({"bias", {c.filters()}, k});
  return out;
}

void onnx(const Layer& layer, OnnxGraph& g) {
  const auto& l = dynamic_cast<const Conv2D&>(layer);
  const std::string& n = l.name;
  g.channelsFirst(n);
  // ONNX's weight is (filters, in channels, kh, kw); Keras' kernel is (kh, kw, in, filters).
  const int64_t kh = l.window().kh, kw = l.window().kw, c = l.geometry().c, f = l.filters();
  std::vector<float> w(static_cast<size_t>(kh * kw * c * f));
  for (int64_t y = 0; y < kh; ++y)
    for (int64_t x = 0; x < kw; ++x)
      for (int64_t i = 0; i < c; ++i)
        for (int64_t o = 0; o < f; ++o)
          w[static_cast<size_t>(((o * c + i) * kh + y) * kw + x)] = l.kernel()[((y * kw + x) * c + i) * f + o];
  g.floats(n + "/kernel", {f, c, kh, kw}, w.data());
  std::vector<std::string> inputs{n + "/kernel"};
  if (l.bias()) {
    g.floats(n + "/bias", {f}, l.bias());
    inputs.push_back(n + "/bias");
  }
  g.node("Conv", n + "/Conv", inputs, onnxWindow(l.window(), l.geometry()));
  if (l.activation() == Act::Softmax) g.channelsLast(n);  // Mirrorlab's softmax spans the sample
  onnxActivation(g, l.activation(), n, l.outputShape);
}

std::string pair(const Pair& p) { return pyShape(Shape{p.rows, p.cols}); }

std::string tf(const LayerArgs& args, const Layer&, const TfContext& c) {
  const auto& s = std::get<Conv2DSpec>(args);
  return "tf.keras.layers.Conv2D(" + pyInt(s.filters) + ", " + pair(s.kernelSize) + ", strides=" + pair(s.strides) +
         ", padding=" + pyStr(toString(s.padding)) + ", activation=" + pyStr(toString(s.activation)) +
         ", use_bias=" + pyBool(s.useBias) + ", kernel_initializer=" + pyStr(s.kernelInitializer.name) +
         ", bias_initializer=" + pyStr(s.biasInitializer.name) + c.nameArg + ")";
}

// conv2d() of the generated program: nn.Conv2d wrapped for channels-last tensors and "same" padding.
std::string torch(const LayerArgs& args, const Layer& l) {
  const auto& s = std::get<Conv2DSpec>(args);
  return "conv2d(" + pyStr(l.name) + ", " + pyInt(l.inputShape.back()) + ", " + pyInt(s.filters) + ", " + pair(s.kernelSize) +
         ", " + pair(s.strides) + ", " + pyBool(s.padding == Padding::Same) + ", " + pyStr(s.kernelInitializer.name) + ", " +
         pyStr(s.biasInitializer.name) + ", " + pyBool(s.useBias) + ")";
}

LayerKind entry() {
  LayerKind k;
  k.type = "Conv2D";
  k.help = "2-D convolution over (height, width, channels) images";
  k.example = Conv2DSpec{.filters = 32, .kernelSize = {3, 3}, .activation = Act::Relu};
  k.exampleInput = {6, 6, 2};
  k.gpu = true;
  k.make = make;
  k.describe = describe;
  k.weights = weights;
  k.keras.cls = "Conv2D";
  k.keras.fixed = {
      {"data_format", std::string("channels_last")}, {"dilation_rate", std::vector<int64_t>{1, 1}}, {"groups", int64_t{1}}};
  for (const char* key : {"kernel_regularizer", "bias_regularizer", "kernel_constraint", "bias_constraint"})
    k.keras.fixed.push_back({key, nullptr});
  k.onnx = onnx;
  k.tf = tf;
  k.torch = torch;
  k.torchHelpers = kTorchSpatial;
  return k;
}

}  // namespace

const LayerKind& Conv2DSpec::kind() {
  static const LayerKind k = entry();
  return k;
}

}  // namespace ml
