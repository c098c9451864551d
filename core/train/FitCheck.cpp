// Model-against-data checks, naming fields in the installed words (Field.h), and the one-step fix.
#include "train/FitCheck.h"

#include <algorithm>

#include "Error.h"
#include "Field.h"
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
  if (d.kind == DataKind::FashionMnist) return DataFacts{"Fashion-MNIST", {28, 28}, 10, 1};
  if (d.kind == DataKind::Spirals) return DataFacts{"spirals", {2}, d.classes, 1};
  if (d.kind == DataKind::Blobs) return DataFacts{"blobs", {d.features}, d.classes, 1};
  return std::nullopt;
}

std::string FitCheck::summary() const {
  std::string s;
  for (const auto& p : problems) s += (s.empty() ? "" : "\n") + p.message;
  return s;
}

static int lastDense(const ModelSpec& m) {
  for (int i = static_cast<int>(m.layers.size()) - 1; i >= 0; --i)
    if (m.layers[static_cast<size_t>(i)].as<DenseSpec>()) return i;
  return -1;
}

static std::string lastActivation(const ModelSpec& m) {
  for (int i = static_cast<int>(m.layers.size()) - 1; i >= 0; --i) {
    const auto& l = m.layers[static_cast<size_t>(i)];
    if (l.as<DenseSpec>() || l.as<ActivationSpec>()) return toString(*activationOf(l.args));
  }
  return "linear";
}

LabelKind labelKindOf(const DataFacts& d) {
  if (d.numClasses <= 0) return LabelKind::Numeric;
  if (d.targetDim > 1) return LabelKind::OneHot;
  return d.numClasses == 2 ? LabelKind::Binary : LabelKind::Integer;
}

std::string labelsInWords(const DataFacts& d) {
  switch (labelKindOf(d)) {
    case LabelKind::Binary: return "0/1 labels (2 classes)";
    case LabelKind::Integer:
      return "integer class labels 0-" + std::to_string(d.numClasses - 1) + " (" + std::to_string(d.numClasses) + " classes)";
    case LabelKind::OneHot: return "one-hot rows of " + std::to_string(d.targetDim) + " values";
    case LabelKind::Numeric: break;
  }
  return "numeric targets (" + std::to_string(d.targetDim) + (d.targetDim == 1 ? " value" : " values") + " each)";
}

std::vector<LossOption> lossOptions(const DataFacts& d) {
  const LabelKind k = labelKindOf(d);
  const std::string given = d.name + " gives " + labelsInWords(d);
  auto unless = [&](bool fits) { return fits ? std::string() : given; };
  return {{"sparse_categorical_crossentropy", "integer class labels, a softmax output per class",
           unless(k == LabelKind::Integer || k == LabelKind::Binary)},
          {"binary_crossentropy", "0/1 labels, one sigmoid output", unless(k == LabelKind::Binary)},
          {"categorical_crossentropy", "one-hot label rows, a softmax output per class", unless(k == LabelKind::OneHot)},
          {"mean_squared_error", "numeric targets, a linear output per value", unless(k == LabelKind::Numeric)}};
}

namespace {

std::string lossField(const std::string& loss) { return fieldHeading("training.loss") + ": " + loss; }

// A loss that cannot take these labels, whatever the last layer: the loss is what to change.
std::optional<std::string> lossMisfit(const Project& p, const Loss& loss, const DataFacts& data) {
  const LabelKind k = labelKindOf(data);
  const std::string given = data.name + " gives " + labelsInWords(data);
  const std::string fix = " (or click " + fitToDataAction("training.loss") + ").";
  if (loss.isClassification() && k == LabelKind::Numeric)
    return lossField(lossText(p.training)) + " needs class labels, but " + given + ": choose mean_squared_error" + fix;
  if (!loss.isClassification() && k != LabelKind::Numeric)
    return lossField(lossText(p.training)) + " regresses numbers, but " + given + ": choose sparse_categorical_crossentropy" +
           (k == LabelKind::Binary ? " or binary_crossentropy" : "") + fix;
  if (loss.kind() == LossKind::CategoricalCrossentropy && k != LabelKind::OneHot)
    return lossField(lossText(p.training)) + " takes one-hot label rows, but " + given +
           ": choose sparse_categorical_crossentropy, which takes class indices" + fix;
  if (loss.kind() == LossKind::BinaryCrossentropy && k == LabelKind::Integer)
    return lossField(lossText(p.training)) + " takes 0/1 labels, but " + given + ": choose sparse_categorical_crossentropy" + fix;
  if (loss.kind() == LossKind::SparseCategoricalCrossentropy && k == LabelKind::OneHot)
    return lossField(lossText(p.training)) + " takes class indices, but " + given + ": choose categorical_crossentropy" + fix;
  return std::nullopt;
}

}  // namespace

