// Exported models checked by code that is not Mirrorlab's: the ONNX library's checker and shape
// inference and a numpy evaluator (onnx_reference.py) against Mirrorlab's own forward pass, Keras
// 3's layout with h5py (keras_layout.py); and bad output paths refused before any work.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include <random>
#include "AtomicFile.h"
#include "Error.h"
#include "LearnTestUtil.h"
#include "data/Csv.h"
#include "data/Dataset.h"
#include "export/ExportJob.h"
#include "export/ModelExport.h"
#include "learn/CodeGen.h"
#include "project/WeightsFile.h"

namespace fs = std::filesystem;
using namespace ml;
using namespace mltest;

namespace {

std::string script(const char* name) { return std::string(EXPORT_SCRIPTS) + "/" + name; }

LayerSpec layer(const std::string& type, const nlohmann::json& args = nlohmann::json::object()) {
  return makeLayerSpec(type, args);
}

// Every layer Mirrorlab has, every activation, a Dense without a bias, a non-flat input.
ModelSpec everyLayerModel() {
  ModelSpec m;
  m.inputShape = {2, 3};
  m.layers = {layer("Flatten"),
              layer("Dense", {{"units", 8}, {"activation", "tanh"}}),
              layer("Activation", {{"activation", "sigmoid"}}),
              layer("Dropout", {{"rate", 0.3}}),
              layer("Dense", {{"units", 7}, {"activation", "linear"}, {"use_bias", false}}),
              layer("Activation", {{"activation", "relu"}}),
              layer("Dense", {{"units", 4}, {"activation", "softmax"}, {"bias_initializer", "ones"}})};
  return m;
}

// A softmax over a whole (3, 4) sample, as Mirrorlab computes it, before the Flatten.
ModelSpec sampleSoftmaxModel() {
  ModelSpec m;
  m.inputShape = {3, 4};
  m.layers = {layer("Activation", {{"activation", "softmax"}}), layer("Flatten"),
              layer("Dense", {{"units", 5}, {"activation", "relu"}}), layer("Dropout", {{"rate", 0.5}}),
              layer("Dense", {{"units", 2}, {"activation", "sigmoid"}})};
  return m;
}

// Every spatial layer on channels-last images: "same" and "valid" windows, strides, a Conv2D
// without a bias, BatchNormalization over images and over features, max and average pooling.
ModelSpec convModel() {
  ModelSpec m;
  m.inputShape = {9, 8, 2};
  m.layers = {layer("Conv2D", {{"filters", 4}, {"kernel_size", 3}, {"padding", "same"}, {"activation", "relu"}}),
              layer("BatchNormalization"),
              layer("MaxPooling2D", {{"pool_size", 2}, {"padding", "same"}}),
              layer("Conv2D",
                    {{"filters", 3}, {"kernel_size", {2, 3}}, {"strides", {1, 2}}, {"use_bias", false}, {"activation", "tanh"}}),
              layer("AveragePooling2D", {{"pool_size", 2}, {"strides", 1}, {"padding", "same"}}),
              layer("Flatten"),
              layer("Dense", {{"units", 6}, {"activation", "linear"}}),
              layer("BatchNormalization", {{"center", false}, {"epsilon", 0.01}}),
              layer("Dense", {{"units", 3}, {"activation", "sigmoid"}})};
  return m;
}

// A flat input reshaped into an image, a strided Conv2D, a softmax over its whole output, global
// average pooling, and BatchNormalization without scale.
ModelSpec reshapeGapModel() {
  ModelSpec m;
  m.inputShape = {48};
  m.layers = {layer("Reshape", {{"target_shape", {4, -1, 2}}}),
              layer("Conv2D", {{"filters", 5}, {"kernel_size", 2}, {"strides", 2}, {"padding", "same"}}),
              layer("Activation", {{"activation", "softmax"}}),
              layer("BatchNormalization", {{"scale", false}}),
              layer("GlobalAveragePooling2D"),
              layer("Dense", {{"units", 2}, {"activation", "linear"}})};
  return m;
}

// Initialised weights moved by noise: BatchNormalization's moving statistics and gamma/beta are
// not their trivial starting values (variances stay positive).
void perturb(Sequential& model, uint64_t seed) {
  std::mt19937 gen(static_cast<unsigned>(seed));
  std::normal_distribution<float> dist(0.0f, 0.2f);
  for (float& v : model.params()) v += dist(gen);
}

void writeFloats(const fs::path& p, const std::vector<float>& v) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
}

