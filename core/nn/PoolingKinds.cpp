// MaxPooling2D, AveragePooling2D and GlobalAveragePooling2D in the registry, and how each format
// writes them (ONNX's channels-first pools, the generated programs' layers).
#include "nn/LayerKind.h"
#include "nn/Pooling.h"

namespace ml {

namespace {

template <class Spec>
std::unique_ptr<Layer> makePool(const LayerArgs& args, const LayerPlace& place) {
  const auto& s = std::get<Spec>(args);
  requireWindow(place, "pool_size", s.poolSize);
  const Pair strides = s.strides.value_or(s.poolSize);  // Keras' None: the pool size
  requireWindow(place, "strides", strides);
  const Window w{s.poolSize.rows, s.poolSize.cols, strides.rows, strides.cols, s.padding == Padding::Same};
  return std::make_unique<Pool2D>(std::is_same_v<Spec, MaxPooling2DSpec>, w);
}

template <class Spec>
std::string describePool(const LayerArgs& args) {
  const auto& s = std::get<Spec>(args);
  return pairText(s.poolSize) + (s.padding == Padding::Same ? ", same" : "");
}

void onnxPool(const Layer& layer, OnnxGraph& g) {
  const auto& p = dynamic_cast<const Pool2D&>(layer);
  g.channelsFirst(p.name);
  // AveragePool's count_include_pad 0: "same" windows average the positions inside, as TensorFlow's.
  g.node(p.isMax() ? "MaxPool" : "AveragePool", p.name + (p.isMax() ? "/MaxPool" : "/AveragePool"), {},
         onnxWindow(p.window(), p.geometry()));
}

std::string pair(int64_t a, int64_t b) { return pyShape(Shape{a, b}); }

// The strides as the built layer resolved them (the pool size when left out).
std::string tfPool(const LayerArgs& args, const Layer& layer, const TfContext& c) {
  const auto& p = dynamic_cast<const Pool2D&>(layer);
  const Window& w = p.window();
  const Padding padding = std::holds_alternative<MaxPooling2DSpec>(args) ? std::get<MaxPooling2DSpec>(args).padding
                                                                         : std::get<AveragePooling2DSpec>(args).padding;
  return "tf.keras.layers." + p.type() + "(" + pair(w.kh, w.kw) + ", strides=" + pair(w.sh, w.sw) +
         ", padding=" + pyStr(toString(padding)) + c.nameArg + ")";
}

std::string torchPool(const LayerArgs&, const Layer& layer) {
  const auto& p = dynamic_cast<const Pool2D&>(layer);
  const Window& w = p.window();
  return "pool2d(" + pyBool(p.isMax()) + ", " + pair(w.kh, w.kw) + ", " + pair(w.sh, w.sw) + ", " + pyBool(w.same) + ")";
}

template <class Spec>
LayerKind poolEntry(std::string_view type, std::string_view help) {
  LayerKind k;
  k.type = type;
  k.help = help;
  k.example = Spec{};
  k.exampleInput = {6, 6, 2};
  k.gpu = true;
  k.make = makePool<Spec>;
  k.describe = describePool<Spec>;
  k.keras.cls = type;
  k.keras.fixed = {{"data_format", std::string("channels_last")}};
  k.onnx = onnxPool;
  k.tf = tfPool;
  k.torch = torchPool;
  k.torchHelpers = kTorchSpatial;
  return k;
}

void onnxGlobalAverage(const Layer& l, OnnxGraph& g) {
  g.channelsFirst(l.name);
  g.node("GlobalAveragePool", l.name + "/GlobalAveragePool");  // (batch, c, 1, 1)
  g.node("Flatten", l.name + "/Flatten", {}, {{"axis", int64_t{1}}});
  g.layoutGone();  // (batch, c)
}

std::string tfGlobalAverage(const LayerArgs&, const Layer&, const TfContext& c) {
  return "tf.keras.layers.GlobalAveragePooling2D(" + (c.nameArg.empty() ? std::string() : c.nameArg.substr(2)) + ")";
}

std::string torchGlobalAverage(const LayerArgs&, const Layer&) { return "GlobalAveragePooling2D()"; }

LayerKind globalAverageEntry() {
  LayerKind k;
  k.type = "GlobalAveragePooling2D";
  k.help = "Averages each channel over the whole image: (h, w, c) -> (c)";
  k.example = GlobalAveragePooling2DSpec{};
  k.exampleInput = {4, 4, 3};
  k.gpu = true;
  k.make = [](const LayerArgs&, const LayerPlace&) -> std::unique_ptr<Layer> {
    return std::make_unique<GlobalAveragePooling2D>();
  };
  k.keras.cls = "GlobalAveragePooling2D";
  k.keras.fixed = {{"data_format", std::string("channels_last")}, {"keepdims", false}};
  k.onnx = onnxGlobalAverage;
  k.tf = tfGlobalAverage;
  k.torch = torchGlobalAverage;
  k.torchHelpers = kTorchSpatial;
  return k;
}

}  // namespace

const LayerKind& MaxPooling2DSpec::kind() {
  static const LayerKind k = poolEntry<MaxPooling2DSpec>("MaxPooling2D", "Keeps the largest value of each window");
  return k;
}

const LayerKind& AveragePooling2DSpec::kind() {
  static const LayerKind k = poolEntry<AveragePooling2DSpec>("AveragePooling2D", "Averages each window");
  return k;
}

const LayerKind& GlobalAveragePooling2DSpec::kind() {
  static const LayerKind k = globalAverageEntry();
  return k;
}

}  // namespace ml
