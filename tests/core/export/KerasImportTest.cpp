// Keras archives read back: every layer kind exported to .keras and imported gives the same
// model and the same weights bit for bit, the compile settings come back as training settings,
// and every archive Mirrorlab cannot take is refused with the file, the layer's position and the
// fix, writing nothing. (Keras itself opens the exports, and TensorFlow's own models are
// imported, in cli.export_references.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include "Error.h"
#include "LearnTestUtil.h"
#include "export/ExportJob.h"
#include "export/ExportWriters.h"
#include "export/KerasImport.h"
#include "export/ModelExport.h"
#include "export/ZipFile.h"
#include "nn/Sequential.h"

namespace fs = std::filesystem;
using namespace ml;
using namespace mltest;
using Json = nlohmann::json;

namespace {

LayerSpec layer(const std::string& type, const Json& args = Json::object()) { return makeLayerSpec(type, args); }

// Every layer kind and activation, a softmax over a (2, 5) sample, BatchNormalization over images
// and over a rank-2 sample, initializers other than the defaults.
ModelSpec everyKind() {
  ModelSpec m;
  m.inputShape = {12, 12};
  m.layers = {layer("Reshape", {{"target_shape", {12, 12, 1}}}),
              layer("Conv2D", {{"filters", 4},
                               {"kernel_size", {3, 2}},
                               {"strides", 2},
                               {"padding", "same"},
                               {"activation", "tanh"},
                               {"use_bias", false},
                               {"kernel_initializer", "he_normal"}}),
              layer("BatchNormalization", {{"center", false}, {"momentum", 0.9}, {"epsilon", 0.01}}),
              layer("AveragePooling2D", {{"pool_size", 3}, {"strides", 1}, {"padding", "same"}}),
              layer("MaxPooling2D", {{"pool_size", 2}}),
              layer("Conv2D", {{"filters", 6}, {"kernel_size", 1}, {"activation", "relu"}}),
              layer("Activation", {{"activation", "sigmoid"}}),
              layer("Dropout", {{"rate", 0.25}}),
              layer("Reshape", {{"target_shape", {9, -1}}}),
              layer("BatchNormalization", {{"scale", false}, {"synchronized", true}}),
              layer("Flatten"),
              layer("Dense", {{"units", 10}, {"activation", "linear"}, {"bias_initializer", "ones"}}),
              layer("Reshape", {{"target_shape", {2, 5}}}),
              layer("Activation", {{"activation", "softmax"}})};
  return m;
}

ModelSpec gapModel() {
  ModelSpec m;
  m.inputShape = {6, 6, 2};
  m.layers = {layer("Conv2D", {{"filters", 3}, {"kernel_size", 3}, {"activation", "relu"}}), layer("GlobalAveragePooling2D"),
              layer("Dense", {{"units", 4}, {"activation", "softmax"}, {"use_bias", false}})};
  return m;
}

// Initialised, then every value scaled by noise (moving variances stay positive), as training leaves them.
void perturb(Sequential& model, uint64_t seed) {
  model.initialize(seed);
  std::mt19937 gen(static_cast<unsigned>(seed));
  std::uniform_real_distribution<float> d(0.5f, 1.5f);
  for (float& v : model.params()) v *= d(gen);
}

std::string exportKeras(const Sequential& model, const fs::path& file, const std::optional<TrainingSpec>& t) {
  ExportInfo info;
  info.projectName = "round trip";
  info.training = t;
  exportModel(model, ExportFormat::Keras, file.string(), info);
  return file.string();
}
std::string exportKeras(const Sequential& model, const fs::path& file) { return exportKeras(model, file, std::nullopt); }

std::string readAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A copy of a good archive with its config.json and metadata.json edited.
std::string edited(const fs::path& good, const fs::path& out, const std::function<void(Json& config, Json& meta)>& edit) {
  std::vector<ZipEntry> entries = readZip(readAll(good), "test");
  Json config, meta;
  for (auto& e : entries) {
    if (e.name == "config.json") config = Json::parse(e.bytes);
    if (e.name == "metadata.json") meta = Json::parse(e.bytes);
  }
  edit(config, meta);
  for (auto& e : entries) {
    if (e.name == "config.json") e.bytes = config.dump();
    if (e.name == "metadata.json") e.bytes = meta.dump();
  }
  std::ofstream(out, std::ios::binary) << zipBytes(entries, ZipCompression::Stored, "test");
  return out.string();
}

// The message import gives, having checked that it wrote nothing.
std::string refusal(const std::string& model, const TempDir& dir) {
  const fs::path project = dir.path() / "out.json", weights = dir.path() / "out.mlw";
  try {
    runImport({model, project.string(), weights.string()});
  } catch (const UserError& e) {
    EXPECT_FALSE(fs::exists(project)) << model;
    EXPECT_FALSE(fs::exists(weights)) << model;
    EXPECT_FALSE(fs::exists(weights.string() + ".importing")) << model;
    return e.what();
  }
  return "accepted";
}

}  // namespace

