// Every mistake a hand-edited project file can hold is reported with the screen and field a user
// sees and the file's name; a JSON key appears only explained ("(x in the file's y section)"),
// never as a bare dotted path such as training.batch_size.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>

#include "Error.h"
#include "data/Dataset.h"
#include "nn/Optimizer.h"
#include "nn/Sequential.h"
#include "project/Project.h"
#include "project/Settings.h"
#include "support/Errors.h"
#include "telemetry/Channel.h"
#include "train/Trainer.h"

namespace {

namespace fs = std::filesystem;
using mltest::errorOf;
using nlohmann::json;

json good() {
  return json::parse(R"({"schema_version": 1, "name": "t",
    "model": {"input_shape": [4], "layers": [{"type": "Dense", "units": 3, "activation": "softmax"}]},
    "data": {"kind": "spirals", "samples": 100, "classes": 3},
    "training": {"epochs": 2, "batch_size": 8, "optimizer": {"name": "adam", "learning_rate": 0.001}},
    "distribute": {"devices": "cpu:2", "allreduce": "ring"}})");
}

std::string loadError(const json& j) {
  const fs::path file = fs::temp_directory_path() / ("mirrorlab-fieldwords-" + std::to_string(::getpid()) + ".json");
  std::ofstream(file) << j.dump(2);
  std::string msg;
  try {
    ml::Project::load(file.string());
  } catch (const ml::UserError& e) {
    msg = e.what();
  }
  fs::remove(file);
  return msg;
}

TEST(FieldWords, EveryKindOfMistakeNamesScreenFieldAndFile) {
  struct Case {
    const char* pointer;  // JSON pointer of the broken value
    json value;
    const char* screen;  // the words the message must hold
  };
  const std::vector<Case> cases = {
      {"/training/batch_size", "abc", "Training screen › Batch size (batch_size in the file's training section)"},
      {"/training/batch_size", 0, "Training screen › Batch size"},
      {"/training/epochs", 2.5, "Training screen › Epochs"},
      {"/training/lr_scaling", "cubic", "Training screen › Scaling rule (lr_scaling in the file's training section)"},
      {"/training/optimizer/epsilon", 0, "Training screen › ε (epsilon in the file's training › optimizer section)"},
      {"/training/optimizer/name", "adagrad", "Training screen › Optimizer"},
      {"/training/metrics", "accuracy", "Training screen › Metrics"},
      {"/training/warmup_epochs", -1, "Training screen › Warm-up"},
      {"/data/kind", "imagenet", "Data screen › Data set (kind in the file's data section)"},
      {"/data/validation_split", 1.5, "Data screen › Validation split"},
      {"/data/label_column", 3, "Data screen › Label column (label_column in the file's data section)"},
      {"/distribute/allreduce", "tree", "Devices screen › All-reduce (allreduce in the file's distribute section)"},
      {"/distribute/bucket_bytes", 1, "Devices screen › Gradient bucket"},
      {"/model/input_shape", json::array({4, -1}), "Model screen › Input shape (input_shape in the file's model section)"},
      {"/model/input_shape", json::array({4, 0}), "Model screen › Input shape"},
      {"/model/layers/0", 7, "Model screen › layer 1 (entry 1 of layers in the file's model section)"},
      {"/training/batchsize", 8, "'batchsize' in the file's training section is not a known field"},
      {"/training/optimizer/lr", 0.1, "'lr' in the file's training › optimizer section"},
      {"/name", 5, "Model screen › Project name (name at the top of the file)"},
      {"/training/checkpoint_every", "often",
       "Training screen › Checkpoint every (checkpoint_every in the file's training section) is 'often': write a whole number"},
  };
  // A dotted path (training.batch_size, model.layers[0]) outside the parentheses that explain it.
  const std::regex bareDotted(R"(\b(model|data|training|distribute)\.[a-z_]+)");
  for (const auto& c : cases) {
    json j = good();
    j[json::json_pointer(c.pointer)] = c.value;
    const std::string msg = loadError(j);
    SCOPED_TRACE(std::string(c.pointer) + ": " + msg);
    ASSERT_FALSE(msg.empty()) << "expected an error";
    EXPECT_NE(msg.find(c.screen), std::string::npos);
    EXPECT_NE(msg.find("mirrorlab-fieldwords-"), std::string::npos) << "the file's name";
    EXPECT_FALSE(std::regex_search(msg, bareDotted)) << "a bare JSON path";
  }
}

