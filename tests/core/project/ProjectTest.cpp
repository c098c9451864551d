// Project files: the shipped examples load, toJson/fromJson round trips, and every validation
// error names the field it is about (the message is what a user sees in the CLI and the studio).
#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <filesystem>
#include <fstream>

#include "Error.h"
#include "nn/Sequential.h"
#include "project/Project.h"
#include "support/Errors.h"

#ifndef MIRRORLAB_SOURCE_DIR
#error "MIRRORLAB_SOURCE_DIR must point at the repository (see tests/core/project/CMakeLists.txt)"
#endif

namespace ml {
namespace {

namespace fs = std::filesystem;
using mltest::projectError;
using nlohmann::json;

// A small valid project; tests break one field at a time.
json validJson() {
  return json::parse(R"({
    "schema_version": 1,
    "name": "t",
    "model": {"input_shape": [28, 28], "layers": [
      {"type": "Flatten"}, {"type": "Dense", "units": 16, "activation": "relu"},
      {"type": "Dense", "units": 10, "activation": "softmax"}]},
    "data": {"kind": "fashion-mnist", "path": "/data/fm"},
    "training": {"epochs": 2, "batch_size": 32, "optimizer": {"name": "adam", "learning_rate": 0.001},
                 "loss": "sparse_categorical_crossentropy", "metrics": ["accuracy"], "seed": 3},
    "distribute": {"devices": "cpu:2", "allreduce": "ring"}
  })");
}

#define EXPECT_ERROR_MENTIONS(j, ...)                                                           \
  do {                                                                                          \
    const std::string msg_ = projectError(j);                                                   \
    ASSERT_FALSE(msg_.empty()) << "expected a UserError";                                       \
    for (const char* want_ : {__VA_ARGS__})                                                     \
      EXPECT_NE(msg_.find(want_), std::string::npos) << "\"" << want_ << "\" not in: " << msg_; \
  } while (0)

std::vector<fs::path> shippedProjects() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fs::path(MIRRORLAB_SOURCE_DIR) / "projects"))
    if (e.path().extension() == ".json") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(ProjectFiles, ShippedProjectsLoadAndBuild) {
  const auto files = shippedProjects();
  ASSERT_FALSE(files.empty()) << "no projects/*.json under " << MIRRORLAB_SOURCE_DIR;
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    Project p;
    ASSERT_NO_THROW(p = Project::load(f.string()));
    EXPECT_FALSE(p.model.layers.empty());
    // The model builds and its output fits the loss.
    Sequential m(p.model);
    EXPECT_GT(m.paramCount(), 0);
    EXPECT_EQ(p.schemaVersion, kProjectSchemaVersion);
  }
}

TEST(ProjectFiles, FashionMlpValues) {
  const Project p = Project::load(MIRRORLAB_SOURCE_DIR "/projects/fashion-mlp.json");
  EXPECT_EQ(p.model.inputShape, (Shape{28, 28}));
  ASSERT_EQ(p.model.layers.size(), 3u);
  EXPECT_EQ(p.model.layers[0].type(), "Flatten");
  EXPECT_EQ(p.model.layers[1].as<DenseSpec>()->units, 128);
  EXPECT_EQ(p.training.batchSize, 128);
  EXPECT_EQ(p.training.optimizer.kind, OptimizerKind::Adam);
  EXPECT_DOUBLE_EQ(p.training.optimizer.learningRate, 0.001);
  EXPECT_EQ(p.training.seed, 42u);
  EXPECT_EQ(Sequential(p.model).paramCount(), 101770);
}

TEST(ProjectRoundTrip, ShippedProjects) {
  for (const auto& f : shippedProjects()) {
    SCOPED_TRACE(f.string());
    const Project p = Project::load(f.string());
    const json once = p.toJson();
    const json twice = Project::fromJson(once).toJson();
    EXPECT_EQ(once.dump(), twice.dump());
  }
}