// Random inputs, Mirrorlab's inference outputs for them, both written for the Python checkers.
struct Sample {
  fs::path input, expected;
};
Sample mirrorlabOutputs(Sequential& model, int64_t n, const fs::path& dir) {
  std::vector<float> x(static_cast<size_t>(n * model.inFeatures()));
  std::mt19937 gen(11);
  std::normal_distribution<float> dist(0.0f, 1.5f);
  for (float& v : x) v = dist(gen);
  StepContext ctx;  // training = false: inference, Dropout is the identity
  const float* y = model.forward(x.data(), n, ctx);
  Sample s{dir / "x.f32", dir / "y.f32"};
  writeFloats(s.input, x);
  writeFloats(s.expected, std::vector<float>(y, y + n * model.outFeatures()));
  std::string shape;
  for (int64_t d : model.inputShape()) shape += std::to_string(d) + " ";
  writeFile(dir / "x.f32.shape", shape);
  return s;
}

double maxAbsDiff(const std::string& output) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex("max_abs_diff=([0-9.e+-]+)"))) return 1e9;
  return std::stod(m[1]);
}

bool pythonHas(const char* modules, std::string* why) {
  const CommandResult r = runCommand(std::string(kPython) + " -c 'import " + modules + "'");
  if (r.exitCode != 0) *why = std::string("Debian's ") + modules + " for " + kPython + " is missing: " + r.output;
  return r.exitCode == 0;
}

}  // namespace

TEST(OnnxExport, EveryLayerMatchesMirrorlabOpByOp) {
  std::string why;
  if (!pythonHas("onnx, numpy", &why)) GTEST_SKIP() << why;
  for (const ModelSpec& spec : {everyLayerModel(), sampleSoftmaxModel()}) {
    TempDir dir("onnx");
    Sequential model(spec);
    model.initialize(5);
    const Sample s = mirrorlabOutputs(model, 37, dir.path());
    ExportInfo info{"every layer", 7, "w.mlw"};
    const ExportResult r = exportModel(model, ExportFormat::Onnx, (dir.path() / "m.onnx").string(), info);
    EXPECT_GT(r.bytes, static_cast<int64_t>(model.paramCount() * 4));
    const CommandResult c = runCommand(std::string(kPython) + " " + script("onnx_reference.py") + " " + r.path + " " +
                                       s.input.string() + " " + s.expected.string() + " --expect-opset 13");
    ASSERT_EQ(c.exitCode, 0) << c.output;
    EXPECT_LE(maxAbsDiff(c.output), 1e-5) << c.output;
    EXPECT_NE(c.output.find("'run_id': '7'"), std::string::npos) << c.output;
    EXPECT_NE(c.output.find("'project': 'every layer'"), std::string::npos) << c.output;
    EXPECT_NE(c.output.find("'mirrorlab_version': '" MIRRORLAB_VERSION "'"), std::string::npos) << c.output;
    EXPECT_EQ(c.output.find("Dropout"), std::string::npos) << c.output;
    if (spec.inputShape == Shape{2, 3}) {
      EXPECT_NE(c.output.find("ops=Flatten,Gemm,Tanh,Sigmoid,MatMul,Relu,Gemm,Softmax "), std::string::npos) << c.output;
    } else {
      EXPECT_NE(c.output.find("ops=Flatten,Softmax,Reshape,Flatten,Gemm,Relu,Gemm,Sigmoid "), std::string::npos) << c.output;
    }
  }
}

