// Every mistake a hand-edited project file can hold is reported with the screen and field a user
// sees and the file's name; a JSON key appears only explained ("(x in the file's y section)"),
// never as a bare dotted path such as training.batch_size.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "Error.h"
#include "project/Project.h"

namespace {

namespace fs = std::filesystem;
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

}  // namespace