TEST(KerasImport, EveryLayerKindComesBackBitForBit) {
  TempDir dir("keras-import");
  for (const ModelSpec& spec : {everyKind(), gapModel()}) {
    Sequential model(spec);
    perturb(model, 5);
    const std::string file = exportKeras(model, dir.path() / "m.keras");
    const KerasImport k = importKeras(file);
    EXPECT_EQ(k.kerasVersion, "3.15.1");
    EXPECT_EQ(k.project.model.inputShape, spec.inputShape);
    ASSERT_EQ(k.project.model.layers.size(), spec.layers.size());
    Sequential back(k.project.model);
    ASSERT_EQ(back.paramCount(), model.paramCount());
    for (size_t i = 0; i < model.layerCount(); ++i) {
      EXPECT_EQ(back.layer(i).type(), model.layer(i).type()) << i;
      EXPECT_EQ(back.layer(i).name, model.layer(i).name) << i;
      EXPECT_EQ(back.layer(i).args(), model.layer(i).args()) << i << " " << layerArgsToJson(back.layer(i).args()).dump();
      EXPECT_EQ(back.layer(i).outputShape, model.layer(i).outputShape) << i;
    }
    EXPECT_EQ(k.params, std::vector<float>(model.params().begin(), model.params().end()));
  }
}

TEST(KerasImport, CompileSettingsBecomeTrainingSettings) {
  TempDir dir("keras-compile");
  TrainingSpec t;
  t.optimizer.kind = ml::OptimizerKind::Sgd;
  t.optimizer.learningRate = 0.05;
  t.optimizer.momentum = 0.9;
  t.optimizer.nesterov = true;
  t.loss = LossKind::CategoricalCrossentropy;
  t.fromLogits = true;
  Sequential model(gapModel());
  perturb(model, 1);
  const KerasImport k = importKeras(exportKeras(model, dir.path() / "m.keras", t));
  EXPECT_EQ(k.project.training.optimizer.kind, ml::OptimizerKind::Sgd);
  EXPECT_DOUBLE_EQ(k.project.training.optimizer.learningRate, 0.05);
  EXPECT_DOUBLE_EQ(k.project.training.optimizer.momentum, 0.9);
  EXPECT_TRUE(k.project.training.optimizer.nesterov);
  EXPECT_EQ(k.project.training.loss, LossKind::CategoricalCrossentropy);
  EXPECT_TRUE(k.project.training.fromLogits);
  EXPECT_EQ(k.project.data.kind, ml::DataKind::Blobs);  // not 28x28 images: synthetic data, and a note says so
  ASSERT_FALSE(k.notes.empty());
  EXPECT_NE(k.notes.back().find("set its \"data\""), std::string::npos);
}

TEST(KerasImport, WritesAProjectAndWeightsThatLoad) {
  TempDir dir("keras-write");
  Sequential model(gapModel());
  perturb(model, 2);
  const std::string file = exportKeras(model, dir.path() / "m.keras");
  const ImportResult r = runImport({file, "", ""});
  EXPECT_EQ(r.projectPath, (dir.path() / "m.json").string());
  EXPECT_EQ(r.weightsPath, (dir.path() / "m.mlw").string());
  const Project p = Project::load(r.projectPath);
  Sequential back(p.model);
  loadAnyWeights(back, r.weightsPath);
  EXPECT_EQ(back.checksum(), model.checksum());
}