// Conv2D, pooling, BatchNormalization, Reshape: ONNX's channels-first ops between Transposes,
// evaluated by numpy against Mirrorlab's forward pass.
TEST(OnnxExport, ConvolutionalLayersMatchMirrorlab) {
  std::string why;
  if (!pythonHas("onnx, numpy", &why)) GTEST_SKIP() << why;
  for (const ModelSpec& spec : {convModel(), reshapeGapModel()}) {
    TempDir dir("onnx-conv");
    Sequential model(spec);
    model.initialize(21);
    perturb(model, 22);
    const Sample s = mirrorlabOutputs(model, 23, dir.path());
    const ExportResult r = exportModel(model, ExportFormat::Onnx, (dir.path() / "m.onnx").string(), ExportInfo{"conv"});
    const CommandResult c = runCommand(std::string(kPython) + " " + script("onnx_reference.py") + " " + r.path + " " +
                                       s.input.string() + " " + s.expected.string() + " --expect-opset 13");
    ASSERT_EQ(c.exitCode, 0) << c.output;
    EXPECT_LE(maxAbsDiff(c.output), 1e-5) << c.output;
    if (spec.inputShape.size() == 3) {
      EXPECT_NE(c.output.find("ops=Transpose,Conv,Relu,BatchNormalization,MaxPool,Conv,Tanh,AveragePool,Transpose,Flatten,Gemm,"
                              "BatchNormalization,Gemm,Sigmoid "),
                std::string::npos)
          << c.output;
    } else {
      EXPECT_NE(c.output.find("ops=Reshape,Transpose,Conv,Transpose,Flatten,Softmax,Reshape,Transpose,BatchNormalization,"
                              "GlobalAveragePool,Flatten,Gemm "),
                std::string::npos)
          << c.output;
    }
  }
}

TEST(OnnxExport, OneSampleAndAThousandThroughTheSameFile) {
  std::string why;
  if (!pythonHas("onnx, numpy", &why)) GTEST_SKIP() << why;
  TempDir dir("onnx-batch");
  Sequential model(everyLayerModel());
  model.initialize(9);
  const std::string file = (dir.path() / "m.onnx").string();
  exportModel(model, ExportFormat::Onnx, file, ExportInfo{"batch", std::nullopt, ""});
  for (int64_t n : {1, 1000}) {
    const Sample s = mirrorlabOutputs(model, n, dir.path());
    const CommandResult c = runCommand(std::string(kPython) + " " + script("onnx_reference.py") + " " + file + " " +
                                       s.input.string() + " " + s.expected.string());
    ASSERT_EQ(c.exitCode, 0) << c.output;
    EXPECT_NE(c.output.find("samples=" + std::to_string(n) + " "), std::string::npos) << c.output;
    EXPECT_NE(c.output.find("'run_id': ''"), std::string::npos) << "no run: the key is there, empty: " << c.output;
    EXPECT_LE(maxAbsDiff(c.output), 1e-5) << c.output;
  }
}

// A model trained on a standardized CSV takes the file's raw rows once exported: the training
// set's standardization is the ONNX graph's first two nodes (it was missing, and the model was
// unusable on raw data). Columns of very different scales, one of them constant.
TEST(OnnxExport, AStandardizedCsvModelTakesRawRows) {
  std::string why;
  if (!pythonHas("onnx, numpy", &why)) GTEST_SKIP() << why;
  TempDir dir("onnx-standardized");
  std::string csv = "area,ratio,flag,label\n";
  std::mt19937 gen(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int i = 0; i < 40; ++i)
    csv += std::to_string(1500 + 400 * dist(gen)) + "," + std::to_string(0.02 + 0.005 * dist(gen)) + ",7," +
           std::to_string(i % 2) + "\n";
  writeFile(dir.path() / "houses.csv", csv);
  ExportRequest r;
  r.project.data.kind = ml::DataKind::Csv;
  r.project.data.path = (dir.path() / "houses.csv").string();
  r.project.data.standardize = true;
  r.project.model.inputShape = {3};
  r.project.model.layers = {layer("Dense", {{"units", 5}, {"activation", "tanh"}}),
                            layer("Dense", {{"units", 1}, {"activation", "sigmoid"}})};
  Sequential model(r.project.model);
  model.initialize(3);
  perturb(model, 4);
  r.weights = (dir.path() / "w.mlw").string();
  saveWeights(model, r.weights);
  r.output = (dir.path() / "m.onnx").string();
  runExport(r);
  // Mirrorlab's outputs on the rows it trained on (standardized), the file's raw rows as input.
  const DataSplit standardized = loadData(r.project.data);
  ASSERT_TRUE(standardized.standardization);
  StepContext ctx;
  const float* y = model.forward(standardized.train.x.data(), standardized.train.size, ctx);
  const Dataset raw = readCsv(r.project.data.path, "label", false, false);
  writeFloats(dir.path() / "x.f32", raw.x);
  writeFile(dir.path() / "x.f32.shape", "3");
  writeFloats(dir.path() / "y.f32", std::vector<float>(y, y + raw.size));
  const CommandResult c = runCommand(std::string(kPython) + " " + script("onnx_reference.py") + " " + r.output + " " +
                                     (dir.path() / "x.f32").string() + " " + (dir.path() / "y.f32").string());
  ASSERT_EQ(c.exitCode, 0) << c.output;
  EXPECT_LE(maxAbsDiff(c.output), 1e-5) << c.output;
  EXPECT_NE(c.output.find("the model standardizes them itself"), std::string::npos) << c.output;
  // The CSV moved away: the export says what it needs instead of writing a model that needs
  // standardized rows.
  fs::remove(dir.path() / "houses.csv");
  try {
    runExport(r);
    ADD_FAILURE() << "exported without the standardization";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("must hold that standardization"), std::string::npos) << e.what();
  }
}

