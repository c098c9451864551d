// BatchNormalization in the registry: the layer from Keras' arguments, its four weights in Keras'
// order, and how each format writes it (ONNX's inference BatchNormalization with the moving
// statistics, KerasBatchNorm in the PyTorch program).
#include "Error.h"
#include "Format.h"
#include "nn/BatchNorm.h"
#include "nn/LayerKind.h"

namespace ml {

namespace {

std::string number(double v) { return formatNumber("%.6g", v); }

std::unique_ptr<Layer> make(const LayerArgs& args, const LayerPlace& place) {
  const auto& s = std::get<BatchNormalizationSpec>(args);
  if (!(s.momentum >= 0.0 && s.momentum <= 1.0))
    throw place.argError("momentum", " must be in [0, 1], got " + number(s.momentum));
  if (!(s.epsilon > 0.0 && s.epsilon < 1.0)) throw place.argError("epsilon", " must be in (0, 1), got " + number(s.epsilon));
  return std::make_unique<BatchNorm>(s.momentum, s.epsilon, s.center, s.scale, s.synchronized);
}

std::string describe(const LayerArgs& args) {
  return std::get<BatchNormalizationSpec>(args).synchronized ? "synchronized" : "per-replica";
}

// gamma (with scale), beta (with center), then the two moving statistics no optimizer changes.
std::vector<WeightArray> weights(const Layer& layer) {
  const auto& b = dynamic_cast<const BatchNorm&>(layer);
  const int64_t c = b.channels();
  std::vector<WeightArray> out;
  int64_t at = 0;
  auto add = [&](const char* name, bool trainable) {
    out.push_back({name, {c}, at, trainable});
    at += c;
  };
  if (b.scale()) add("gamma", true);
  if (b.center()) add("beta", true);
  add("moving_mean", false);
  add("moving_variance", false);
  return out;
}

void onnx(const Layer& layer, OnnxGraph& g) {
  const auto& b = dynamic_cast<const BatchNorm&>(layer);
  const std::string& n = b.name;
  if (b.inputShape.size() == 3)
    g.channelsFirst(n);
  else if (b.inputShape.size() != 1)
    throw UserError("layer '" + n + "' (BatchNormalization) over a sample of shape " + shapeToString(b.inputShape) +
                    " cannot be exported to ONNX: ONNX normalises over axis 1, so give it features or images");
  const int64_t c = b.channels();
  std::vector<float> ones(static_cast<size_t>(c), 1.0f), zeros(static_cast<size_t>(c), 0.0f);
  g.floats(n + "/gamma", {c}, b.gamma() ? b.gamma() : ones.data());
  g.floats(n + "/beta", {c}, b.beta() ? b.beta() : zeros.data());
  g.floats(n + "/moving_mean", {c}, b.movingMean());
  g.floats(n + "/moving_variance", {c}, b.movingVariance());
  g.node("BatchNormalization", n + "/BatchNormalization", {n + "/gamma", n + "/beta", n + "/moving_mean", n + "/moving_variance"},
         {{"epsilon", static_cast<float>(b.epsilon())}});
}

// synchronized: Keras 3's argument (TensorFlow backend only).
std::string tf(const LayerArgs& args, const Layer&, const TfContext& c) {
  const auto& s = std::get<BatchNormalizationSpec>(args);
  return "tf.keras.layers.BatchNormalization(momentum=" + pyNum(s.momentum) + ", epsilon=" + pyNum(s.epsilon) +
         ", center=" + pyBool(s.center) + ", scale=" + pyBool(s.scale) + ", synchronized=" + pyBool(s.synchronized) + c.nameArg +
         ")";
}

// KerasBatchNorm of the generated program: Keras' layer written out (the last axis of any sample).
std::string torch(const LayerArgs& args, const Layer& l) {
  const auto& s = std::get<BatchNormalizationSpec>(args);
  return "KerasBatchNorm(" + pyStr(l.name) + ", " + pyInt(l.inputShape.back()) + ", " + pyNum(s.momentum) + ", " +
         pyNum(s.epsilon) + ", " + pyBool(s.center) + ", " + pyBool(s.scale) + ", " + pyBool(s.synchronized) + ")";
}

LayerKind entry() {
  LayerKind k;
  k.type = "BatchNormalization";
  k.help = "Normalises each channel with the batch's mean and variance (moving averages at evaluation)";
  k.example = BatchNormalizationSpec{};
  k.exampleInput = {4, 4, 3};
  k.gpu = true;
  k.make = make;
  k.describe = describe;
  k.weights = weights;
  k.keras.cls = "BatchNormalization";
  k.keras.fixed = {{"beta_initializer", Initializer{"zeros"}},
                   {"gamma_initializer", Initializer{"ones"}},
                   {"moving_mean_initializer", Initializer{"zeros"}},
                   {"moving_variance_initializer", Initializer{"ones"}}};
  k.keras.ignored = {"renorm_momentum"};  // read only with renorm on, which must be off
  k.keras.axis = KerasAxis::LastAxis;
  k.onnx = onnx;
  k.tf = tf;
  k.torch = torch;
  k.torchHelpers = kTorchBatchNorm;
  return k;
}

}  // namespace

const LayerKind& BatchNormalizationSpec::kind() {
  static const LayerKind k = entry();
  return k;
}

}  // namespace ml