// Every non-default value, for every data kind and optimizer: nothing is lost on the way.
TEST(ProjectRoundTrip, EveryKindAndOptimizer) {
  const std::vector<json> datas = {
      {{"kind", "fashion-mnist"}, {"path", "/d"}, {"validation_split", 0.1}},
      {{"kind", "idx"}, {"train_images", "a"}, {"train_labels", "b"}, {"test_images", "c"}, {"test_labels", "d"}},
      {{"kind", "csv"}, {"path", "x.csv"}, {"label_column", "y"}, {"standardize", true}, {"test_path", "t.csv"}},
      {{"kind", "spirals"}, {"samples", 500}, {"classes", 4}, {"noise", 0.3}, {"seed", 9}},
      {{"kind", "blobs"}, {"samples", 50}, {"classes", 2}, {"features", 5}, {"noise", 1.5}, {"seed", 2}},
  };
  const std::vector<json> opts = {
      {{"name", "sgd"}, {"learning_rate", 0.05}, {"momentum", 0.9}, {"nesterov", true}},
      {{"name", "adam"}, {"learning_rate", 0.002}, {"beta_1", 0.8}, {"beta_2", 0.99}, {"epsilon", 1e-6}},
      {{"name", "rmsprop"}, {"learning_rate", 0.003}, {"rho", 0.8}, {"momentum", 0.5}, {"epsilon", 1e-5}},
  };
  for (const auto& d : datas)
    for (const auto& o : opts) {
      json j = validJson();
      j["description"] = "round trip";
      j["data"] = d;
      j["training"]["optimizer"] = o;
      j["training"]["per_device_batch"] = true;
      j["training"]["from_logits"] = true;
      j["training"]["lr_scaling"] = "sqrt";
      j["training"]["warmup_epochs"] = 1.5;
      j["training"]["lr_decay_epochs"] = json::array({3, 7});
      j["training"]["lr_decay_factor"] = 0.2;
      j["training"]["accumulate"] = 3;
      j["training"]["metrics"] = json::array({"accuracy", "mae"});
      j["distribute"] = {{"devices", "gpu:0,1"},    {"allreduce", "nccl"},     {"bucket_bytes", 4096},
                         {"threads_per_device", 2}, {"shard_optimizer", true}, {"workers", 4}};
      j["model"]["layers"][1]["name"] = "hidden";
      j["model"]["layers"][1]["kernel_initializer"] = "he_normal";
      SCOPED_TRACE(d.dump() + " " + o.dump());
      const Project p = Project::fromJson(j);
      const json once = p.toJson();
      const Project q = Project::fromJson(once);
      EXPECT_EQ(once.dump(), q.toJson().dump());
      // Every field the file gave survives (the output may add defaults, never drop or change one).
      for (const char* section : {"data", "distribute"})
        for (auto it = j[section].begin(); it != j[section].end(); ++it)
          EXPECT_EQ(once[section][it.key()], it.value()) << section << "." << it.key();
      for (auto it = o.begin(); it != o.end(); ++it)
        EXPECT_EQ(once["training"]["optimizer"][it.key()], it.value()) << "optimizer." << it.key();
      for (auto it = j["training"].begin(); it != j["training"].end(); ++it) {
        if (it.key() == "optimizer") continue;
        EXPECT_EQ(once["training"][it.key()], it.value()) << "training." << it.key();
      }
      EXPECT_EQ(once["model"], j["model"]);
      EXPECT_EQ(q.model.layers[1].name, "hidden");
      EXPECT_EQ(q.model.layers[1].as<DenseSpec>()->kernelInitializer.name, "he_normal");
    }
}

TEST(ProjectValidation, WorkersMustBeAWholeNumberFromOne) {
  json j = Project().toJson();
  j["distribute"]["workers"] = 0;
  try {
    Project::fromJson(j);
    ADD_FAILURE() << "0 workers accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("workers"), std::string::npos) << e.what();
  }
  j["distribute"]["workers"] = "two";
  EXPECT_THROW(Project::fromJson(j), UserError);
  j["distribute"]["workers"] = 3;
  EXPECT_EQ(Project::fromJson(j).distribute.workers, 3);
}