std::string FitProblem::field() const {
  switch (where) {
    case Where::Input: return "model.input_shape";
    case Where::Loss: return "training.loss";
    case Where::Output: return layerPath(static_cast<size_t>(std::max(layer, 0)));
    case Where::Model: break;
  }
  return "model.layers";
}

// Long: one message per misfit (input, loss, last layer for each kind of loss), each naming the
// field and the fix, tried in the order a user fixes them.
FitCheck checkFit(const Project& p, const DataFacts& data) {
  FitCheck fc;
  std::optional<Sequential> m;
  try {
    m.emplace(p.model);
  } catch (const std::exception&) {
    return fc;  // the model itself does not build: its own refusal names that layer already
  }
  const int last = static_cast<int>(m->layerCount()) - 1;
  const int64_t features = numel(data.sampleShape);
  if (m->inFeatures() != features)
    fc.problems.push_back({FitProblem::Where::Input, 0,
                           fieldHeading("model.input_shape") + ": the data (" + data.name + ") gives " +
                               (data.sampleShape.size() > 1 ? dims(data.sampleShape) + " = " : "") + std::to_string(features) +
                               " features per sample; the model expects " + dims(m->inputShape()) + ". Set " +
                               fieldLabel("model.input_shape") + " to " + commas(data.sampleShape) + " (or click " +
                               fitToDataAction("model.input_shape") + ")."});
  const Loss loss = Loss::make(p.training.loss, p.training.fromLogits);
  if (auto why = lossMisfit(p, loss, data)) {
    fc.problems.push_back({FitProblem::Where::Loss, last, *why});
    return fc;  // the last layer's problem depends on which loss is chosen
  }
  const std::string lastName = last >= 0 ? m->layer(static_cast<size_t>(last)).name : "";
  const std::string layer = lastLayerHeading(lastName) + ": ";
  const std::string units = argLabel("units"), activation = argLabel("activation");
  const std::string fit = fitToDataAction(layerPath(static_cast<size_t>(std::max(last, 0))));
  const int64_t outputs = m->outFeatures();
  const std::string gives = "it gives " + std::to_string(outputs) + (outputs == 1 ? " output" : " outputs");
  const std::string act = lastActivation(p.model);
  const bool binaryData = labelKindOf(data) == LabelKind::Binary;
  if (loss.kind() == LossKind::BinaryCrossentropy) {
    if (outputs != 1)
      fc.problems.push_back({FitProblem::Where::Output, last,
                             layer + gives + " but binary_crossentropy takes one output, the probability of class 1. Set its " +
                                 units + " to 1 with " + activation + " sigmoid, or keep " + std::to_string(outputs) +
                                 " softmax outputs and set " + fieldPlace("training.loss") +
                                 " to sparse_categorical_crossentropy (" + fit + " does the first)."});
    else if (!p.training.fromLogits && act != "sigmoid")
      fc.problems.push_back({FitProblem::Where::Output, last,
                             layer + "its " + activation + " is " + act +
                                 " but binary_crossentropy expects a probability. Set its " + activation +
                                 " to sigmoid (or click " + fit + ")."});
  } else if (loss.isClassification()) {
    if (outputs != data.numClasses) {
      std::string msg = layer + gives + " but the data has " + std::to_string(data.numClasses) + " classes. Set its " + units +
                        " to " + std::to_string(data.numClasses) + " with " + activation + " softmax";
      if (binaryData && outputs == 1)
        msg += ", or keep the one" + std::string(act == "sigmoid" ? " sigmoid" : "") + " output and set " +
               fieldPlace("training.loss") + " to binary_crossentropy (" + fit + " does this)";
      fc.problems.push_back({FitProblem::Where::Output, last, msg + "."});
    } else if (!p.training.fromLogits && act != "softmax") {
      fc.problems.push_back({FitProblem::Where::Output, last,
                             layer + "its " + activation + " is " + act + " but the loss expects class probabilities. Set its " +
                                 activation + " to softmax (or click " + fit + ")."});
    }
  } else if (outputs != data.targetDim) {
    fc.problems.push_back({FitProblem::Where::Output, last,
                           layer + gives + " but each target has " + std::to_string(data.targetDim) + " value" +
                               (data.targetDim == 1 ? "" : "s") + ". Set its " + units + " to " + std::to_string(data.targetDim) +
                               " (or click " + fit + ")."});
  }
  return fc;
}

