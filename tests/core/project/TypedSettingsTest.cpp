// The typed settings of a project: each is parsed once when the file (or the command line) is read,
// a bad value is refused there with the field named (message and identifier), and a round trip
// through the file keeps the value and the file's text.
#include <gtest/gtest.h>

#include <string>

#include "Error.h"
#include "project/Project.h"
#include "project/Settings.h"
#include "support/TestData.h"

namespace ml {
namespace {

using nlohmann::json;

json baseJson() { return mltest::smallProjectJson(); }

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

TEST(TypedSettings, LrRuleIsRefusedWhenReadAndKeptByARoundTrip) {
  json j = baseJson();
  j["training"]["lr_scaling"] = "quadratic";
  const UserError e = refusal(j);
  EXPECT_EQ(e.field(), "training.lr_scaling");
  EXPECT_NE(std::string(e.what()).find("typed.json: "), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("'quadratic' (allowed: none, linear, sqrt)"), std::string::npos) << e.what();
  try {
    lrRuleSetting("Linear", "command line");
    ADD_FAILURE() << "Linear accepted";
  } catch (const UserError& c) {
    EXPECT_EQ(c.field(), "training.lr_scaling");
  }
  const LrRule rules[] = {LrRule::None, LrRule::Linear, LrRule::Sqrt};
  for (const LrRule r : rules) {
    j["training"]["lr_scaling"] = toString(r);
    EXPECT_EQ(roundTrip(j).training.lrScaling, r) << toString(r);
  }
  // The default is written as it always was.
  EXPECT_EQ(Project::fromJson(baseJson()).toJson()["training"]["lr_scaling"], "none");
}

// The field a setting parsed from the command line is refused with, and that it is refused at all.
template <typename F>
std::string commandLineField(F parse) {
  try {
    parse();
  } catch (const UserError& c) {
    EXPECT_EQ(std::string(c.what()).rfind("command line: ", 0), 0u) << c.what();
    return c.field();
  }
  ADD_FAILURE() << "accepted";
  return "";
}

// A device list is parsed when the file is read: below project/ a run takes a DeviceList, and
// the file keeps its text ("gpu:1x1" is not rewritten as "gpu:1").
TEST(TypedSettings, DevicesAreRefusedWhenReadAndKeptByARoundTrip) {
  json j = baseJson();
  j["distribute"]["devices"] = "cpu:zero";
  const UserError e = refusal(j);
  EXPECT_EQ(e.field(), "distribute.devices");
  EXPECT_NE(std::string(e.what()).find("typed.json: "), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("'zero' is not a number; use cpu:N"), std::string::npos) << e.what();
  j["distribute"]["devices"] = std::string(300, 'x');
  EXPECT_EQ(refusal(j).field(), "distribute.devices");
  EXPECT_EQ(commandLineField([] { devicesSetting("tpu:1", "command line"); }), "distribute.devices");
  for (const char* spec : {"cpu:3", "gpu:0,1", "gpu:0x4", "gpu:1x1"}) {
    j["distribute"]["devices"] = spec;
    const Project p = roundTrip(j);
    EXPECT_EQ(p.toJson()["distribute"]["devices"], spec);
    EXPECT_EQ(p.distribute.devices.size(), parseDevices(spec).size()) << spec;
    EXPECT_EQ(p.distribute.devices.kind, parseDevices(spec).kind) << spec;
  }
  EXPECT_EQ(roundTrip(j).distribute.devices.devices.at(0).physical, 1);
}

TEST(TypedSettings, AllReduceAndItsDtypeAreRefusedWhenReadAndKeptByARoundTrip) {
  json j = baseJson();
  j["distribute"]["allreduce"] = "tree";
  const UserError e = refusal(j);
  EXPECT_EQ(e.field(), "distribute.allreduce");
  EXPECT_NE(std::string(e.what()).find("'tree' (allowed: ring, reduce-to-one, nccl; across workers hierarchical, mpi)"),
            std::string::npos)
      << e.what();
  EXPECT_EQ(commandLineField([] { allReduceSetting("Ring", "command line"); }), "distribute.allreduce");
  const AllReduceAlgo algos[] = {AllReduceAlgo::Ring, AllReduceAlgo::ReduceToOne, AllReduceAlgo::Nccl,
                                 AllReduceAlgo::Hierarchical, AllReduceAlgo::Mpi};
  for (const AllReduceAlgo a : algos) {
    j["distribute"]["allreduce"] = toString(a);
    EXPECT_EQ(roundTrip(j).distribute.allreduce, a) << toString(a);
  }
  j = baseJson();
  j["distribute"]["allreduce_dtype"] = "fp8";
  const UserError d = refusal(j);
  EXPECT_EQ(d.field(), "distribute.allreduce_dtype");
  EXPECT_NE(std::string(d.what()).find("'fp8' (allowed: float32, the default, or bfloat16"), std::string::npos) << d.what();
  EXPECT_EQ(commandLineField([] { allReduceDtypeSetting("float16", "command line"); }), "distribute.allreduce_dtype");
  j["distribute"]["allreduce_dtype"] = "bfloat16";
  EXPECT_EQ(roundTrip(j).distribute.allreduceDtype, AllReduceDtype::Bfloat16);
  // The default stays out of the file, as it always did.
  EXPECT_FALSE(Project::fromJson(baseJson()).toJson()["distribute"].contains("allreduce_dtype"));
}

// A fault's syntax is checked when the file is read; which replica it hits waits for the run's
// devices (the Devices screen or --devices may change them after the file is read).
TEST(TypedSettings, FaultsAreRefusedWhenReadAndPlannedAgainstTheRunsDevices) {
  json j = baseJson();
  j["distribute"]["faults"] = {"slow:cpu:1=3x", "hang:cpu:1"};
  const UserError e = refusal(j);
  EXPECT_EQ(e.field(), "distribute.faults");
  EXPECT_NE(std::string(e.what()).find("fault 'hang:cpu:1': hang needs a device and @step=N"), std::string::npos) << e.what();
  EXPECT_EQ(commandLineField([] { faultSetting("melt:cpu:0@step=2", "command line"); }), "distribute.faults");
  j["distribute"]["faults"] = {"slow:cpu:1=3x", "kill:before-checkpoint@step=9", "nan:cpu:0@step=4@worker=1"};
  const Project p = roundTrip(j);
  EXPECT_EQ(p.toJson()["distribute"]["faults"], j["distribute"]["faults"]);
  ASSERT_EQ(p.distribute.faults.size(), 3u);
  EXPECT_EQ(p.distribute.faults[0].kind, Fault::Kind::Slow);
  EXPECT_EQ(p.distribute.faults[0].factor, 3.0);
  EXPECT_EQ(p.distribute.faults[2].worker, 1);
  const FaultPlan plan = planFaults(p.distribute.faults, p.distribute.devices);
  EXPECT_EQ(plan.slowFactor(1), 3.0);
  EXPECT_EQ(plan.killStep, 9);
  EXPECT_EQ(plan.killPoint, FaultPlan::KillPoint::BeforeCheckpoint);
  EXPECT_EQ(plan.nanReplica, 0);
  EXPECT_EQ(plan.nanStep, 4);
  // cpu:1 is a device of cpu:2 but not of cpu:1: refused when the run is planned, by name.
  try {
    planFaults(p.distribute.faults, parseDevices("cpu:1"));
    ADD_FAILURE() << "slow:cpu:1 planned on cpu:1";
  } catch (const UserError& u) {
    EXPECT_NE(std::string(u.what()).find("'cpu:1' is not one of this run's devices"), std::string::npos) << u.what();
  }
  j["distribute"]["faults"] = json::array();
  for (int i = 0; i < 17; ++i) j["distribute"]["faults"].push_back("slow:cpu:1=2x");
  EXPECT_EQ(refusal(j).field(), "distribute.faults");
}

TEST(TypedSettings, OptimizerAndDataKindAreRefusedWhenReadAndKeptByARoundTrip) {
  json j = baseJson();
  j["training"]["optimizer"] = {{"name", "adagrad"}};
  const UserError e = refusal(j);
  EXPECT_EQ(e.field(), "training.optimizer.name");
  EXPECT_NE(std::string(e.what()).find("'adagrad' (allowed: sgd, adam, rmsprop)"), std::string::npos) << e.what();
  EXPECT_EQ(commandLineField([] { optimizerSetting("Adam", "command line"); }), "training.optimizer.name");
  const OptimizerKind kinds[] = {OptimizerKind::Sgd, OptimizerKind::Adam, OptimizerKind::RmsProp};
  for (const OptimizerKind k : kinds) {
    j["training"]["optimizer"] = toString(k);  // the short form: a name alone, Keras' defaults
    const Project p = roundTrip(j);
    EXPECT_EQ(p.training.optimizer.kind, k) << toString(k);
    EXPECT_EQ(p.toJson()["training"]["optimizer"]["name"], toString(k));
    EXPECT_EQ(p.training.optimizer.learningRate, k == OptimizerKind::Sgd ? 0.01 : 0.001) << toString(k);
  }
  j = baseJson();
  j["data"]["kind"] = "imagenet";
  const UserError d = refusal(j);
  EXPECT_EQ(d.field(), "data.kind");
  EXPECT_NE(std::string(d.what()).find("'imagenet' (allowed: fashion-mnist, idx, csv, spirals, blobs)"), std::string::npos)
      << d.what();
  j["data"]["kind"] = "blobs";
  j["data"]["features"] = 4;
  const Project p = roundTrip(j);
  EXPECT_EQ(p.data.kind, DataKind::Blobs);
  EXPECT_EQ(p.toJson()["data"]["kind"], "blobs");
  EXPECT_EQ(p.toJson()["data"]["features"], 4);  // written for blobs only
}

// A metric name is checked when the file is read and kept as written: "acc" stays "acc".
TEST(TypedSettings, MetricsAreRefusedWhenReadAndKeptAsWritten) {
  json j = baseJson();
  j["training"]["metrics"] = {"accuracy", "top_k"};
  const UserError e = refusal(j);
  EXPECT_EQ(e.field(), "training.metrics");
  EXPECT_NE(std::string(e.what()).find(": unknown metric 'top_k' (allowed: accuracy, binary_accuracy, mae)"), std::string::npos)
      << e.what();
  j["training"]["metrics"] = {"acc"};
  EXPECT_EQ(roundTrip(j).toJson()["training"]["metrics"], json::array({"acc"}));
}

}  // namespace
}  // namespace ml