TEST(ProjectRoundTrip, SaveAndLoadFile) {
  const fs::path file = fs::temp_directory_path() / ("mirrorlab_project_" + std::to_string(::getpid()) + ".json");
  const Project p = Project::fromJson(validJson());
  p.save(file.string());
  const Project q = Project::load(file.string());
  fs::remove(file);
  EXPECT_EQ(p.toJson().dump(), q.toJson().dump());
}

TEST(ProjectDefaults, MinimalProjectGetsKerasDefaults) {
  const Project p =
      Project::fromJson(json::parse(R"({"model": {"input_shape": [2], "layers": [{"type": "Dense", "units": 3}]}})"));
  EXPECT_EQ(p.schemaVersion, 1);
  EXPECT_EQ(p.training.optimizer.kind, OptimizerKind::Adam);
  EXPECT_DOUBLE_EQ(p.training.optimizer.learningRate, 0.001);
  EXPECT_DOUBLE_EQ(p.training.optimizer.epsilon, 1e-7);
  EXPECT_EQ(p.training.batchSize, 128);
  EXPECT_EQ(p.data.kind, ml::DataKind::FashionMnist);
  EXPECT_EQ(p.distribute.devices.spec, "cpu:1");
}

TEST(ProjectDefaults, SgdDefaultsToKerasLearningRate) {
  json j = validJson();
  j["training"]["optimizer"] = "sgd";
  EXPECT_DOUBLE_EQ(Project::fromJson(j).training.optimizer.learningRate, 0.01);
  j["training"]["optimizer"] = {{"name", "sgd"}};
  EXPECT_DOUBLE_EQ(Project::fromJson(j).training.optimizer.learningRate, 0.01);
  j["training"]["optimizer"] = {{"name", "sgd"}, {"learning_rate", 0.5}};
  EXPECT_DOUBLE_EQ(Project::fromJson(j).training.optimizer.learningRate, 0.5);
  j["training"]["optimizer"] = "rmsprop";
  EXPECT_EQ(Project::fromJson(j).training.optimizer.kind, OptimizerKind::RmsProp);
  EXPECT_DOUBLE_EQ(Project::fromJson(j).training.optimizer.learningRate, 0.001);
}

// ---- Validation errors name the field ------------------------------------------------------------

TEST(ProjectErrors, UnknownTopLevelField) {
  json j = validJson();
  j["modle"] = json::object();
  EXPECT_ERROR_MENTIONS(j, "p.json", "'modle' at the top of the file", "is not a known field", "model");
}

TEST(ProjectErrors, UnknownTrainingField) {
  json j = validJson();
  j["training"]["batchsize"] = 64;
  EXPECT_ERROR_MENTIONS(j, "'batchsize' in the file's training section", "is not a known field", "batch_size");
}

TEST(ProjectErrors, UnknownNestedFields) {
  json j = validJson();
  j["training"]["optimizer"]["lr"] = 0.1;
  EXPECT_ERROR_MENTIONS(j, "'lr' in the file's training › optimizer section", "learning_rate");
  j = validJson();
  j["data"]["folder"] = "/x";
  EXPECT_ERROR_MENTIONS(j, "'folder' in the file's data section");
  j = validJson();
  j["distribute"]["gpus"] = 2;
  EXPECT_ERROR_MENTIONS(j, "'gpus' in the file's distribute section");
  j = validJson();
  j["model"]["inputs"] = json::array({2});
  EXPECT_ERROR_MENTIONS(j, "'inputs' in the file's model section");
}

