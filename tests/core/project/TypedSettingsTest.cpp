// The typed settings of a project: each is parsed once when the file (or the command line) is read,
// a bad value is refused there with the field named (message and identifier), and a round trip
// through the file keeps the value and the file's text.
#include <gtest/gtest.h>

#include <string>

#include "Error.h"
#include "project/Project.h"
#include "project/Settings.h"

namespace ml {
namespace {

using nlohmann::json;

json baseJson() {
  return json::parse(R"({
    "schema_version": 1, "name": "t",
    "model": {"input_shape": [4], "layers": [{"type": "Dense", "units": 3, "activation": "softmax"}]},
    "data": {"kind": "spirals"},
    "training": {"epochs": 1, "batch_size": 8},
    "distribute": {"devices": "cpu:2"}
  })");
}

// The UserError fromJson throws for j, which must throw one.
UserError refusal(const json& j) {
  try {
    Project::fromJson(j, "typed.json");
  } catch (const UserError& e) {
    return e;
  }
  ADD_FAILURE() << "no UserError for " << j.dump();
  return UserError("");
}

// Reads j, writes it back and reads that again: the text and the value survive.
Project roundTrip(const json& j) {
  const Project p = Project::fromJson(j, "typed.json");
  const json out = p.toJson();
  const Project back = Project::fromJson(out, "typed.json");
  EXPECT_EQ(back.toJson().dump(2), out.dump(2));
  return back;
}

TEST(TypedSettings, PrecisionIsRefusedWhenReadAndKeptByARoundTrip) {
  json j = baseJson();
  j["training"]["precision"] = "half";
  const UserError e = refusal(j);
  EXPECT_EQ(e.field(), "training.precision");
  EXPECT_NE(std::string(e.what()).find("typed.json: "), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("'half' (allowed: float32, mixed_bfloat16, mixed_float16)"), std::string::npos)
      << e.what();
  try {
    precisionSetting("fp8", "command line");
    ADD_FAILURE() << "fp8 accepted";
  } catch (const UserError& c) {
    EXPECT_EQ(c.field(), "training.precision");
    EXPECT_EQ(std::string(c.what()).rfind("command line: ", 0), 0u) << c.what();
  }
  j["training"]["precision"] = "mixed_bfloat16";
  const Project p = roundTrip(j);
  EXPECT_EQ(p.training.precision, Precision::MixedBfloat16);
  EXPECT_EQ(p.toJson()["training"]["precision"], "mixed_bfloat16");
}

// A loss name is read when the file is, with the message the trainer gave before; Keras' "mse"
// is mean_squared_error and stays "mse" in the file.
TEST(TypedSettings, LossIsRefusedWhenReadAndKeptByARoundTrip) {
  json j = baseJson();
  j["training"]["loss"] = "hinge";
  const UserError e = refusal(j);
  EXPECT_EQ(e.field(), "training.loss");
  EXPECT_NE(std::string(e.what()).find("typed.json: "), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find(": unknown loss 'hinge' (allowed: sparse_categorical_crossentropy, "), std::string::npos)
      << e.what();
  for (const char* name : {"categorical_crossentropy", "mse", "mean_squared_error", "binary_crossentropy"}) {
    j["training"]["loss"] = name;
    const Project p = roundTrip(j);
    EXPECT_EQ(p.toJson()["training"]["loss"], name);
    EXPECT_EQ(lossText(p.training), name);
  }
  EXPECT_EQ(roundTrip(j).training.loss, LossKind::BinaryCrossentropy);
  j["training"]["loss"] = "mse";
  EXPECT_EQ(roundTrip(j).training.loss, LossKind::MeanSquaredError);
}

}  // namespace
}  // namespace ml
