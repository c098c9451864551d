// Every registered layer kind walked through every exporter (ONNX, PyTorch .npz, Keras .keras and
// .weights.h5) and both code generators: each either writes the layer (the ONNX file evaluated by
// numpy against Mirrorlab's forward pass, the programs compiled by Python) or refuses it naming the
// layer and its type. A new kind is walked the day it is registered, so no format forgets it.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <regex>

#include "Error.h"
#include "LearnTestUtil.h"
#include "export/KerasImport.h"
#include "export/ModelExport.h"
#include "learn/CodeGen.h"
#include "nn/LayerKind.h"
#include "project/LayerJson.h"

namespace fs = std::filesystem;
using namespace ml;
using namespace mltest;

namespace {

constexpr ExportFormat kFormats[] = {ExportFormat::Onnx, ExportFormat::Torch, ExportFormat::Keras, ExportFormat::KerasWeights};

bool hasHook(const LayerKind& k, ExportFormat f) {
  switch (f) {
    case ExportFormat::Onnx: return k.onnx != nullptr;
    case ExportFormat::Torch: return k.torch != nullptr;
    case ExportFormat::Keras:
    case ExportFormat::KerasWeights: return !k.keras.cls.empty();
  }
  return false;
}

// The kind's palette example on its example input, then a classifier head the programs can train.
ModelSpec walkModel(const LayerKind& k, int64_t classes) {
  ModelSpec m;
  m.inputShape = k.exampleInput;
  m.layers = {LayerSpec{"walked", k.example}, makeLayerSpec("Flatten"),
              makeLayerSpec("Dense", {{"units", classes}, {"activation", "softmax"}})};
  return m;
}

void writeFloats(const fs::path& p, const std::vector<float>& v) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
}

// Normal inputs (both signs) and Mirrorlab's inference outputs for them, for the Python checkers:
// dir/x.f32 (its shape in x.f32.shape) and dir/y.f32.
void writeSample(Sequential& model, const fs::path& dir) {
  const int64_t n = 5;
  std::vector<float> x(static_cast<size_t>(n * model.inFeatures()));
  std::mt19937 gen(3);
  std::normal_distribution<float> dist(0.0f, 1.5f);
  for (float& v : x) v = dist(gen);
  const float* y = model.forward(x.data(), n, StepContext{});
  writeFloats(dir / "x.f32", x);
  writeFloats(dir / "y.f32", std::vector<float>(y, y + n * model.outFeatures()));
  std::string shape;
  for (int64_t d : model.inputShape()) shape += std::to_string(d) + " ";
  writeFile(dir / "x.f32.shape", shape);
}

// Runs the ONNX file through the numpy evaluator against Mirrorlab's inference outputs.
void checkOnnxMatches(const std::string& file, const fs::path& dir, const std::string& type) {
  const CommandResult c = runCommand(std::string(kPython) + " " + EXPORT_SCRIPTS + "/onnx_reference.py " + file + " " +
                                     (dir / "x.f32").string() + " " + (dir / "y.f32").string());
  ASSERT_EQ(c.exitCode, 0) << type << ": " << c.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(c.output, m, std::regex("max_abs_diff=([0-9.e+-]+)"))) << c.output;
  EXPECT_LE(std::stod(m[1]), 1e-5) << type << ": " << c.output;
}

void expectRefusedByName(const std::function<void()>& write, const std::string& type, const std::string& what) {
  try {
    write();
    ADD_FAILURE() << what << " wrote a " << type << " layer its kind has no hook for";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("'walked' (" + type + ")"), std::string::npos) << what << ": " << e.what();
  }
}

// The identity, made without the registry (as a test or an experiment would).
class HandMade : public Layer {
 public:
  std::string type() const override { return "HandMade"; }
  Shape build(const Shape& input) override { return inputShape = outputShape = input; }
  void forward(const float*, float*, int64_t, const StepContext&) override {}
  void backward(const float*, const float*, float*, float*, int64_t, const StepContext&) override {}
};

}  // namespace

TEST(LayerWalk, EveryKindIsRegisteredOnceWithAFactory) {
  EXPECT_EQ(layerKinds().size(), std::variant_size_v<LayerArgs>);
  for (const LayerKind* k : layerKinds()) {
    ASSERT_NE(k->make, nullptr) << k->type;
    EXPECT_EQ(findLayerKind(k->type), k) << k->type << " is registered twice";
    EXPECT_FALSE(k->exampleInput.empty()) << k->type;
  }
}