TEST(ProjectErrors, WrongTypes) {
  json j = validJson();
  j["training"]["batch_size"] = "abc";
  EXPECT_ERROR_MENTIONS(j, "(batch_size in the file's training section)", "\"abc\"");
  j = validJson();
  j["training"]["epochs"] = 2.5;
  EXPECT_ERROR_MENTIONS(j, "(epochs in the file's training section)", "2.5");
  j = validJson();
  j["training"]["from_logits"] = "yes";
  EXPECT_ERROR_MENTIONS(j, "(from_logits in the file's training section)", "true or false");
  j = validJson();
  j["training"]["optimizer"]["learning_rate"] = "fast";
  EXPECT_ERROR_MENTIONS(j, "(learning_rate in the file's training › optimizer section)");
  j = validJson();
  j["name"] = 5;
  EXPECT_ERROR_MENTIONS(j, "name", "a string");
  j = validJson();
  j["training"]["metrics"] = "accuracy";
  EXPECT_ERROR_MENTIONS(j, "(metrics in the file's training section)");
  j = validJson();
  j["training"] = json::array();
  EXPECT_ERROR_MENTIONS(j, "training", "JSON object");
}

TEST(ProjectErrors, OutOfRangeValues) {
  json j = validJson();
  j["training"]["epochs"] = 0;
  EXPECT_ERROR_MENTIONS(j, "(epochs in the file's training section)", "at least 1", "got 0");
  j = validJson();
  j["training"]["batch_size"] = -4;
  EXPECT_ERROR_MENTIONS(j, "(batch_size in the file's training section)", "-4");
  j = validJson();
  j["training"]["accumulate"] = 0;
  EXPECT_ERROR_MENTIONS(j, "(accumulate in the file's training section)");
  j = validJson();
  j["training"]["optimizer"]["learning_rate"] = 0;
  EXPECT_ERROR_MENTIONS(j, "(learning_rate in the file's training › optimizer section)", "positive");
  j = validJson();
  j["training"]["optimizer"] = {{"name", "sgd"}, {"momentum", 1.0}};
  EXPECT_ERROR_MENTIONS(j, "(momentum in the file's training › optimizer section)");
  j = validJson();
  j["training"]["warmup_epochs"] = -1;
  EXPECT_ERROR_MENTIONS(j, "(warmup_epochs in the file's training section)");
  for (const json& bad : {json::array({3, 3}), json::array({5, 2}), json::array({0}), json::array({1.5}), json(4)}) {
    j = validJson();
    j["training"]["lr_decay_epochs"] = bad;
    EXPECT_ERROR_MENTIONS(j, "(lr_decay_epochs in the file's training section)", "increasing order");
  }
  for (const double bad : {0.0, 1.5, -0.1}) {
    j = validJson();
    j["training"]["lr_decay_factor"] = bad;
    EXPECT_ERROR_MENTIONS(j, "(lr_decay_factor in the file's training section)", "at most 1");
  }
  j = validJson();
  j["data"]["validation_split"] = 1.0;
  EXPECT_ERROR_MENTIONS(j, "(validation_split in the file's data section)");
  j = validJson();
  j["distribute"]["bucket_bytes"] = 2;
  EXPECT_ERROR_MENTIONS(j, "(bucket_bytes in the file's distribute section)");
  j = validJson();
  j["model"]["input_shape"] = json::array({28, 0});
  EXPECT_ERROR_MENTIONS(j, "(input_shape in the file's model section)");
}

TEST(ProjectErrors, UnknownOptimizer) {
  json j = validJson();
  j["training"]["optimizer"]["name"] = "adagrad";
  EXPECT_ERROR_MENTIONS(j, "(name in the file's training › optimizer section)", "'adagrad'", "sgd, adam, rmsprop");
  j["training"]["optimizer"] = "adagrad";
  EXPECT_ERROR_MENTIONS(j, "(name in the file's training › optimizer section)", "'adagrad'");
}

TEST(ProjectErrors, UnknownDataKind) {
  json j = validJson();
  j["data"]["kind"] = "imagenet";
  EXPECT_ERROR_MENTIONS(j, "(kind in the file's data section)", "'imagenet'", "fashion-mnist");
}

TEST(ProjectErrors, BadLrScaling) {
  json j = validJson();
  j["training"]["lr_scaling"] = "cubic";
  EXPECT_ERROR_MENTIONS(j, "(lr_scaling in the file's training section)", "'cubic'", "none, linear, sqrt");
}

