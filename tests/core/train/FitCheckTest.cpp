// The fit check and Fit to data choose the last layer and the loss together: 0/1 labels keep a
// binary model binary (one sigmoid output, binary_crossentropy), several classes get a softmax
// per class, numbers get a linear output; a loss that cannot take the labels is named as the
// Training screen's Loss; fitting twice changes nothing, and every shipped example fits itself.
#include <gtest/gtest.h>

#include <filesystem>

#include "project/LayerJson.h"
#include "project/Project.h"
#include "train/FitCheck.h"

namespace {

ml::DataFacts binaryCsv() { return {"cancer.csv", {30}, 2, 1}; }
ml::DataFacts wineCsv() { return {"wine.csv", {13}, 3, 1}; }
ml::DataFacts housesCsv() { return {"houses.csv", {8}, 0, 1}; }

ml::Project model(const ml::DataFacts& d, int64_t units, const std::string& activation, const std::string& loss) {
  ml::Project p;
  p.model.inputShape = d.sampleShape;
  p.model.layers = {ml::makeLayerSpec("Dense", {{"units", 16}, {"activation", "relu"}}),
                    ml::makeLayerSpec("Dense", {{"units", units}, {"activation", activation}})};
  ml::setLoss(p.training, loss, "test");
  return p;
}

// Every argument of the last layer as the project file writes them.
nlohmann::json lastArgs(const ml::Project& p) { return ml::layerArgsToJson(p.model.layers.back().args, true); }

// Fit to data fits, and a second press changes nothing.
ml::Project fitTwice(const ml::Project& p, const ml::DataFacts& d) {
  const ml::Project once = ml::fitToData(p, d);
  EXPECT_TRUE(ml::checkFit(once, d).fits()) << ml::checkFit(once, d).summary();
  EXPECT_EQ(ml::fitToData(once, d).toJson(), once.toJson());
  return once;
}

TEST(FitCheck, ABinaryModelStaysBinary) {
  const auto d = binaryCsv();
  EXPECT_TRUE(ml::checkFit(model(d, 1, "sigmoid", "binary_crossentropy"), d).fits());
  EXPECT_TRUE(ml::checkFit(model(d, 2, "softmax", "sparse_categorical_crossentropy"), d).fits());
  // One sigmoid output with the default loss: the message names both ways out, and Fit to data
  // keeps the one output and chooses binary_crossentropy (it used to make Dense(2, softmax) and
  // then ask for Units 1).
  const auto p = model(d, 1, "sigmoid", "sparse_categorical_crossentropy");
  const std::string why = ml::checkFit(p, d).summary();
  EXPECT_NE(why.find("it gives 1 output but the data has 2 classes"), std::string::npos) << why;
  EXPECT_NE(why.find("set Training screen › Loss to binary_crossentropy"), std::string::npos) << why;
  const auto fitted = fitTwice(p, d);
  EXPECT_EQ(ml::lossText(fitted.training), "binary_crossentropy");
  EXPECT_EQ(lastArgs(fitted)["units"], 1);
  EXPECT_EQ(lastArgs(fitted)["activation"], "sigmoid");
  EXPECT_EQ(fitted.training.metrics, std::vector<std::string>{"accuracy"});  // binary_accuracy with this loss
  // binary_crossentropy chosen on a two-softmax model: binary, one sigmoid output.
  const auto fromLoss = fitTwice(model(d, 2, "softmax", "binary_crossentropy"), d);
  EXPECT_EQ(lastArgs(fromLoss)["units"], 1);
  EXPECT_EQ(lastArgs(fromLoss)["activation"], "sigmoid");
  // A softmax model with the sparse loss stays a softmax model.
  const auto softmax = fitTwice(model(d, 5, "softmax", "sparse_categorical_crossentropy"), d);
  EXPECT_EQ(ml::lossText(softmax.training), "sparse_categorical_crossentropy");
  EXPECT_EQ(lastArgs(softmax)["units"], 2);
}

TEST(FitCheck, ALossThatCannotTakeTheLabelsIsNamedOnTheTrainingScreen) {
  const auto wine = wineCsv();
  auto why = ml::checkFit(model(wine, 3, "sigmoid", "binary_crossentropy"), wine).summary();
  EXPECT_EQ(why.rfind("Training screen, Loss: binary_crossentropy takes 0/1 labels, but wine.csv gives integer class labels "
                      "0-2 (3 classes): choose sparse_categorical_crossentropy",
                      0),
            0u)
      << why;
  why = ml::checkFit(model(wine, 3, "softmax", "categorical_crossentropy"), wine).summary();
  EXPECT_NE(why.find("takes one-hot label rows"), std::string::npos) << why;
  why = ml::checkFit(model(wine, 1, "linear", "mean_squared_error"), wine).summary();
  EXPECT_NE(why.find("regresses numbers"), std::string::npos) << why;
  const auto houses = housesCsv();
  why = ml::checkFit(model(houses, 3, "softmax", "sparse_categorical_crossentropy"), houses).summary();
  EXPECT_NE(why.find("needs class labels, but houses.csv gives numeric targets (1 value each): choose mean_squared_error"),
            std::string::npos)
      << why;

  const auto multi = fitTwice(model(wine, 1, "sigmoid", "binary_crossentropy"), wine);
  EXPECT_EQ(ml::lossText(multi.training), "sparse_categorical_crossentropy");
  EXPECT_EQ(lastArgs(multi)["units"], 3);
  EXPECT_EQ(lastArgs(multi)["activation"], "softmax");
  const auto regression = fitTwice(model(houses, 3, "softmax", "sparse_categorical_crossentropy"), houses);
  EXPECT_EQ(ml::lossText(regression.training), "mean_squared_error");
  EXPECT_EQ(regression.training.metrics, std::vector<std::string>{"mae"});
  EXPECT_EQ(lastArgs(regression)["units"], 1);
  EXPECT_EQ(lastArgs(regression)["activation"], "linear");
}

TEST(FitCheck, TheLossOptionsSayWhichTakeTheseLabels) {
  auto misfitOf = [](const ml::DataFacts& d, const std::string& loss) {
    for (const auto& o : ml::lossOptions(d))
      if (o.name == loss) return o.misfit;
    return std::string("absent");
  };
  EXPECT_EQ(misfitOf(binaryCsv(), "binary_crossentropy"), "");
  EXPECT_EQ(misfitOf(binaryCsv(), "sparse_categorical_crossentropy"), "");
  EXPECT_EQ(misfitOf(binaryCsv(), "mean_squared_error"), "cancer.csv gives 0/1 labels (2 classes)");
  EXPECT_EQ(misfitOf(wineCsv(), "binary_crossentropy"), "wine.csv gives integer class labels 0-2 (3 classes)");
  EXPECT_EQ(misfitOf(housesCsv(), "mean_squared_error"), "");
  EXPECT_EQ(ml::labelKindOf({"one-hot", {4}, 3, 3}), ml::LabelKind::OneHot);
  EXPECT_EQ(misfitOf({"one-hot", {4}, 3, 3}, "categorical_crossentropy"), "");
}

TEST(FitCheck, EveryShippedExampleFitsItsDataAndFitToDataLeavesItAlone) {
  int checked = 0;
  for (const auto& f : std::filesystem::directory_iterator(MIRRORLAB_SOURCE_DIR "/projects")) {
    if (f.path().extension() != ".json") continue;
    const auto p = ml::Project::load(f.path().string());
    const auto facts = ml::knownFacts(p.data);
    if (!facts) continue;  // a file data set: the fit check runs once it is loaded
    SCOPED_TRACE(f.path().string());
    EXPECT_TRUE(ml::checkFit(p, *facts).fits()) << ml::checkFit(p, *facts).summary();
    EXPECT_EQ(ml::fitToData(p, *facts).toJson(), p.toJson());
    ++checked;
  }
  EXPECT_GE(checked, 5);
}

}  // namespace