// The messages the layers below project/ give (nn/, data/, train/: the model, the loaders, the
// trainer's fit and batch checks), each reached with one bad value through the real code: every one
// names the screen and the field, then the snake_case key as the file spells it, and neither a
// camelCase key that exists nowhere (data.validationSplit) nor a bare dotted path (training.loss).
// A project that trains: 2 features, 3 classes, a softmax of 3.
ml::Project trainable(const std::function<void(json&)>& change = {}) {
  json j = good();
  j["model"]["input_shape"] = json::array({2});
  j["data"] = json::parse(R"({"kind": "spirals", "samples": 300, "classes": 3, "noise": 0.1})");
  j["training"]["batch_size"] = 30;
  j["distribute"]["devices"] = "cpu:1";
  if (change) change(j);
  return ml::Project::fromJson(j, "fieldwords.json");
}

void train(const ml::Project& p) {
  ml::TelemetryHub hub;
  ml::Trainer t(p, std::make_shared<const ml::DataSplit>(ml::loadData(p.data)), hub);
}

ml::DataSpec spec(const std::string& kind, const std::function<void(ml::DataSpec&)>& change = {}) {
  ml::DataSpec d;
  d.kind = *ml::dataKindNamed(kind);
  if (change) change(d);
  return d;
}

TEST(FieldWords, MessagesBelowTheProjectReaderNameScreenFieldAndKey) {
  const fs::path dir = fs::temp_directory_path() / ("mirrorlab-fieldwords-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string csv = (dir / "wine.csv").string();
  std::ofstream(csv) << "alcohol,ash,kind\n13.2,2.3,0\n12.1,2.0,1\n";
  struct Case {
    const char* what;
    std::function<void()> run;
    const char* words;  // screen › field
    const char* key;    // the key as the file spells it, explained
  };
  using D = ml::DataSpec;
  const std::vector<Case> cases = {
      // train/: the trainer's checks of loss, metric and batch against the data.
      {"unknown loss", [] { train(trainable([](json& j) { j["training"]["loss"] = "hinge"; })); }, "Training screen › Loss",
       "(loss in the file's training section): unknown loss 'hinge'"},
      {"unknown metric", [] { train(trainable([](json& j) { j["training"]["metrics"] = {"top_k"}; })); },
       "Training screen › Metrics", "(metrics in the file's training section): unknown metric 'top_k'"},
      {"one-hot loss on class indices",
       [] { train(trainable([](json& j) { j["training"]["loss"] = "categorical_crossentropy"; })); }, "Training screen › Loss",
       "(loss in the file's training section) is categorical_crossentropy"},
      {"mae on classes", [] { train(trainable([](json& j) { j["training"]["metrics"] = {"mae"}; })); },
       "Training screen › Metrics", "(metrics in the file's training section) is mae"},
      {"binary loss on 3 classes",
       [] {
         train(trainable([](json& j) {
           j["training"]["loss"] = "binary_crossentropy";
           j["model"]["layers"][0] = {{"type", "Dense"}, {"units", 1}, {"activation", "sigmoid"}};
         }));
       },
       "Training screen › Loss", "(loss in the file's training section) is binary_crossentropy, which needs labels 0 and 1"},
      {"batch above the data", [] { train(trainable([](json& j) { j["training"]["batch_size"] = 5000; })); },
       "Training screen › Batch size", "(batch_size in the file's training section) to at most 300"},
      {"batch below accumulation",
       [] {
         train(trainable([](json& j) {
           j["training"]["batch_size"] = 4;
           j["training"]["accumulate"] = 8;
         }));
       },
       "Training screen › Accumulation", "(accumulate in the file's training section)"},
      {"device list", [] { train(trainable([](json& j) { j["distribute"]["devices"] = "cpu:zero"; })); },
       "Devices screen › Devices", "(devices in the file's distribute section): device list 'cpu:zero'"},
      {"fault", [] { train(trainable([](json& j) { j["distribute"]["faults"] = {"explode"}; })); }, "Run menu › Inject a Fault",
       "(faults in the file's distribute section): fault 'explode'"},
      // nn/: the optimizer, the model and its layers.
      {"unknown optimizer", [] { ml::optimizerSetting("adagrad", "p.json"); }, "Training screen › Optimizer",
       "(name in the file's training › optimizer section) is 'adagrad' (allowed: sgd, adam, rmsprop)"},
      {"no input shape",
       [] {
         ml::Sequential m(ml::ModelSpec{{}, {ml::makeLayerSpec("Dense", {{"units", 3}})}});
       },
       "Model screen › Input shape", "(input_shape in the file's model section) is missing"},
      {"no layers",
       [] {
         ml::Sequential m(ml::ModelSpec{{2}, {}});
       },
       "Model screen › Layers", "(layers in the file's model section) is empty"},
      {"units 0", [] { ml::Sequential m(trainable([](json& j) { j["model"]["layers"][0]["units"] = 0; }).model); },
       "Model screen › layer 1 'dense' (Dense) › Units", "(units of entry 1 of layers in the file's model section)"},
      {"convolution of a grey image",
       [] {
         ml::Sequential m(ml::ModelSpec{{28, 28}, {ml::makeLayerSpec("Conv2D", {{"filters", 4}, {"kernel_size", 3}})}});
       },
       "set Model screen › Input shape", "(input_shape in the file's model section) to [28, 28, 1]"},
      // data/: the loaders.
      {"unknown data set", [] { ml::dataKindSetting("imagenet", "p.json"); }, "Data screen › Data set",
       "(kind in the file's data section) is 'imagenet' (allowed: fashion-mnist, idx, csv, spirals, blobs)"},
      {"validation share", [] { ml::loadData(spec("spirals", [](D& d) { d.validationSplit = 1.5; })); },
       "Data screen › Validation split", "(validation_split in the file's data section) is 1.5:"},
      {"validation share of a tiny set",
       [] {
         ml::loadData(spec("spirals", [](D& d) {
           d.samples = 3;
           d.validationSplit = 0.9;
         }));
       },
       "lower Data screen › Validation split", "(validation_split in the file's data section) or add data"},
      {"no classes", [] { ml::loadData(spec("spirals", [](D& d) { d.classes = 0; })); }, "Data screen › Classes",
       "(classes in the file's data section) is 0"},
      {"fewer samples than classes", [] { ml::loadData(spec("spirals", [](D& d) { d.samples = 2; })); }, "Data screen › Samples",
       "(samples in the file's data section) is 2"},
      {"negative noise", [] { ml::loadData(spec("spirals", [](D& d) { d.noise = -1; })); }, "Data screen › Noise",
       "(noise in the file's data section) must be"},
      {"no features", [] { ml::loadData(spec("blobs", [](D& d) { d.features = 0; })); }, "Data screen › Features",
       "(features in the file's data section) is 0"},
      {"IDX without files", [] { ml::loadData(spec("idx")); }, "Data screen › Train images",
       "(train_images in the file's data section) and Data screen › Train labels (train_labels"},
      {"IDX test images alone",
       [] { ml::loadData(spec("idx", [](D& d) { d.trainImages = d.trainLabels = d.testImages = "/nonexistent/x"; })); },
       "Data screen › Test labels", "(test_labels in the file's data section) go together"},
      {"CSV not chosen", [] { ml::loadData(spec("csv")); }, "Data screen › Folder / Training file",
       "(path in the file's data section) to the CSV file"},
      {"CSV is a folder", [dir] { ml::loadData(spec("csv", [dir](D& d) { d.path = dir.string(); })); },
       "Data screen › Folder / Training file", "(path in the file's data section)"},
      {"CSV test file is a folder",
       [dir, csv] {
         ml::loadData(spec("csv", [dir, csv](D& d) {
           d.path = csv;
           d.testPath = dir.string();
         }));
       },
       "Data screen › Test file", "(test_path in the file's data section)"},
      {"CSV missing", [] { ml::loadData(spec("csv", [](D& d) { d.path = "/nonexistent/wine.csv"; })); },
       "Data screen › Folder / Training file", "(path in the file's data section)"},
      {"CSV label column", [csv] { ml::loadData(spec("csv", [csv](D& d) { d.path = csv; })); }, "Data screen › Label column",
       "(label_column in the file's data section)"},
      {"Fashion-MNIST folder", [] { ml::loadData(spec("fashion-mnist", [](D& d) { d.path = "/nonexistent"; })); },
       "Data screen › Folder / Training file", "(path in the file's data section) to the folder"},
      // project/: the one key the reader named bare.
      {"checkpoint interval", [] { trainable([](json& j) { j["training"]["checkpoint_every"] = true; }); },
       "Training screen › Checkpoint every", "(checkpoint_every in the file's training section) must be a text"},
  };
  const std::regex bareDotted(R"(\b(model|data|training|distribute)\.[a-z_]+)");
  const std::regex camelKey(R"(\b[a-z]+[A-Z][A-Za-z]*\b)");  // validationSplit, labelColumn, trainImages
  for (const auto& c : cases) {
    const std::string msg = errorOf(c.run);
    SCOPED_TRACE(std::string(c.what) + ": " + msg);
    ASSERT_FALSE(msg.empty()) << "expected a refusal";
    EXPECT_NE(msg.find(c.words), std::string::npos) << "the screen and the field";
    EXPECT_NE(msg.find(c.key), std::string::npos) << "the key as the file spells it";
    EXPECT_FALSE(std::regex_search(msg, bareDotted)) << "a bare JSON path";
    EXPECT_FALSE(std::regex_search(msg, camelKey)) << "a camelCase key";
  }
  fs::remove_all(dir);
}

}  // namespace