TEST(KerasExport, Keras3SequentialLayoutAndValues) {
  std::string why;
  if (!pythonHas("h5py, numpy", &why)) GTEST_SKIP() << why;
  TempDir dir("keras");
  Project p;
  p.name = "keras layout";
  p.model = everyLayerModel();
  Sequential model(p.model);
  model.initialize(3);
  const Sample s = mirrorlabOutputs(model, 25, dir.path());
  p.save((dir.path() / "p.json").string());
  saveWeights(model, (dir.path() / "w.mlw").string());
  const ExportResult r = exportModel(model, ExportFormat::Keras, (dir.path() / "m.weights.h5").string(), ExportInfo{});
  const CommandResult c =
      runCommand(std::string(kPython) + " " + script("keras_layout.py") + " " + r.path + " " + (dir.path() / "p.json").string() +
                 " " + (dir.path() / "w.mlw").string() + " " + s.input.string() + " " + s.expected.string());
  ASSERT_EQ(c.exitCode, 0) << c.output;
  // vars, layers, and per layer its group and vars: 7 layers; 3 Dense kernels and 2 biases.
  EXPECT_NE(c.output.find("layout ok: 21 groups and datasets"), std::string::npos) << c.output;
  EXPECT_LE(maxAbsDiff(c.output), 1e-5) << c.output;
}

// The same layers in Keras 3's layout (conv2d/vars/0 = kernel (kh, kw, in, filters); batch
// normalization's gamma, beta, moving mean and variance as its build() creates them), and Keras'
// channels-last forward pass over the file's values.
TEST(KerasExport, ConvolutionalLayersInKerasLayout) {
  std::string why;
  if (!pythonHas("h5py, numpy", &why)) GTEST_SKIP() << why;
  for (const ModelSpec& spec : {convModel(), reshapeGapModel()}) {
    TempDir dir("keras-conv");
    Project p;
    p.name = "keras conv";
    Sequential model(spec);
    model.initialize(31);
    perturb(model, 32);
    p.model = model.spec();
    const Sample s = mirrorlabOutputs(model, 19, dir.path());
    p.save((dir.path() / "p.json").string());
    saveWeights(model, (dir.path() / "w.mlw").string());
    const ExportResult r = exportModel(model, ExportFormat::Keras, (dir.path() / "m.weights.h5").string(), ExportInfo{});
    const CommandResult c = runCommand(std::string(kPython) + " " + script("keras_layout.py") + " " + r.path + " " +
                                       (dir.path() / "p.json").string() + " " + (dir.path() / "w.mlw").string() + " " +
                                       s.input.string() + " " + s.expected.string());
    ASSERT_EQ(c.exitCode, 0) << c.output;
    // vars and layers, per layer its group and its vars group, and the datasets: 2 + 2 x 9 + 14 (Conv2D
    // 2 + 1, BatchNormalization 4 + 3, Dense 2 + 2); 2 + 2 x 6 + 7 (Conv2D 2, BatchNormalization 3, Dense 2).
    EXPECT_NE(
        c.output.find(spec.inputShape.size() == 3 ? "layout ok: 34 groups and datasets" : "layout ok: 21 groups and datasets"),
        std::string::npos)
        << c.output;
    EXPECT_LE(maxAbsDiff(c.output), 1e-5) << c.output;
  }
}

