// Model-against-data checks in the words of the studio's screens, and the one-step fix.
#include "train/FitCheck.h"

#include "Error.h"
#include "FieldNames.h"
#include "data/Dataset.h"
#include "nn/Loss.h"
#include "nn/Sequential.h"

namespace ml {

static std::string dims(const Shape& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "x" : "") + std::to_string(s[i]);
  return out.empty() ? "()" : out;
}

static std::string commas(const Shape& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out;
}

DataFacts factsOf(const Dataset& d) { return {d.name, d.sampleShape, d.numClasses, d.targetDim}; }

std::optional<DataFacts> knownFacts(const DataSpec& d) {
  if (d.kind == "fashion-mnist") return DataFacts{"Fashion-MNIST", {28, 28}, 10, 1};
  if (d.kind == "spirals") return DataFacts{"spirals", {2}, d.classes, 1};
  if (d.kind == "blobs") return DataFacts{"blobs", {d.features}, d.classes, 1};
  return std::nullopt;
}

std::string FitCheck::summary() const {
  std::string s;
  for (const auto& p : problems) s += (s.empty() ? "" : "\n") + p.message;
  return s;
}

static int lastDense(const ModelSpec& m) {
  for (int i = static_cast<int>(m.layers.size()) - 1; i >= 0; --i)
    if (m.layers[static_cast<size_t>(i)].type == "Dense") return i;
  return -1;
}

static std::string lastActivation(const ModelSpec& m) {
  for (int i = static_cast<int>(m.layers.size()) - 1; i >= 0; --i) {
    const auto& l = m.layers[static_cast<size_t>(i)];
    if (l.type == "Dense" || l.type == "Activation") return l.args.value("activation", std::string("linear"));
  }
  return "linear";
}

FitCheck checkFit(const Project& p, const DataFacts& data) {
  FitCheck fc;
  std::optional<Sequential> m;
  try {
    m.emplace(p.model);
  } catch (const std::exception&) {
    return fc;  // the model itself does not build: the Model screen names that layer already
  }
  const int last = static_cast<int>(m->layerCount()) - 1;
  const int64_t features = numel(data.sampleShape);
  if (m->inFeatures() != features)
    fc.problems.push_back({FitProblem::Where::Input, 0,
                           "Model screen, Input shape: the data (" + data.name + ") gives " +
                               (data.sampleShape.size() > 1 ? dims(data.sampleShape) + " = " : "") + std::to_string(features) +
                               " features per sample; the model expects " + dims(m->inputShape()) + ". Set Input shape to " +
                               commas(data.sampleShape) + " (or click Fit to data)."});
  const Loss loss = Loss::make(p.training.loss, p.training.fromLogits);
  const std::string lastName = last >= 0 ? m->layer(static_cast<size_t>(last)).name : "";
  if (loss.isClassification() && data.numClasses <= 0) {
    fc.problems.push_back({FitProblem::Where::Loss, last,
                           "Training screen, Loss: " + p.training.loss + " needs class labels, but " + data.name +
                               " has numeric targets. Click Fit to data on the Model screen to use mean squared error."});
  } else if (loss.kind() == LossKind::BinaryCrossentropy) {
    const int64_t want = data.targetDim == 1 && data.numClasses == 2 ? 1 : data.targetDim;
    if (m->outFeatures() != want)
      fc.problems.push_back({FitProblem::Where::Output, last,
                             "Model screen, last layer '" + lastName + "': it gives " + std::to_string(m->outFeatures()) +
                                 " outputs but binary_crossentropy needs one per 0/1 target (" + std::to_string(want) +
                                 "). Set its Units to " + std::to_string(want) + "."});
    else if (!p.training.fromLogits && lastActivation(p.model) != "sigmoid")
      fc.problems.push_back({FitProblem::Where::Output, last,
                             "Model screen, last layer '" + lastName + "': its Activation is " + lastActivation(p.model) +
                                 " but binary_crossentropy expects probabilities. Set its Activation to sigmoid."});
  } else if (loss.isClassification()) {
    if (m->outFeatures() != data.numClasses)
      fc.problems.push_back({FitProblem::Where::Output, last,
                             "Model screen, last layer '" + lastName + "': it gives " + std::to_string(m->outFeatures()) +
                                 " outputs but the data has " + std::to_string(data.numClasses) + " classes. Set its Units to " +
                                 std::to_string(data.numClasses) + " (or click Fit to data)."});
    else if (!p.training.fromLogits && lastActivation(p.model) != "softmax")
      fc.problems.push_back(
          {FitProblem::Where::Output, last,
           "Model screen, last layer '" + lastName + "': its Activation is " + lastActivation(p.model) +
               " but the loss expects class probabilities. Set its Activation to softmax (or click Fit to data)."});
  } else if (m->outFeatures() != data.targetDim) {
    fc.problems.push_back({FitProblem::Where::Output, last,
                           "Model screen, last layer '" + lastName + "': it gives " + std::to_string(m->outFeatures()) +
                               " outputs but each target has " + std::to_string(data.targetDim) + " value" +
                               (data.targetDim == 1 ? "" : "s") + ". Set its Units to " + std::to_string(data.targetDim) +
                               " (or click Fit to data)."});
  }
  return fc;
}