Project fitToData(const Project& in, const DataFacts& data) {
  Project p = in;
  auto& t = p.training;
  // The same values in another layout (28, 28, 1 for a convolution over 28x28 images) already fit.
  if (numel(p.model.inputShape) != numel(data.sampleShape)) p.model.inputShape = data.sampleShape;
  const LabelKind kind = labelKindOf(data);
  const Loss current = Loss::make(t.loss, t.fromLogits);
  const int d = lastDense(p.model);
  const int64_t lastUnits = d < 0 ? -1 : p.model.layers[static_cast<size_t>(d)].as<DenseSpec>()->units;
  // A binary model (one output, a sigmoid, or binary_crossentropy chosen) stays binary.
  const bool binary = kind == LabelKind::Binary &&
                      (current.kind() == LossKind::BinaryCrossentropy || lastUnits == 1 || lastActivation(p.model) == "sigmoid");
  int64_t units = data.targetDim;
  Act activation = Act::Linear;
  if (kind == LabelKind::Numeric) {
    t.loss = LossKind::MeanSquaredError;
  } else if (binary) {
    t.loss = LossKind::BinaryCrossentropy;
    units = 1;
    activation = Act::Sigmoid;
  } else {
    t.loss = kind == LabelKind::OneHot ? LossKind::CategoricalCrossentropy : LossKind::SparseCategoricalCrossentropy;
    units = data.numClasses;
    activation = Act::Softmax;
  }
  if (t.fromLogits && kind != LabelKind::Numeric) activation = Act::Linear;  // the loss applies the softmax/sigmoid
  if (kind == LabelKind::Numeric) t.fromLogits = false;
  const std::string metric = t.metrics.empty() ? "" : t.metrics.front();
  if (kind == LabelKind::Numeric && metric != "mae" && metric != "mean_absolute_error") t.metrics = {"mae"};
  if (kind != LabelKind::Numeric && (metric.empty() || metric == "mae" || metric == "mean_absolute_error"))
    t.metrics = {"accuracy"};
  if (d < 0) {
    p.model.layers.push_back({"", DenseSpec{.units = units, .activation = activation}});
    return p;
  }
  auto& dense = *p.model.layers[static_cast<size_t>(d)].as<DenseSpec>();
  dense.units = units;
  dense.activation = activation;
  // A separate Activation layer after it would override the choice: drop it.
  if (static_cast<size_t>(d) + 1 < p.model.layers.size() && p.model.layers.back().as<ActivationSpec>()) p.model.layers.pop_back();
  return p;
}

namespace {
// mae compares every output with a target value: the targets must have as many.
void checkMetricFitsData(MetricKind metric, int64_t k, const std::string& last, const Dataset& data) {
  const bool classLabels = data.numClasses > 0 && data.targetDim == 1;
  if (metric == MetricKind::MeanAbsoluteError && data.targetDim != k)
    throw fieldError("training.metrics", " is mae, which compares each of the " + std::to_string(k) + " outputs of " + last +
                                             " with a target value, but '" + data.name + "' has " +
                                             std::to_string(data.targetDim) + " value(s) per sample" +
                                             (classLabels ? " (class labels): use accuracy for classification" : ""));
}
}  // namespace

void checkLossFitsData(const Loss& loss, MetricKind metric, const Sequential& m, const Dataset& data) {
  const int64_t k = m.outFeatures();
  // The last layer as the model lists it; its units where it has them (Dense).
  const size_t lastIndex = m.layerCount() - 1;
  const Layer& lastLayer = m.layer(lastIndex);
  const std::string last = lastLayer.type() == "Dense" ? layerArgInWords(lastIndex, lastLayer.name, lastLayer.type(), "units")
                                                       : layerInWords(lastIndex, lastLayer.name, lastLayer.type());
  const std::string lossField = fieldInWords("training.loss") + " is " + loss.name();
  if (m.inFeatures() != data.featureCount())
    throw fieldError("model.input_shape", " is " + shapeToString(m.inputShape(), false) + " but it does not fit the data set '" +
                                              data.name + "', whose samples have shape " +
                                              shapeToString(data.sampleShape, false) + ": set it to " +
                                              shapeToString(data.sampleShape, false));
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