// The generated PyTorch program's own model (ChannelsLast convolutions, BatchNorm in eval mode),
// loaded by its own load_weights from the exported .npz, predicts what Mirrorlab predicts.
TEST(TorchExport, TheGeneratedProgramLoadsConvolutionalWeights) {
  for (const ModelSpec& spec : {convModel(), reshapeGapModel()}) {
    TempDir dir("torch-conv");
    Project p;
    p.name = "torch conv";
    p.training.loss = ml::LossKind::MeanSquaredError;  // the program's last layer is then the model's own (no softmax folded)
    p.training.metrics = {"mae"};
    Sequential model(spec);
    model.initialize(41);
    perturb(model, 42);
    p.model = model.spec();
    p.save((dir.path() / "p.json").string());
    writeFile(dir.path() / "program.py", generatePyTorchProgram(p));
    const Sample s = mirrorlabOutputs(model, 17, dir.path());
    const ExportResult r = exportModel(model, ExportFormat::Torch, (dir.path() / "m.npz").string(), ExportInfo{});
    const CommandResult c =
        runCommand(std::string(kPython) + " " + script("torch_load.py") + " " + r.path + " " + (dir.path() / "p.json").string() +
                   " " + s.input.string() + " " + s.expected.string() + " --program " + (dir.path() / "program.py").string());
    if (c.output.find("No module named") != std::string::npos) GTEST_SKIP() << "Debian's python3-torch is missing: " << c.output;
    ASSERT_EQ(c.exitCode, 0) << c.output;
    EXPECT_LE(maxAbsDiff(c.output), 1e-5) << c.output;
  }
}

TEST(TorchExport, ATorchSequentialWithTheWeightsPredictsWhatMirrorlabPredicts) {
  for (const ModelSpec& spec : {everyLayerModel(), sampleSoftmaxModel()}) {  // importing torch takes seconds: no probe
    TempDir dir("torch");
    Project p;
    p.name = "torch weights";
    Sequential model(spec);
    model.initialize(13);
    p.model = model.spec();  // with the generated layer names the arrays are named after
    p.save((dir.path() / "p.json").string());
    const Sample s = mirrorlabOutputs(model, 29, dir.path());
    const ExportResult r = exportModel(model, ExportFormat::Torch, (dir.path() / "m.npz").string(), ExportInfo{});
    const CommandResult c = runCommand(std::string(kPython) + " " + script("torch_load.py") + " " + r.path + " " +
                                       (dir.path() / "p.json").string() + " " + s.input.string() + " " + s.expected.string());
    if (c.output.find("No module named") != std::string::npos) GTEST_SKIP() << "Debian's python3-torch is missing: " << c.output;
    ASSERT_EQ(c.exitCode, 0) << c.output;
    EXPECT_LE(maxAbsDiff(c.output), 1e-5) << c.output;
    EXPECT_NE(c.output.find(std::to_string(model.paramCount()) + " parameters"), std::string::npos) << c.output;
  }
}

// A layer made without the registry: no kind, so no format's hook (a stand-in for a layer whose
// kind lacks one; RegistryWalkTest walks the real kinds).
class Conv2DStandIn : public Layer {
 public:
  std::string type() const override { return "Conv2D"; }
  Shape build(const Shape& in) override { return outputShape = inputShape = in; }
  void forward(const float*, float*, int64_t, const StepContext&) override {}
  void backward(const float*, const float*, float*, float*, int64_t, const StepContext&) override {}
};

TEST(ModelExport, ALayerAFormatCannotExpressIsNamedWithTheFormat) {
  Sequential model(everyLayerModel());
  Conv2DStandIn conv;
  conv.name = "conv2d_3";
  for (ExportFormat f : {ExportFormat::Onnx, ExportFormat::Torch, ExportFormat::Keras}) {
    try {
      checkExportable(conv, f);
      FAIL() << "exported a Conv2D to " << toString(f);
    } catch (const UserError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("layer 'conv2d_3' (Conv2D)"), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::string("--format ") + toString(f)), std::string::npos) << msg;
      EXPECT_NE(msg.find(f == ExportFormat::Onnx    ? "to ONNX"
                         : f == ExportFormat::Torch ? "to PyTorch"
                                                    : "to Keras"),
                std::string::npos)
          << msg;
    }
  }
  EXPECT_EQ(exportLayers(model, ExportFormat::Onnx).size(), model.layerCount());
}