Project fitToData(const Project& in, const DataFacts& data) {
  Project p = in;
  p.model.inputShape = data.sampleShape;
  const bool classes = data.numClasses > 0;
  if (classes && !Loss::make(p.training.loss, p.training.fromLogits).isClassification()) {
    p.training.loss = "sparse_categorical_crossentropy";
    p.training.fromLogits = false;
    p.training.metrics = {"accuracy"};
  } else if (!classes && Loss::make(p.training.loss, p.training.fromLogits).isClassification()) {
    p.training.loss = "mean_squared_error";
    p.training.metrics = {"mae"};
  }
  const int d = lastDense(p.model);
  if (d < 0) {
    p.model.layers.push_back({"Dense", "", {{"units", classes ? data.numClasses : data.targetDim}}});
  } else {
    auto& args = p.model.layers[static_cast<size_t>(d)].args;
    args["units"] = classes ? static_cast<int64_t>(data.numClasses) : data.targetDim;
    if (classes && !p.training.fromLogits) args["activation"] = "softmax";
    if (!classes && args.value("activation", std::string("linear")) == "softmax") args["activation"] = "linear";
    // A separate Activation layer after it would override the choice: drop it.
    if (static_cast<size_t>(d) + 1 < p.model.layers.size() && p.model.layers.back().type == "Activation")
      p.model.layers.pop_back();
  }
  return p;
}

namespace {
// mae compares every output with a target value: the targets must have as many.
void checkMetricFitsData(MetricKind metric, int64_t k, const std::string& last, const Dataset& data) {
  const bool classLabels = data.numClasses > 0 && data.targetDim == 1;
  if (metric == MetricKind::MeanAbsoluteError && data.targetDim != k)
    throw UserError(fieldInWords("training.metrics") + " is mae, which compares each of the " + std::to_string(k) +
                    " outputs of " + last + " with a target value, but '" + data.name + "' has " +
                    std::to_string(data.targetDim) + " value(s) per sample" +
                    (classLabels ? " (class labels): use accuracy for classification" : ""));
}
}  // namespace

void checkLossFitsData(const Loss& loss, MetricKind metric, const Sequential& m, const Dataset& data) {
  const int64_t k = m.outFeatures();
  // The last layer as the Model screen lists it; its Units where it has them (Dense).
  const size_t lastIndex = m.layerCount() - 1;
  const Layer& lastLayer = m.layer(lastIndex);
  const std::string last = lastLayer.type() == "Dense" ? layerArgInWords(lastIndex, lastLayer.name, lastLayer.type(), "units")
                                                       : layerInWords(lastIndex, lastLayer.name, lastLayer.type());
  const std::string lossField = fieldInWords("training.loss") + " is " + loss.name();
  if (m.inFeatures() != data.featureCount())
    throw UserError(fieldInWords("model.input_shape") + " is " + shapeToString(m.inputShape(), false) +
                    " but it does not fit the data set '" + data.name + "', whose samples have shape " +
                    shapeToString(data.sampleShape, false) + ": set it to " + shapeToString(data.sampleShape, false));
  const bool classLabels = data.numClasses > 0 && data.targetDim == 1;
  switch (loss.kind()) {
    case LossKind::SparseCategoricalCrossentropy:
      if (data.numClasses <= 0)
        throw UserError(lossField + ", which needs class labels, but '" + data.name +
                        "' has regression targets: use mean_squared_error");
      if (k != data.numClasses || data.targetDim != 1)
        throw UserError(last + " gives " + std::to_string(k) + " outputs but the data set has " +
                        std::to_string(data.numClasses) + " classes: give the layer " + std::to_string(data.numClasses) +
                        " units");
      break;
    case LossKind::CategoricalCrossentropy:
      // Keras' convention: categorical_crossentropy takes one-hot rows, sparse_categorical_crossentropy class indices.
      if (classLabels)
        throw UserError(lossField + ", which expects one-hot labels (" + std::to_string(k) +
                        " values per sample, such as [0, 1, 0]), but the data set '" + data.name +
                        "' has integer class labels (one class index per sample): use sparse_categorical_crossentropy, "
                        "which takes class indices (as in Keras: sparse_* for integer labels, the plain loss for one-hot rows)");
      if (data.targetDim != k)
        throw UserError(lossField + ", which expects " + std::to_string(k) + " one-hot values per sample (one per output of " +
                        last + ") but '" + data.name + "' has " + std::to_string(data.targetDim) + " target values per sample");
      break;
    case LossKind::BinaryCrossentropy:
      if (data.targetDim != k)
        throw UserError(lossField + ", which compares each of the " + std::to_string(k) + " outputs of " + last +
                        " with a 0/1 target, but '" + data.name + "' has " + std::to_string(data.targetDim) +
                        " target value(s) per sample" +
                        (classLabels && data.numClasses > 2
                             ? " (" + std::to_string(data.numClasses) + " classes): use sparse_categorical_crossentropy with " +
                                   std::to_string(data.numClasses) + " softmax units"
                             : ": give it " + std::to_string(data.targetDim) + " unit(s) with a sigmoid"));
      if (classLabels && data.numClasses > 2)
        throw UserError(lossField + ", which needs labels 0 and 1, but '" + data.name + "' has " +
                        std::to_string(data.numClasses) + " classes: use sparse_categorical_crossentropy with " +
                        std::to_string(data.numClasses) + " softmax units");
      break;
    case LossKind::MeanSquaredError:
      if (data.targetDim != k)
        throw UserError(last + " gives " + std::to_string(k) + " outputs but the targets of '" + data.name + "' have " +
                        std::to_string(data.targetDim) + " value(s) per sample" +
                        (classLabels ? ": these are class labels, use sparse_categorical_crossentropy with " +
                                           std::to_string(data.numClasses) + " units (or 1 unit to regress the class index)"
                                     : ": give it " + std::to_string(data.targetDim) + " units"));
      break;
  }
  checkMetricFitsData(metric, k, last, data);
}

}  // namespace ml