TEST(KerasImport, RefusesWhatMirrorlabCannotTakeAndWritesNothing) {
  TempDir dir("keras-refuse");
  Sequential model(gapModel());
  perturb(model, 3);
  TrainingSpec adam;
  adam.optimizer.kind = ml::OptimizerKind::Adam;
  const fs::path good = exportKeras(model, dir.path() / "good.keras", adam);  // compiled
  auto layers = [](Json& c) -> Json& { return c["config"]["layers"]; };
  struct Case {
    const char* file;
    std::function<void(Json&, Json&)> edit;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"functional.keras", [](Json& c, Json&) { c["class_name"] = "Functional"; }, "holds a Functional model"},
      {"newer.keras", [](Json&, Json& m) { m["keras_version"] = "4.0.0"; }, "was saved by Keras 4.0.0, newer than"},
      {"older.keras", [](Json&, Json& m) { m["keras_version"] = "2.15.0"; }, "open it in Keras 3 and save it again"},
      {"lstm.keras", [&](Json& c, Json&) { layers(c)[2]["class_name"] = "LSTM"; },
       "layer 2 'global_average_pooling2d' (LSTM) has no counterpart in Mirrorlab"},
      {"regularized.keras",
       [&](Json& c, Json&) {
         layers(c)[3]["config"]["kernel_regularizer"] = {{"class_name", "L2"}};
       },
       "layer 3 'dense' (Dense) sets kernel_regularizer="},
      {"gelu.keras", [&](Json& c, Json&) { layers(c)[1]["config"]["activation"] = "gelu"; },
       "layer 1 'conv2d' (Conv2D) uses the activation gelu, which Mirrorlab lacks"},
      {"dilated.keras",
       [&](Json& c, Json&) {
         layers(c)[1]["config"]["dilation_rate"] = {2, 2};
       },
       "layer 1 'conv2d' (Conv2D) has dilation_rate=[2,2]"},
      {"frozen.keras", [&](Json& c, Json&) { layers(c)[3]["config"]["trainable"] = false; }, "is frozen (trainable=False)"},
      {"float64.keras", [&](Json& c, Json&) { layers(c)[3]["config"]["dtype"] = "float64"; }, "computes in float64"},
      {"adamw.keras", [](Json& c, Json&) { c["compile_config"]["optimizer"]["class_name"] = "AdamW"; },
       "is compiled with the optimizer AdamW"},
      {"schedule.keras",
       [](Json& c, Json&) {
         c["compile_config"]["optimizer"]["config"]["learning_rate"] = {{"class_name", "ExponentialDecay"}};
       },
       "a learning-rate schedule"},
      {"smoothing.keras",
       [](Json& c, Json&) {
         c["compile_config"]["loss"] = {{"class_name", "SparseCategoricalCrossentropy"}, {"config", {{"label_smoothing", 0.1}}}};
       },
       "is compiled with the loss"},
      {"units.keras", [&](Json& c, Json&) { layers(c)[3]["config"]["units"] = 5; },
       "is damaged: layer 3 'dense' has weights (3, 4) in model.weights.h5 (group layers/dense) where its configuration "
       "needs (3, 5)"},
      {"nobias.keras", [&](Json& c, Json&) { layers(c)[1]["config"]["use_bias"] = false; },
       "layer 1 'conv2d' has weights (3, 3, 2, 3) (3) in model.weights.h5 (group layers/conv2d) where its configuration needs "
       "(3, 3, 2, 3)"},
      {"noshape.keras",
       [&](Json& c, Json&) {
         layers(c)[0]["config"]["batch_shape"] = {nullptr, nullptr, 6, 2};
       },
       "has an input of unknown size"},
  };
  for (const auto& c : cases) {
    const std::string file = edited(good, dir.path() / c.file, c.edit);
    const std::string msg = refusal(file, dir);
    EXPECT_NE(msg.find(c.message), std::string::npos) << c.file << ": " << msg;
    EXPECT_NE(msg.find("Keras model '" + file + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("nothing was written"), std::string::npos) << msg;
  }
  // Not a zip, an HDF5 file, a zip without weights, a file that is not there.
  std::ofstream(dir.path() / "text.keras") << "not a model";
  EXPECT_NE(refusal((dir.path() / "text.keras").string(), dir).find("is not a .keras archive"), std::string::npos);
  std::ofstream(dir.path() / "model.h5", std::ios::binary) << std::string("\x89HDF\r\n\x1a\n", 8) << "rest";
  EXPECT_NE(refusal((dir.path() / "model.h5").string(), dir).find("is an HDF5 file"), std::string::npos);
  std::ofstream(dir.path() / "noweights.keras", std::ios::binary)
      << zipBytes({{"metadata.json", "{}"}, {"config.json", "{}"}}, ZipCompression::Stored, "test");
  EXPECT_NE(refusal((dir.path() / "noweights.keras").string(), dir).find("has no model.weights.h5"), std::string::npos);
  EXPECT_NE(refusal((dir.path() / "none.keras").string(), dir).find("no such file"), std::string::npos);
  // One flipped byte in the weights: the CRC-32 names the entry.
  std::string bytes = readAll(good);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x40);
  std::ofstream(dir.path() / "flipped.keras", std::ios::binary) << bytes;
  EXPECT_NE(refusal((dir.path() / "flipped.keras").string(), dir).find("is damaged"), std::string::npos);
}

TEST(KerasImport, AxesKerasTakesDifferentlyAreRefusedByShape) {
  TempDir dir("keras-axes");
  ModelSpec spec;
  spec.inputShape = {3, 4};
  spec.layers = {layer("Activation", {{"activation", "softmax"}}), layer("Flatten"), layer("BatchNormalization"),
                 layer("Dense", {{"units", 2}, {"activation", "linear"}})};
  Sequential model(spec);
  perturb(model, 4);
  const fs::path good = exportKeras(model, dir.path() / "axes.keras");
  EXPECT_NO_THROW(importKeras(good.string()));  // Softmax(axis=[1, 2]) is Mirrorlab's softmax
  const std::string lastAxis = edited(good, dir.path() / "last.keras", [](Json& c, Json&) {
    c["config"]["layers"][1] = {{"class_name", "Activation"}, {"config", {{"name", "act"}, {"activation", "softmax"}}}};
  });
  EXPECT_NE(refusal(lastAxis, dir).find("layer 1 'act' (Activation) takes the softmax over axis -1 of a (3, 4) sample"),
            std::string::npos)
      << refusal(lastAxis, dir);
  const std::string bnAxis =
      edited(good, dir.path() / "bn.keras", [](Json& c, Json&) { c["config"]["layers"][3]["config"]["axis"] = 0; });
  EXPECT_NE(refusal(bnAxis, dir).find("normalises axis 0"), std::string::npos) << refusal(bnAxis, dir);
}
