// core/ names fields by their JSON path and words them through the installed FieldWords: with none
// installed a message speaks the file's terms (no screen), with the screens' words installed it
// reads as the CLI and the studio print it, and a refusal about one field carries that field's path.
#include <gtest/gtest.h>

#include <functional>

#include "Error.h"
#include "Field.h"
#include "data/Dataset.h"
#include "nn/Loss.h"
#include "nn/Optimizer.h"
#include "nn/Sequential.h"
#include "project/Project.h"
#include "project/ScreenWords.h"
#include "project/Settings.h"
#include "telemetry/Channel.h"
#include "train/FitCheck.h"
#include "train/Trainer.h"

namespace {

using nlohmann::json;

// Words for one test, back to the screens' (what ScreenWordsEnvironment.cpp installs) after it.
class WordsFor {
 public:
  explicit WordsFor(const ml::FieldWords* words) { ml::setFieldWords(words); }
  ~WordsFor() { ml::setFieldWords(&ml::screenWords()); }
};

// 2 features, 3 classes, a softmax of 3: trains, until a test changes it.
json trainable() {
  return json::parse(R"({"schema_version": 1, "name": "t",
    "model": {"input_shape": [2], "layers": [{"type": "Dense", "units": 3, "activation": "softmax"}]},
    "data": {"kind": "spirals", "samples": 300, "classes": 3, "noise": 0.1},
    "training": {"epochs": 2, "batch_size": 30, "optimizer": {"name": "adam", "learning_rate": 0.001}},
    "distribute": {"devices": "cpu:1"}})");
}

void train(const json& j) {
  const ml::Project p = ml::Project::fromJson(j, "f.json");
  ml::TelemetryHub hub;
  ml::Trainer t(p, std::make_shared<const ml::DataSplit>(ml::loadData(p.data)), hub);
}