TEST(ProjectErrors, BadAllreduce) {
  json j = validJson();
  j["distribute"]["allreduce"] = "tree";
  EXPECT_ERROR_MENTIONS(j, "(allreduce in the file's distribute section)", "'tree'");
}

TEST(ProjectErrors, NewerSchemaVersion) {
  json j = validJson();
  static_assert(kProjectSchemaVersion == 1, "update the expected message below");
  j["schema_version"] = 2;
  EXPECT_ERROR_MENTIONS(j, "File format version (schema_version at the top of the file) is 2", "versions 1..1",
                        "update Mirrorlab");
  j["schema_version"] = 0;
  EXPECT_ERROR_MENTIONS(j, "schema_version");
}

TEST(ProjectErrors, MissingModelAndLayers) {
  json j = validJson();
  j.erase("model");
  EXPECT_ERROR_MENTIONS(j, "model", "is missing");
  j = validJson();
  j["model"].erase("input_shape");
  EXPECT_ERROR_MENTIONS(j, "(input_shape in the file's model section)");
  j = validJson();
  j["model"].erase("layers");
  EXPECT_ERROR_MENTIONS(j, "(layers in the file's model section)");
  j = validJson();
  j["model"]["layers"][1] = {{"units", 3}};
  EXPECT_ERROR_MENTIONS(j, "entry 2 of layers in the file's model section", "type");
}

TEST(ProjectErrors, NotAnObject) { EXPECT_ERROR_MENTIONS(json::array({1, 2}), "JSON object"); }

class ProjectFileErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() / ("mirrorlab_project_bad_" + std::to_string(::getpid()) + ".json")).string();
  }
  void TearDown() override { fs::remove(path_); }
  std::string loadError(const std::string& text) {
    std::ofstream(path_) << text;
    try {
      Project::load(path_);
    } catch (const UserError& e) {
      return e.what();
    }
    return "";
  }
  std::string path_;
};

TEST_F(ProjectFileErrors, InvalidJsonText) {
  const std::string msg = loadError(R"({"schema_version": 1, "model": {"input_shape": [2],)");
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
  EXPECT_NE(msg.find(path_), std::string::npos) << msg;
}

TEST_F(ProjectFileErrors, ErrorsNameTheFile) {
  const std::string msg = loadError(R"({"model": {"input_shape": [2], "layers": []}, "training": {"epochs": 0}})");
  EXPECT_NE(msg.find(path_), std::string::npos) << msg;
  EXPECT_NE(msg.find("Training screen › Epochs (epochs in the file's training section)"), std::string::npos) << msg;
}

TEST_F(ProjectFileErrors, MissingFile) {
  try {
    Project::load(path_ + ".missing");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open"), std::string::npos) << e.what();
  }
}

// ---- Model errors name the layer: an argument's form when the file is read, shapes in Sequential ----

