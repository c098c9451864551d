// The precision policy and loss-scale fields of a project: defaults that keep old files' text,
// round trips, and refusals that name the Training screen field and what is allowed.
#include <gtest/gtest.h>

#include "Error.h"
#include "project/Project.h"
#include "support/Errors.h"
#include "support/TestData.h"

namespace ml {
namespace {

using mltest::projectError;
using nlohmann::json;

json validJson() { return mltest::smallProjectJson(); }

TEST(ProjectPrecision, DefaultIsFloat32AndIsNotWritten) {
  const Project p = Project::fromJson(validJson());
  EXPECT_EQ(p.training.precision, ml::Precision::Float32);
  EXPECT_TRUE(p.training.lossScaling);
  EXPECT_EQ(p.training.lossScale, 32768.0);
  EXPECT_EQ(p.training.lossScaleGrowthSteps, 2000);
  const json out = p.toJson();
  EXPECT_FALSE(out["training"].contains("precision"));
  EXPECT_FALSE(out["training"].contains("loss_scale"));
  EXPECT_FALSE(out["training"].contains("loss_scale_growth_steps"));
}

TEST(ProjectPrecision, PoliciesAndLossScaleRoundTrip) {
  for (const char* name : {"float32", "mixed_bfloat16", "mixed_float16"}) {
    json j = validJson();
    j["training"]["precision"] = name;
    j["training"]["loss_scale"] = 1024;
    j["training"]["loss_scale_growth_steps"] = 50;
    const Project p = Project::fromJson(j);
    EXPECT_STREQ(toString(p.training.precision), name);
    EXPECT_EQ(p.training.lossScale, 1024.0);
    EXPECT_EQ(p.training.lossScaleGrowthSteps, 50);
    const Project back = Project::fromJson(p.toJson());
    EXPECT_EQ(back.toJson(), p.toJson());
    EXPECT_STREQ(toString(back.training.precision), name);
    EXPECT_EQ(back.training.lossScale, 1024.0);
    EXPECT_EQ(back.training.lossScaleGrowthSteps, 50);
  }
  json j = validJson();
  j["training"]["precision"] = "mixed_float16";
  j["training"]["loss_scale"] = "none";
  const Project p = Project::fromJson(j);
  EXPECT_FALSE(p.training.lossScaling);
  EXPECT_EQ(p.toJson()["training"]["loss_scale"], "none");
  EXPECT_FALSE(Project::fromJson(p.toJson()).training.lossScaling);
}

TEST(ProjectPrecision, UnknownPolicyNamesTheFieldAndTheAllowedNames) {
  json j = validJson();
  j["training"]["precision"] = "fp16";
  const std::string msg = projectError(j);
  for (const char* want : {"p.json", "Training screen › Precision", "(precision in the file's training section)", "'fp16'",
                           "float32, mixed_bfloat16, mixed_float16"})
    EXPECT_NE(msg.find(want), std::string::npos) << want << " not in: " << msg;
  j["training"]["precision"] = 16;
  EXPECT_NE(projectError(j).find("Training screen › Precision"), std::string::npos) << projectError(j);
}

TEST(ProjectPrecision, ZeroNegativeOrNonNumericLossScalesAreRefused) {
  for (const json& bad : {json(0), json(-2.0), json("dynamic"), json(true)}) {
    json j = validJson();
    j["training"]["precision"] = "mixed_float16";
    j["training"]["loss_scale"] = bad;
    const std::string msg = projectError(j);
    EXPECT_NE(msg.find("Training screen › Loss scale"), std::string::npos) << bad << ": " << msg;
    EXPECT_NE(msg.find("none"), std::string::npos) << bad << ": " << msg;
  }
  json j = validJson();
  j["training"]["loss_scale_growth_steps"] = 0;
  EXPECT_NE(projectError(j).find("Training screen › Loss scale growth"), std::string::npos) << projectError(j);
}

TEST(ProjectAllReduceDtype, Float32ByDefaultBfloat16RoundTripsOthersAreRefused) {
  const Project p = Project::fromJson(validJson());
  EXPECT_EQ(p.distribute.allreduceDtype, AllReduceDtype::Float32);
  EXPECT_FALSE(p.toJson()["distribute"].contains("allreduce_dtype"));  // old files' text unchanged
  json j = validJson();
  j["distribute"]["allreduce_dtype"] = "bfloat16";
  const Project b = Project::fromJson(j);
  EXPECT_EQ(b.distribute.allreduceDtype, AllReduceDtype::Bfloat16);
  EXPECT_EQ(Project::fromJson(b.toJson()).distribute.allreduceDtype, AllReduceDtype::Bfloat16);
  j["distribute"]["allreduce_dtype"] = "float16";
  const std::string msg = projectError(j);
  for (const char* want : {"p.json", "Devices screen › Gradients on the wire", "'float16'", "float32", "bfloat16"})
    EXPECT_NE(msg.find(want), std::string::npos) << want << " not in: " << msg;
  j["distribute"]["allreduce_dtype"] = 2;
  EXPECT_NE(projectError(j).find("float32 or bfloat16"), std::string::npos) << projectError(j);
}

// distribute.tf32: off by default (old files' text unchanged), true round-trips, a non-boolean is
// refused with the field in the screen's words.
TEST(ProjectTf32, OffByDefaultTrueRoundTripsOthersAreRefused) {
  const Project p = Project::fromJson(validJson());
  EXPECT_FALSE(p.distribute.tf32);
  EXPECT_FALSE(p.toJson()["distribute"].contains("tf32"));
  json j = validJson();
  j["distribute"]["tf32"] = true;
  const Project t = Project::fromJson(j);
  EXPECT_TRUE(t.distribute.tf32);
  EXPECT_TRUE(Project::fromJson(t.toJson()).distribute.tf32);
  j["distribute"]["tf32"] = "yes";
  const std::string msg = projectError(j);
  for (const char* want : {"Devices screen › TF32 on GPUs", "true or false"})
    EXPECT_NE(msg.find(want), std::string::npos) << want << " not in: " << msg;
}

}  // namespace
}  // namespace ml
