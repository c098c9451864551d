// Does the model fit the data? The input shape against the data's samples, the last layer's units
// against the classes (or target values), its activation against the loss. Messages name the
// field a person changes in the installed words (Field.h; the screens' in the studio and the CLI);
// fitToData() makes the change itself.
// The trainer refuses a run that does not fit with the same words; the studio shows them live.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "nn/Loss.h"
#include "project/Project.h"

namespace ml {

struct Dataset;
class Sequential;

// What the fit depends on, known without loading the data for generated sets and Fashion-MNIST.
struct DataFacts {
  std::string name;       // "wine.csv", "Fashion-MNIST", ...
  Shape sampleShape;      // {13}, {28, 28}
  int numClasses = 0;     // 0: regression
  int64_t targetDim = 1;  // values per target (regression)
};
DataFacts factsOf(const Dataset& d);
// The facts a project's data section fixes without reading files; nullopt for CSV / IDX files.
std::optional<DataFacts> knownFacts(const DataSpec& d);

// The labels a data set gives, as Keras' losses name them: integer class indices (sparse_*), the
// two classes 0 and 1 (binary_crossentropy with one sigmoid output, or sparse_* with two softmax
// ones), one-hot rows (categorical_crossentropy), numbers to regress (mean_squared_error).
enum class LabelKind { Integer, Binary, OneHot, Numeric };
LabelKind labelKindOf(const DataFacts& d);
// "integer class labels 0-2 (3 classes)", "0/1 labels (2 classes)", "numeric targets (1 value each)"
std::string labelsInWords(const DataFacts& d);

// The losses the Training screen offers (Keras' names), each with what it takes and, for these
// labels, why it does not fit ("" when it does).
struct LossOption {
  std::string name;   // "sparse_categorical_crossentropy"
  std::string takes;  // "integer class labels"
  std::string misfit;
};
std::vector<LossOption> lossOptions(const DataFacts& d);

struct FitProblem {
  enum class Where { Input, Output, Loss, Model } where = Where::Model;
  int layer = -1;             // the layer to mark: 0 for the input, the last layer for the output
  std::string message;        // "Model screen, Input shape: the data gives 13 features; the model expects 28x28 ..."
  std::string field() const;  // the field to change: "model.input_shape", "training.loss", "model.layers[2]"
};

struct FitCheck {
  std::vector<FitProblem> problems;
  bool fits() const { return problems.empty(); }
  std::string summary() const;  // the problems, one per line
};

FitCheck checkFit(const Project& p, const DataFacts& data);
// The project with the input shape, and the last layer (units, activation) and the loss chosen
// together so that the model fits the data: 0/1 labels keep one sigmoid output with
// binary_crossentropy when the model or the loss already says binary, else get a softmax per class
// with sparse_categorical_crossentropy. Fitting a fitted project changes nothing.
Project fitToData(const Project& p, const DataFacts& data);

// Refuses (UserError) a loss, metric or input shape that does not fit the data: sparse vs one-hot
// labels, outputs vs classes or target values. Reading past the label buffer is the alternative.
void checkLossFitsData(const Loss& loss, MetricKind metric, const Sequential& model, const Dataset& data);

}  // namespace ml