std::string modelError(const json& layers, const json& inputShape = json::array({28, 28})) {
  json j = validJson();
  j["model"]["layers"] = layers;
  j["model"]["input_shape"] = inputShape;
  try {
    const Project p = Project::fromJson(j);
    Sequential m(p.model);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(ProjectModelErrors, UnknownLayerType) {
  const std::string msg = modelError(json::parse(R"([{"type": "Flatten"}, {"type": "Conv3D", "filters": 8}])"));
  EXPECT_NE(msg.find("Model screen › layer 2 'conv3d' (Conv3D) (entry 2 of layers in the file's model section)"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("unknown layer type 'Conv3D'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Conv2D"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Dense"), std::string::npos) << msg;  // lists what is allowed
}

TEST(ProjectModelErrors, DenseWithoutUnits) {
  const std::string msg = modelError(json::parse(R"([{"type": "Flatten"}, {"type": "Dense", "activation": "relu"}])"));
  EXPECT_NE(msg.find("Model screen › layer 2 'dense' (Dense) › Units (units of entry 2 of layers in the file's model "
                     "section) is required"),
            std::string::npos)
      << msg;
}

TEST(ProjectModelErrors, DenseAfter2DInputWithoutFlatten) {
  const std::string msg = modelError(json::parse(R"([{"type": "Dense", "units": 8, "name": "hidden"}])"));
  EXPECT_NE(msg.find("Model screen › layer 1 'hidden' (Dense)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(None, 28, 28)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Flatten"), std::string::npos) << msg;
}

TEST(ProjectModelErrors, BadLayerArguments) {
  auto expectIn = [](const std::string& msg, std::initializer_list<const char*> wants) {
    ASSERT_FALSE(msg.empty());
    for (const char* w : wants) EXPECT_NE(msg.find(w), std::string::npos) << "\"" << w << "\" not in: " << msg;
  };
  expectIn(modelError(json::parse(R"([{"type": "Dense", "units": 8, "unit": 3}])"), json::array({4})),
           {"Model screen › layer 1 'dense' (Dense) (entry 1 of layers", "unknown argument 'unit'", "units"});
  const char* units = "Model screen › layer 1 'dense' (Dense) › Units (units of entry 1 of layers in the file's model section)";
  expectIn(modelError(json::parse(R"([{"type": "Dense", "units": "8"}])"), json::array({4})), {units, "wrong type"});
  expectIn(modelError(json::parse(R"([{"type": "Dense", "units": 0}])"), json::array({4})),
           {units, "must be a positive integer, got 0"});
  expectIn(modelError(json::parse(R"([{"type": "Dense", "units": 4, "activation": "gelu"}])"), json::array({4})),
           {"layer 1 'dense' (Dense) › Activation (activation of entry 1", "gelu"});
  expectIn(modelError(json::parse(R"([{"type": "Dense", "units": 4, "kernel_initializer": "lecun"}])"), json::array({4})),
           {"layer 1 'dense' (Dense) › Kernel initializer (kernel_initializer of entry 1", "lecun"});
  expectIn(modelError(json::parse(R"([{"type": "Dropout", "rate": 1.5}])"), json::array({4})),
           {"Model screen › layer 1 'dropout' (Dropout) › Rate (rate of entry 1", "must be in [0, 1)"});
  expectIn(modelError(json::parse(R"([{"type": "Activation"}])"), json::array({4})),
           {"layer 1 'activation' (Activation) › Activation (activation of entry 1", "is required"});
  expectIn(modelError(json::array()), {"Model screen › Layers (layers in the file's model section) is empty"});
}

}  // namespace
}  // namespace ml

namespace ml {
namespace {

// Integers the field's C++ type cannot hold must be refused, not wrapped: a seed of -1 would
// become 18446744073709551615 and epochs 4294967297 would silently become 1.
TEST(ProjectErrors, IntegersOutsideTheFieldTypeAreRejected) {
  struct Case {
    const char* field;
    json project;
  };
  std::vector<Case> cases;
  json j = validJson();
  j["training"]["seed"] = -1;
  cases.push_back({"(seed in the file's training section)", j});
  j = validJson();
  j["data"] = {{"kind", "spirals"}, {"seed", -5}};
  cases.push_back({"(seed in the file's data section)", j});
  j = validJson();
  j["training"]["epochs"] = 4294967297LL;  // 2^32 + 1
  cases.push_back({"(epochs in the file's training section)", j});
  j = validJson();
  j["data"] = {{"kind", "blobs"}, {"classes", 4294967299LL}};
  cases.push_back({"(classes in the file's data section)", j});
  for (const auto& c : cases) {
    const std::string msg = projectError(c.project);
    EXPECT_NE(msg.find(c.field), std::string::npos)
        << c.field << ": expected a UserError naming the field, got \"" << msg << "\"; parsed value "
        << (msg.empty() ? Project::fromJson(c.project).toJson().dump() : std::string());
  }
}

}  // namespace
}  // namespace ml