TEST(ModelExport, BadOutputPathsAreRefusedBeforeAnyWork) {
  TempDir dir("export-paths");
  ExportRequest r;
  r.project.model = everyLayerModel();
  r.weights = (dir.path() / "never-read.mlw").string();  // does not exist: an error about it = work was done
  auto refused = [&](ExportFormat f, const std::string& out, const std::string& needle) {
    r.format = f;
    r.output = out;
    try {
      runExport(r);
      ADD_FAILURE() << out << " was accepted";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find("never-read"), std::string::npos) << "read the weights first: " << e.what();
    }
  };
  refused(ExportFormat::Onnx, (dir.path() / "missing" / "m.onnx").string(), "does not exist");
  refused(ExportFormat::Torch, "/proc/m.npz", "is not writable");  // refused even to root
  refused(ExportFormat::Onnx, dir.path().string(), "is a folder");
  refused(ExportFormat::Keras, (dir.path() / "m.h5").string(), "name it '*.keras' (the whole model) or '*.weights.h5'");
  refused(ExportFormat::KerasWeights, (dir.path() / "m.keras").string(),
          "needs an output ending in '.weights.h5', got '" + (dir.path() / "m.keras").string() +
              "': name it '*.weights.h5', or pass --format keras (Keras model) for that name");
  refused(ExportFormat::Onnx, (dir.path() / "m.npz").string(), "or pass --format torch (PyTorch weights) for that name");
  refused(ExportFormat::Torch, (dir.path() / "m.pt").string(),
          "--format torch (PyTorch weights) needs an output ending in '.npz'");
  refused(ExportFormat::Onnx, "", "no output file");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 0) << "something was left behind";
  // With a good path the weights are the next thing checked.
  r.format = ExportFormat::Onnx;
  r.output = (dir.path() / "m.onnx").string();
  EXPECT_THROW(runExport(r), UserError);
  EXPECT_FALSE(fs::exists(r.output));
}

TEST(AtomicFile, NothingHalfWrittenIsLeft) {
  TempDir dir("atomic");
  const fs::path target = dir.path() / "model.onnx";
  writeFile(target, "the previous export");
  {
    AtomicFile f(target.string(), "ONNX model");
    f.write("half of a new one");
    // The writer fails here (an exception): no commit.
  }
  std::ifstream in(target);
  std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(kept, "the previous export");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1) << "a temporary file is left";
  {
    AtomicFile f(target.string(), "ONNX model");
    f.write("the new export");
    f.commit();
  }
  std::ifstream again(target);
  std::string now((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>());
  EXPECT_EQ(now, "the new export");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
}

TEST(ModelExport, FormatNames) {
  EXPECT_EQ(parseExportFormat("onnx"), ExportFormat::Onnx);
  EXPECT_EQ(parseExportFormat("torch"), ExportFormat::Torch);
  EXPECT_EQ(parseExportFormat("keras"), ExportFormat::Keras);
  EXPECT_EQ(parseExportFormat("keras-weights"), ExportFormat::KerasWeights);
  try {
    parseExportFormat("tflite");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("'tflite' (allowed: onnx, torch, keras, keras-weights)"), std::string::npos) << e.what();
  }
  EXPECT_STREQ(defaultSuffix(ExportFormat::Keras), ".keras");
  EXPECT_STREQ(defaultSuffix(ExportFormat::KerasWeights), ".weights.h5");
  // --format keras picks by the output's name; a name alone picks the format.
  EXPECT_EQ(resolveFormat(ExportFormat::Keras, "m.weights.h5"), ExportFormat::KerasWeights);
  EXPECT_EQ(resolveFormat(ExportFormat::Keras, "m.keras"), ExportFormat::Keras);
  EXPECT_EQ(resolveFormat(ExportFormat::Onnx, "m.weights.h5"), ExportFormat::Onnx);
  EXPECT_EQ(formatOfPath("a/m.onnx"), ExportFormat::Onnx);
  EXPECT_EQ(formatOfPath("m.weights.h5"), ExportFormat::KerasWeights);
  EXPECT_EQ(formatOfPath("m.h5"), std::nullopt);
}
