// Does the model fit the data? The input shape against the data's samples, the last layer's units
// against the classes (or target values), its activation against the loss. Messages name the
// screen and the field a person changes, never a JSON key; fitToData() makes the change itself.
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

struct FitProblem {
  enum class Where { Input, Output, Loss, Model } where = Where::Model;
  int layer = -1;       // the layer to mark: 0 for the input, the last layer for the output
  std::string message;  // "Model screen, Input shape: the data gives 13 features; the model expects 28x28 ..."
};

struct FitCheck {
  std::vector<FitProblem> problems;
  bool fits() const { return problems.empty(); }
  std::string summary() const;  // the problems, one per line
};

FitCheck checkFit(const Project& p, const DataFacts& data);
// The project with the input shape, the last layer's units (and activation) and the loss set so
// that the model fits the data; unchanged when it already fits.
Project fitToData(const Project& p, const DataFacts& data);

// Refuses (UserError) a loss, metric or input shape that does not fit the data: sparse vs one-hot
// labels, outputs vs classes or target values. Reading past the label buffer is the alternative.
void checkLossFitsData(const Loss& loss, MetricKind metric, const Sequential& model, const Dataset& data);

}  // namespace ml