// The .keras archives are loaded by Keras 3 itself (the reference environment), all in one run.
TEST(LayerWalk, EveryKindThroughEveryExporter) {
  const bool numpyOnnx = runCommand(std::string(kPython) + " -c 'import onnx, numpy'").exitCode == 0;
  TempDir root("walk");
  std::string kerasArgs;
  for (const LayerKind* k : layerKinds()) {
    const std::string type(k->type);
    SCOPED_TRACE(type);
    const fs::path dir = root.path() / type;
    fs::create_directories(dir);
    Sequential model(walkModel(*k, 3));
    model.initialize(11);
    writeSample(model, dir);
    for (ExportFormat f : kFormats) {
      if (!formatBuilt(f)) continue;  // exporting says the library is missing; ExportTest covers it
      const std::string file = (dir / ("m" + std::string(defaultSuffix(f)))).string();
      const auto write = [&] { exportModel(model, f, file, ExportInfo{"walk", 1, "w.mlw"}); };
      if (!hasHook(*k, f)) {
        expectRefusedByName(write, type, toString(f));
        continue;
      }
      ASSERT_NO_THROW(write()) << toString(f);
      EXPECT_GT(fs::file_size(file), 0u) << toString(f);
      if (f == ExportFormat::Onnx && numpyOnnx) checkOnnxMatches(file, dir, type);
      if (f != ExportFormat::Keras) continue;
      kerasArgs += " " + file + " " + (dir / "x.f32").string() + " " + (dir / "y.f32").string();
      // Mirrorlab's own import reads the archive back to the same layers.
      const KerasImport back = importKeras(file);
      ASSERT_EQ(back.project.model.layers.size(), model.spec().layers.size());
      for (size_t i = 0; i < model.spec().layers.size(); ++i)
        EXPECT_EQ(back.project.model.layers[i].args, model.spec().layers[i].args) << "layer " << i << " read back";
      EXPECT_TRUE(std::equal(back.params.begin(), back.params.end(), model.params().begin(), model.params().end()));
    }
  }
  if (kerasArgs.empty()) return;
  ASSERT_TRUE(fs::exists(PYREF_PYTHON)) << "no reference environment at " << PYREF_PYTHON << ": run scripts/pyref.sh";
  const CommandResult c = runCommand(std::string(PYREF_PYTHON) + " " + EXPORT_SCRIPTS + "/keras_walk.py" + kerasArgs);
  EXPECT_EQ(c.exitCode, 0) << c.output;
  for (const LayerKind* k : layerKinds()) {  // one line per archive: "<type>: [classes] max_abs_diff=... ok"
    if (k->keras.cls.empty()) continue;
    EXPECT_TRUE(std::regex_search(c.output, std::regex("\\b" + std::string(k->type) + ": \\[.* ok"))) << c.output;
  }
}

TEST(LayerWalk, EveryKindThroughBothCodeGenerators) {
  Project p = Project::load(projectPath("spirals.json"));
  for (const LayerKind* k : layerKinds()) {
    const std::string type(k->type);
    SCOPED_TRACE(type);
    TempDir dir("walk-gen");
    p.model = walkModel(*k, p.data.classes);
    Sequential model(p.model);
    const Layer& walked = model.layer(0);
    for (Framework fw : {Framework::TensorFlow, Framework::PyTorch}) {
      const bool hook = fw == Framework::TensorFlow ? k->tf != nullptr : k->torch != nullptr;
      if (!hook) {
        expectRefusedByName([&] { generateProgram(p, fw); }, type, toString(fw));
        continue;
      }
      const std::string program = generateProgram(p, fw);
      // The hook's own call (up to its first parenthesis) is in the program.
      const std::string line =
          fw == Framework::TensorFlow ? k->tf(walked.args(), walked, TfContext{}) : k->torch(walked.args(), walked);
      EXPECT_NE(program.find(line.substr(0, line.find('(') + 1)), std::string::npos) << line;
      const fs::path file = dir.path() / (std::string(toString(fw)) + ".py");
      writeFile(file, program);
      const CommandResult c = runCommand(std::string(kPython) + " -m py_compile " + file.string());
      EXPECT_EQ(c.exitCode, 0) << toString(fw) << ": " << c.output;
    }
  }
}

// A kind without a format's hooks is refused by name, never written half: the registry entry of a
// real kind with its hooks taken away, on a layer the factory made.
TEST(LayerWalk, AKindWithoutHooksIsRefusedByNameInEveryFormat) {
  LayerKind bare = *findLayerKind("LeakyReLU");
  bare.onnx = nullptr;
  bare.torch = nullptr;
  bare.keras.cls = {};
  const LayerSpec spec{"walked", LeakyReLUSpec{}};
  const auto layer = makeLayer(spec, 0);
  layer->build({4});
  layer->setOrigin(bare, spec.args);
  for (ExportFormat f : kFormats) expectRefusedByName([&] { checkExportable(*layer, f); }, "LeakyReLU", toString(f));
  // A layer made by hand, outside the registry, has no kind: refused the same way.
  HandMade handMade;
  handMade.name = "walked";
  for (ExportFormat f : kFormats) expectRefusedByName([&] { checkExportable(handMade, f); }, "HandMade", toString(f));
}