ml::UserError refusal(const std::function<void()>& run) {
  try {
    run();
  } catch (const ml::UserError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a refusal";
  return ml::UserError("");
}

json with(const std::function<void(json&)>& change) {
  json j = trainable();
  change(j);
  return j;
}

TEST(FieldId, WithoutWordsInstalledFieldsReadInTheFilesTerms) {
  WordsFor none(nullptr);
  EXPECT_EQ(ml::fieldInWords("training.batch_size"), "training.batch_size");
  EXPECT_EQ(ml::fieldInWords("model.layers[2].units"), "model.layers[2].units");
  EXPECT_EQ(ml::fieldPlace("training.loss"), "training.loss");
  EXPECT_EQ(ml::fieldHeading("training.loss"), "training.loss");
  EXPECT_EQ(ml::fieldLabel("model.input_shape"), "input_shape");
  EXPECT_EQ(ml::layerInWords(2, "dense_2", "Dense"), "layer 3 'dense_2' (Dense)");
  EXPECT_EQ(ml::layerBrief(2, "dense_2", "Dense"), "layer 3 'dense_2' (Dense)");
  EXPECT_EQ(ml::layerArgInWords(2, "dense_2", "Dense", "units"), "units of layer 3 'dense_2' (Dense)");
  EXPECT_EQ(ml::argLabel("kernel_size"), "kernel_size");

  // Real refusals from the reader, the model, the run plan and the fit check, worded plainly.
  const std::string epochs = refusal([] { train(with([](json& j) { j["training"]["epochs"] = 2.5; })); }).what();
  EXPECT_NE(epochs.find("f.json: training.epochs must be a whole number"), std::string::npos) << epochs;
  const std::string units = refusal([] { train(with([](json& j) { j["model"]["layers"][0]["units"] = 0; })); }).what();
  EXPECT_NE(units.find("units of layer 1 'dense' (Dense) must be a positive integer, got 0"), std::string::npos) << units;
  const std::string batch = refusal([] { train(with([](json& j) { j["training"]["batch_size"] = 400; })); }).what();
  EXPECT_NE(batch.find("set training.batch_size to at most 300"), std::string::npos) << batch;
  const std::string input = refusal([] { train(with([](json& j) { j["model"]["input_shape"] = json::array({3}); })); }).what();
  EXPECT_NE(input.find("model.input_shape: the data (spirals (3 arms)) gives 2 features per sample"), std::string::npos) << input;
  EXPECT_NE(input.find("Set input_shape to 2 (or click Fit to data in the studio)."), std::string::npos) << input;
  for (const std::string& msg : {epochs, units, batch, input}) EXPECT_EQ(msg.find("screen"), std::string::npos) << msg;
}

TEST(FieldId, TheScreenWordsReadAsTheCliAndTheStudioPrintThem) {
  WordsFor screens(&ml::screenWords());
  EXPECT_EQ(ml::fieldInWords("training.batch_size"), "Training screen › Batch size (batch_size in the file's training section)");
  EXPECT_EQ(ml::fieldInWords("training.optimizer.epsilon"),
            "Training screen › ε (epsilon in the file's training › optimizer section)");
  EXPECT_EQ(ml::fieldInWords("model.layers[2].units"),
            "Model screen › layer 3 › Units (units of entry 3 of layers in the file's model section)");
  EXPECT_EQ(ml::fieldInWords("model.input_shape[1]"),
            "Model screen › Input shape, value 2 (input_shape in the file's model section)");
  EXPECT_EQ(ml::fieldInWords("training"), "Training screen › Training (the file's training section)");
  EXPECT_EQ(ml::fieldInWords("name"), "Model screen › Project name (name at the top of the file)");
  EXPECT_EQ(ml::fieldInWords("distribute.hang_seconds"), "Hang timeout (hang_seconds in the file's distribute section)");
  EXPECT_EQ(ml::fieldPlace("training.loss"), "Training screen › Loss");
  EXPECT_EQ(ml::fieldHeading("model.input_shape"), "Model screen, Input shape");
  EXPECT_EQ(ml::fieldLabel("model.input_shape"), "Input shape");
  EXPECT_EQ(ml::layerInWords(2, "dense_2", "Dense"),
            "Model screen › layer 3 'dense_2' (Dense) (entry 3 of layers in the file's model section)");
  EXPECT_EQ(ml::layerBrief(2, "dense_2", "Dense"), "Model screen › layer 3 'dense_2' (Dense)");
  EXPECT_EQ(
      ml::layerArgInWords(2, "dense_2", "Dense", "kernel_size"),
      "Model screen › layer 3 'dense_2' (Dense) › Kernel size (kernel_size of entry 3 of layers in the file's model section)");
  EXPECT_EQ(ml::lastLayerHeading("dense_2"), "Model screen, last layer 'dense_2'");
  EXPECT_EQ(ml::fitToDataAction("training.loss"), "Fit to data on the Model screen");
  EXPECT_EQ(ml::fitToDataAction("model.input_shape"), "Fit to data");

  const std::string input = refusal([] { train(with([](json& j) { j["model"]["input_shape"] = json::array({3}); })); }).what();
  EXPECT_EQ(input.rfind("Model screen, Input shape: the data (spirals (3 arms)) gives 2 features per sample; the model "
                        "expects 3. Set Input shape to 2 (or click Fit to data).",
                        0),
            0u)
      << input;
}

TEST(FieldId, ARefusalAboutOneFieldCarriesItsPath) {
  struct Case {
    const char* what;
    std::function<void()> run;
    const char* field;
  };
  const Case cases[] = {
      {"reader: a fraction of epochs", [] { train(with([](json& j) { j["training"]["epochs"] = 2.5; })); }, "training.epochs"},
      {"reader: an unknown key", [] { train(with([](json& j) { j["training"]["epoch"] = 2; })); }, "training.epoch"},
      {"validate: a zero learning rate", [] { train(with([](json& j) { j["training"]["optimizer"]["learning_rate"] = 0; })); },
       "training.optimizer.learning_rate"},
      {"layer: zero units", [] { train(with([](json& j) { j["model"]["layers"][0]["units"] = 0; })); }, "model.layers[0].units"},
      {"layer: units of the wrong type", [] { train(with([](json& j) { j["model"]["layers"][0]["units"] = "8"; })); },
       "model.layers[0].units"},
      {"layer: an unknown argument", [] { train(with([](json& j) { j["model"]["layers"][0]["unit"] = 3; })); },
       "model.layers[0]"},
      {"layer: a second layer named the same",
       [] {
         train(with([](json& j) {
           j["model"]["layers"] = json::parse(R"([{"type": "Dense", "units": 4, "name": "a"},
                                                  {"type": "Dense", "units": 3, "name": "a", "activation": "softmax"}])");
         }));
       },
       "model.layers[1].name"},
      {"run plan: a batch above the data", [] { train(with([](json& j) { j["training"]["batch_size"] = 400; })); },
       "training.batch_size"},
      {"fit check: the input shape", [] { train(with([](json& j) { j["model"]["input_shape"] = json::array({3}); })); },
       "model.input_shape"},
      {"project: a bad device list", [] { train(with([](json& j) { j["distribute"]["devices"] = "cpu:zero"; })); },
       "distribute.devices"},
      {"data: no classes", [] { train(with([](json& j) { j["data"]["classes"] = 0; })); }, "data.classes"},
      {"loss: unknown", [] { ml::lossSetting("hinge", "p.json"); }, "training.loss"},
      {"optimizer: unknown", [] { ml::optimizerSetting("adagrad", "p.json"); }, "training.optimizer.name"},
  };
  for (const auto& c : cases) {
    const ml::UserError e = refusal(c.run);
    SCOPED_TRACE(std::string(c.what) + ": " + e.what());
    EXPECT_EQ(e.field(), c.field);
    const ml::UserError copy = e;  // a copy (as a catch by value makes) keeps it
    EXPECT_EQ(copy.field(), c.field);
  }
  // A refusal about no single field carries none.
  EXPECT_EQ(refusal([] {
              int64_t every = 0;
              bool inSteps = false;
              ml::parseCheckpointEvery("often", every, inSteps);
            }).field(),
            "");
}

}  // namespace
