// The generated TensorFlow and PyTorch programs: valid Python for the shipped projects, the
// mirrored mapping spelled out, and the PyTorch one actually trains a few steps on the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "LearnTestUtil.h"
#include "learn/CodeGen.h"
#include "project/Project.h"

namespace fs = std::filesystem;
using namespace ml;
using namespace mltest;

namespace {

const char* kProjects[] = {"fashion-mlp.json", "fashion-wide-mlp.json", "spirals.json", "fashion-cnn.json",
                           "fashion-cnn-bn.json"};

bool debianTorch(std::string* why) {
  const CommandResult r = runCommand(std::string(kPython) + " -c \"import torch, numpy\"");
  if (r.exitCode != 0 && why)
    *why = "Debian's python3-torch is not installed (" + std::string(kPython) + " -c 'import torch' failed: " + r.output + ")";
  return r.exitCode == 0;
}

}  // namespace

TEST(CodeGen, BothProgramsCompileForTheShippedProjects) {
  TempDir dir("codegen");
  for (const char* name : kProjects) {
    const Project p = Project::load(projectPath(name));
    for (Framework f : {Framework::TensorFlow, Framework::PyTorch}) {
      SCOPED_TRACE(std::string(name) + " " + toString(f));
      const std::string code = generateProgram(p, f);
      const fs::path file = dir.path() / suggestedFileName(p, f);
      writeFile(file, code);
      const CommandResult r = runCommand(std::string(kPython) + " -m py_compile " + file.string());
      EXPECT_EQ(r.exitCode, 0) << r.output;
      // The program opens by naming the project and explaining the mapping.
      EXPECT_EQ(code.rfind("# Mirrorlab project \"" + p.name + "\"", 0), 0u) << code.substr(0, 200);
      EXPECT_NE(code.find("all-reduce"), std::string::npos);
    }
  }
}

TEST(CodeGen, TensorFlowProgramUsesMirroredStrategy) {
  Project p = Project::load(projectPath("fashion-wide-mlp.json"));
  const std::string code = generateTensorFlowProgram(p);
  for (const char* needle :
       {"tf.distribute.MirroredStrategy(devices=devices)",
        "tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(DEVICES)])",
        "with strategy.scope():",
        "strategy.num_replicas_in_sync",
        "GLOBAL_BATCH = 256",
        "ReplicaDropout(0.2, seed=SEED + 2",
        "tf.keras.Input(shape=(28, 28))",
        "tf.keras.layers.Dense(512, activation=\"relu\", use_bias=True, kernel_initializer=\"glorot_uniform\"",
        "tf.keras.optimizers.Adam(learning_rate=learning_rate, beta_1=0.9, beta_2=0.999, epsilon=1e-07)",
        "SparseCategoricalCrossentropy(from_logits=False, reduction=reduction)",
        "tf.keras.metrics.SparseCategoricalAccuracy()",
        "gzip.open",
        "train-images-idx3-ubyte",
        "keras.__version__ == \"3.7.0\"",
        "order = epoch_order(len(x_train), SEED, epoch)",
        "strategy.distribute_datasets_from_function(dataset)",
        "tf.reduce_sum(tf.cast(per_sample_loss(ym, out), tf.float32)) / batch",
        "optimizer.apply_gradients(zip(grads, model.trainable_variables))",
        "strategy.reduce(\"SUM\", strategy.run(replica_step, args=next(iterator)), axis=None)",
        "\"--weights\"",
        "\"--save-weights\"",
        "\"--print-steps\"",
        "\"--predict-only\"",
        "def main(argv=None):",
        "Verified step for step against Mirrorlab with TensorFlow 2.21.0 and Keras 3.15.1",
        "needs TensorFlow 2.16 or newer (Keras 3)"})
    EXPECT_NE(code.find(needle), std::string::npos) << needle;
  // Two Dropout layers never share a seed (in Keras 3 they would drop the same units).
  EXPECT_NE(code.find("ReplicaDropout(0.2, seed=SEED + 4"), std::string::npos);
  // The model and the optimizer are made inside the scope: after it, and indented under it.
  const size_t scope = code.find("with strategy.scope():"), optimizer = code.find("        optimizer = make_optimizer(schedule)");
  EXPECT_LT(scope, optimizer);
  // The dropout difference is named at the top, before the docstring; "Requires TensorFlow 2" alone is gone.
  EXPECT_LT(code.find("# Differs from Mirrorlab: dropout masks"), code.find("\"\"\""));
  EXPECT_EQ(code.find("Requires TensorFlow 2 "), std::string::npos);

  // Per-device batch with accumulation: the global batch counts the devices and the micro-batches.
  p.training.perDeviceBatch = true;
  p.training.batchSize = 64;
  p.training.accumulate = 2;
  p.training.lrScaling = ml::LrRule::Linear;
  p.training.warmupEpochs = 2;
  p.training.lrDecayEpochs = {3};
  p.training.optimizer.kind = ml::OptimizerKind::Sgd;
  p.training.optimizer.momentum = 0.9;
  const std::string scaled = generateTensorFlowProgram(p);
  for (const char* needle : {"PER_REPLICA_BATCH = 64", "GLOBAL_BATCH = 256  # 64 x 2 device(s) x 2 micro-batch(es)",
                             "ACCUMULATE = 2", "LR_SCALING = \"linear\"", "WARMUP_EPOCHS = 2.0", "LR_DECAY_EPOCHS = [3]",
                             "MirrorlabSchedule(BASE_LEARNING_RATE, learning_rate, WARMUP_EPOCHS * steps_per_epoch,",
                             "tf.keras.optimizers.SGD(learning_rate=learning_rate, momentum=0.9, nesterov=False)"})
    EXPECT_NE(scaled.find(needle), std::string::npos) << needle;
  TempDir dir("codegen-tf");
  writeFile(dir.path() / "scaled.py", scaled);
  EXPECT_EQ(runCommand(std::string(kPython) + " -m py_compile " + (dir.path() / "scaled.py").string()).exitCode, 0);
}

// A project of several workers: MultiWorkerMirroredStrategy configured by TF_CONFIG, still valid Python.
TEST(CodeGen, TensorFlowProgramOfSeveralWorkersUsesMultiWorkerMirroredStrategy) {
  Project p = Project::load(projectPath("fashion-mlp.json"));
  p.distribute.workers = 3;
  const std::string code = generateTensorFlowProgram(p);
  for (const char* needle : {"WORKERS = 3", "tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)",
                             "\"TF_CONFIG\" not in os.environ", "\"task\": {\"type\": \"worker\", \"index\": 0}",
                             "mpirun -np WORKERS", "Several workers: the project trains as 3 processes"})
    EXPECT_NE(code.find(needle), std::string::npos) << needle;
  EXPECT_EQ(code.find("tf.distribute.MirroredStrategy("), std::string::npos);  // the single-worker form is gone
  EXPECT_EQ(code.find("def make_strategy():"), code.rfind("def make_strategy():"));
  // A per-device batch counts every worker's devices: Mirrorlab's global batch, not the strategy's replicas'.
  p.training.perDeviceBatch = true;
  p.training.accumulate = 2;
  for (const std::string& program : {generateTensorFlowProgram(p), generatePyTorchProgram(p)})
    EXPECT_NE(program.find("GLOBAL_BATCH = 768  # 128 x 1 device(s) x 3 workers x 2 micro-batch(es)"), std::string::npos);
  EXPECT_NE(generatePyTorchProgram(p).find("DEFAULT_WORLD_SIZE = 3  # the project's replicas: cpu:1 on each of 3 workers"),
            std::string::npos);
  TempDir dir("codegen-mw");
  writeFile(dir.path() / "mw.py", code);
  const CommandResult r = runCommand(std::string(kPython) + " -m py_compile " + (dir.path() / "mw.py").string());
  EXPECT_EQ(r.exitCode, 0) << r.output;
  // One worker: the project file does not even mention it.
  p.distribute.workers = 1;
  EXPECT_EQ(p.toJson()["distribute"].count("workers"), 0u);
  EXPECT_EQ(generateTensorFlowProgram(p).find("MultiWorker"), std::string::npos);
}

TEST(CodeGen, PyTorchProgramUsesDistributedDataParallel) {
  Project p = Project::load(projectPath("spirals.json"));
  const std::string code = generatePyTorchProgram(p);
  for (const char* needle : {"DistributedDataParallel as DDP",
                             "\"nccl\" if use_cuda else \"gloo\"",
                             "mp.spawn(",
                             "LOCAL_RANK",
                             "DEFAULT_WORLD_SIZE = 2",
                             "order = epoch_order(n, SEED, epoch)",
                             "shard = shard_of(shard_of(batch, m, ACCUMULATE), rank, world_size)",
                             "with ddp.no_sync() if m < ACCUMULATE - 1 else contextlib.nullcontext():",
                             "(loss * (world_size / len(batch))).backward()",
                             "class KerasAdam(torch.optim.Optimizer)",
                             "epsilon=1e-07",
                             "nn.init.xavier_uniform_",
                             "dense(\"dense\", 2, 64, \"glorot_uniform\", \"zeros\", True)",
                             "nn.Tanh()",
                             "F.cross_entropy(out, y, reduction=\"sum\")",
                             "\"--steps\"",
                             "\"--weights\"",
                             "\"--predict-only\"",
                             "NOISE = 0.2",
                             "VALIDATION_SPLIT = 0.2",
                             "rng_normal(hash_keys(seed, 0x5B1A15), SAMPLES)"})
    EXPECT_NE(code.find(needle), std::string::npos) << needle;
  // The softmax of the last layer is folded into the loss, never applied twice; no sampler pads the epoch.
  EXPECT_EQ(code.find("nn.Softmax"), std::string::npos);
  EXPECT_EQ(code.find("DistributedSampler"), std::string::npos);
  EXPECT_EQ(code.find("Differs from Mirrorlab"), std::string::npos) << "nothing differs for this project";

  // Per-device batch with accumulation; each optimizer where PyTorch's formula differs is written out.
  p.training.perDeviceBatch = true;
  p.training.accumulate = 3;
  p.training.optimizer.kind = ml::OptimizerKind::RmsProp;
  const std::string rms = generatePyTorchProgram(p);
  EXPECT_NE(rms.find("GLOBAL_BATCH = 384  # 64 x 2 device(s) x 3 micro-batch(es)"), std::string::npos);
  EXPECT_NE(rms.find("global_batch = GLOBAL_BATCH"), std::string::npos);
  EXPECT_NE(rms.find("increment = lr * g / (v + eps).sqrt()"), std::string::npos);
  p.training.optimizer.kind = ml::OptimizerKind::Sgd;
  p.training.optimizer.momentum = 0.9;
  p.training.optimizer.nesterov = true;
  EXPECT_NE(generatePyTorchProgram(p).find("return KerasSGD(params, lr=learning_rate, momentum=0.9, nesterov=True)"),
            std::string::npos);
  p.training.optimizer.momentum = 0.0;
  EXPECT_NE(generatePyTorchProgram(p).find("torch.optim.SGD(params, lr=learning_rate)"), std::string::npos);
  // Dropout is named as a difference at the top.
  const std::string wide = generatePyTorchProgram(Project::load(projectPath("fashion-wide-mlp.json")));
  EXPECT_LT(wide.find("# Differs from Mirrorlab: dropout masks"), wide.find("\"\"\""));
}

TEST(CodeGen, PyTorchSpiralsProgramTrainsFiveStepsOnTheCpu) {
  std::string why;
  if (!debianTorch(&why)) GTEST_SKIP() << why;
  TempDir dir("codegen-run");
  const Project p = Project::load(projectPath("spirals.json"));
  const fs::path file = dir.path() / suggestedFileName(p, Framework::PyTorch);
  writeFile(file, generatePyTorchProgram(p));
  // Two replicas (the project's cpu:2), started with mp.spawn, gloo over localhost.
  const CommandResult r =
      runCommand("env -u RANK -u WORLD_SIZE -u LOCAL_RANK " + std::string(kPython) + " " + file.string() + " --steps 5 --cpu");
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("2 replica(s) on cpu (gloo): 2 x 32 = 64 samples per step"), std::string::npos) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex(R"(epoch 1/60: loss ([-+0-9.eE]+|nan|inf))"))) << r.output;
  const double loss = std::stod(m[1].str());
  EXPECT_TRUE(std::isfinite(loss)) << r.output;
  // Three classes: a fresh model starts near ln 3 = 1.0986 and five steps cannot go far from it.
  EXPECT_GT(loss, 0.5);
  EXPECT_LT(loss, 2.0);
  EXPECT_NE(r.output.find("done: 5 steps on 2 replica(s)"), std::string::npos) << r.output;
}

// The CNN's programs: Keras' layers with their arguments; PyTorch's channels-first layers behind
// permutes, SyncBatchNorm where synchronized; the PyTorch program trains a few steps.
// Mirrorlab's softmax spans the whole sample: on an image both programs take it over every axis of
// the sample (Keras' Activation would take only the channels; nn.Softmax(dim=1) only the rows).
TEST(CodeGen, ASoftmaxOverAnImageSpansTheWholeSample) {
  Project p = Project::load(projectPath("fashion-cnn.json"));
  p.model.layers.insert(p.model.layers.begin() + 1, LayerSpec{"", ActivationSpec{Act::Softmax}});
  const std::string tf = generateProgram(p, Framework::TensorFlow);
  EXPECT_NE(tf.find("tf.keras.layers.Softmax(axis=[1, 2, 3]"), std::string::npos);
  const std::string torch = generatePyTorchProgram(p);
  EXPECT_NE(torch.find("nn.Flatten(), nn.Softmax(dim=1), nn.Unflatten(1, (26, 26, 32)),"), std::string::npos);
}

TEST(CodeGen, ConvolutionalProjectsMapEveryLayer) {
  const Project bn = Project::load(projectPath("fashion-cnn-bn.json"));
  const std::string tf = generateProgram(bn, Framework::TensorFlow);
  EXPECT_NE(
      tf.find("tf.keras.layers.Conv2D(32, (3, 3), strides=(1, 1), padding=\"valid\", activation=\"linear\", use_bias=False"),
      std::string::npos);
  EXPECT_NE(
      tf.find("tf.keras.layers.BatchNormalization(momentum=0.99, epsilon=0.001, center=True, scale=True, synchronized=True"),
      std::string::npos);
  EXPECT_NE(tf.find("tf.keras.layers.MaxPooling2D((2, 2), strides=(2, 2), padding=\"valid\""), std::string::npos);
  EXPECT_NE(tf.find("INPUT_SHAPE = (28, 28, 1)"), std::string::npos);
  const std::string torch = generatePyTorchProgram(bn);
  EXPECT_NE(torch.find("conv2d(\"conv2d\", 1, 32, (3, 3), (1, 1), False, \"glorot_uniform\", \"zeros\", False)"),
            std::string::npos);
  EXPECT_NE(torch.find("KerasBatchNorm(\"batch_normalization\", 32, 0.99, 0.001, True, True, True)"), std::string::npos);
  EXPECT_NE(torch.find("sums = all_reduce(sums)"), std::string::npos);  // synchronized on the CPU too
  EXPECT_EQ(torch.find("nn.SyncBatchNorm("), std::string::npos);
  EXPECT_NE(torch.find("x.permute(0, 3, 1, 2)"), std::string::npos);
  EXPECT_NE(torch.find("pool2d(True, (2, 2), (2, 2), False)"), std::string::npos);
}

// Mixed precision: Keras' policy and LossScaleOptimizer with the project's scale and interval (none
// for "none"); the last activation in float32; PyTorch's autocast and GradScaler; both say what differs.
// TensorFlow runs float32 products on TF32 by default on Ampere and later GPUs; the programs set
// it as the project does (off unless distribute.tf32), so that they compute what Mirrorlab does.
TEST(CodeGen, ProgramsSetTf32AsTheProjectDoes) {
  Project p = Project::load(projectPath("fashion-mlp.json"));
  for (bool on : {false, true}) {
    p.distribute.tf32 = on;
    const std::string value = on ? "TF32 = True" : "TF32 = False";
    const std::string tf = generateTensorFlowProgram(p), torch = generatePyTorchProgram(p);
    for (const std::string& needle : {value, std::string("tf.config.experimental.enable_tensor_float_32_execution(TF32)")})
      EXPECT_NE(tf.find(needle), std::string::npos) << needle;
    for (const std::string& needle : {value, std::string("torch.backends.cuda.matmul.allow_tf32 = TF32"),
                                      std::string("torch.backends.cudnn.allow_tf32 = TF32")})
      EXPECT_NE(torch.find(needle), std::string::npos) << needle;
  }
}

TEST(CodeGen, MixedPrecisionProgramsSetThePolicyAndTheLossScale) {
  TempDir dir("codegen-mixed");
  Project p = Project::load(projectPath("fashion-mlp.json"));
  p.training.precision = ml::Precision::MixedFloat16;
  p.training.lossScale = 1024;
  p.training.lossScaleGrowthSteps = 100;
  const std::string tf = generateTensorFlowProgram(p), torch = generatePyTorchProgram(p);
  for (const char* needle :
       {"PRECISION = \"mixed_float16\"", "tf.keras.mixed_precision.set_global_policy(PRECISION)",
        "tf.keras.mixed_precision.LossScaleOptimizer(optimizer, initial_scale=1024.0, dynamic_growth_steps=100)",
        "# Mixed precision: Keras' mixed_float16 policy"})
    EXPECT_NE(tf.find(needle), std::string::npos) << needle;
  for (const char* needle : {"AMP_DTYPE = torch.float16", "LOSS_SCALE = 1024", "LOSS_SCALE_GROWTH_STEPS = 100",
                             "torch.cuda.amp.GradScaler(init_scale=LOSS_SCALE or 1.0, growth_interval=LOSS_SCALE_GROWTH_STEPS",
                             "with torch.autocast(device.type", "scaler.step(optimizer)", "# Mixed precision (mixed_float16)"})
    EXPECT_NE(torch.find(needle), std::string::npos) << needle;
  p.training.lossScaling = false;  // "none": no LossScaleOptimizer, and the header says so
  EXPECT_EQ(generateTensorFlowProgram(p).find("LossScaleOptimizer"), std::string::npos);
  EXPECT_NE(generateTensorFlowProgram(p).find("mixed_float16 policy (set_global_policy), without loss scaling"),
            std::string::npos);
  EXPECT_NE(generatePyTorchProgram(p).find("LOSS_SCALE = None"), std::string::npos);
  p.training.precision = ml::Precision::MixedBfloat16;
  EXPECT_EQ(generateTensorFlowProgram(p).find("LossScaleOptimizer"), std::string::npos);
  // The last Dense computes in bfloat16, its softmax in float32 (Keras' advice; Mirrorlab's softmax is float32).
  EXPECT_NE(generateTensorFlowProgram(p).find("activation=\"linear\""), std::string::npos);
  EXPECT_NE(
      generateTensorFlowProgram(p).find("tf.keras.layers.Activation(\"softmax\", dtype=\"float32\"),  # the output in float32"),
      std::string::npos);
  EXPECT_NE(generatePyTorchProgram(p).find("AMP_DTYPE = torch.bfloat16"), std::string::npos);
  p.training.precision = ml::Precision::Float32;
  EXPECT_EQ(generatePyTorchProgram(p).find("# Mixed precision ("), std::string::npos);  // not in the header
  EXPECT_NE(generatePyTorchProgram(p).find("AMP_DTYPE = None"), std::string::npos);
  for (const char* precision : {"mixed_float16", "mixed_bfloat16"}) {  // valid Python
    p.training.precision = ml::parsePrecision(precision).value();
    p.training.lossScaling = true;
    for (Framework f : {Framework::TensorFlow, Framework::PyTorch}) {
      const fs::path file = dir.path() / (std::string(precision) + "_" + suggestedFileName(p, f));
      writeFile(file, generateProgram(p, f));
      const CommandResult r = runCommand(std::string(kPython) + " -m py_compile " + file.string());
      EXPECT_EQ(r.exitCode, 0) << precision << " " << toString(f) << ": " << r.output;
    }
  }
}

TEST(CodeGen, PyTorchCnnProgramTrainsAFewStepsOnTheCpu) {
  std::string why;
  if (!debianTorch(&why)) GTEST_SKIP() << why;
  TempDir dir("codegen-cnn");
  const Project p = Project::load(projectPath("fashion-cnn.json"));
  const fs::path file = dir.path() / suggestedFileName(p, Framework::PyTorch);
  writeFile(file, generatePyTorchProgram(p));
  const CommandResult r =
      runCommand("env -u RANK -u WORLD_SIZE -u LOCAL_RANK " + std::string(kPython) + " " + file.string() + " --steps 3 --cpu");
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("done: 3 steps on 2 replica(s)"), std::string::npos) << r.output;
}

TEST(CodeGen, PyTorchCsvRegressionProgramRuns) {
  std::string why;
  if (!debianTorch(&why)) GTEST_SKIP() << why;
  TempDir dir("codegen-csv");
  // y = 2 a - b + 0.5: a regression CSV with the label in the middle column.
  std::string csv = "a,y,b\n";
  for (int i = 0; i < 64; ++i) {
    const double a = (i % 8) / 8.0, b = (i / 8) / 8.0;
    csv += std::to_string(a) + "," + std::to_string(2 * a - b + 0.5) + "," + std::to_string(b) + "\n";
  }
  writeFile(dir.path() / "train.csv", csv);
  nlohmann::json j = {
      {"name", "CSV \"regression\""},
      {"description", "a \"\"\"quoted\"\"\" description\\ with a backslash"},
      {"model",
       {{"input_shape", {2}},
        {"layers",
         {{{"type", "Dense"}, {"units", 8}, {"activation", "relu"}, {"kernel_initializer", "he_normal"}},
          {{"type", "Dense"}, {"units", 1}}}}}},
      {"data",
       {{"kind", "csv"},
        {"path", (dir.path() / "train.csv").string()},
        {"label_column", "y"},
        {"standardize", true},
        {"validation_split", 0.25}}},
      {"training",
       {{"epochs", 2},
        {"batch_size", 16},
        {"optimizer", {{"name", "rmsprop"}, {"learning_rate", 0.01}}},
        {"loss", "mse"},
        {"metrics", {"mae"}},
        {"lr_scaling", "sqrt"},
        {"warmup_epochs", 0.5}}},
      {"distribute", {{"devices", "cpu:1"}}},
  };
  const Project p = Project::fromJson(j, "csv test");
  const fs::path file = dir.path() / suggestedFileName(p, Framework::PyTorch);
  EXPECT_EQ(file.filename().string(), "csv_regression_ddp_torch.py");
  writeFile(file, generatePyTorchProgram(p));
  writeFile(dir.path() / "tf.py", generateTensorFlowProgram(p));
  EXPECT_EQ(runCommand(std::string(kPython) + " -m py_compile " + (dir.path() / "tf.py").string()).exitCode, 0);
  const CommandResult r =
      runCommand("env -u RANK -u WORLD_SIZE -u LOCAL_RANK " + std::string(kPython) + " " + file.string() + " --cpu");
  ASSERT_EQ(r.exitCode, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m,
                                std::regex(R"(epoch 2/2: loss ([-+0-9.eE]+) mae ([-+0-9.eE]+) lr [^ ]+ \(6 steps\) val_loss)")))
      << r.output;
  EXPECT_TRUE(std::isfinite(std::stod(m[1].str())));
}

// A sigmoid + binary_crossentropy model: binary cross-entropy in both programs (not mean squared error),
// the sigmoid folded into PyTorch's loss, binary accuracy. learn.tf_step_for_step and
// learn.torch_step_for_step train one against Mirrorlab.
TEST(CodeGen, BinaryClassifiersUseBinaryCrossentropy) {
  Project p = Project::load(projectPath("spirals.json"));
  p.data.classes = 2;
  p.model.layers.back().as<DenseSpec>()->units = 1;
  p.model.layers.back().as<DenseSpec>()->activation = Act::Sigmoid;
  p.training.loss = ml::LossKind::BinaryCrossentropy;
  const std::string tf = generateTensorFlowProgram(p), torch = generatePyTorchProgram(p);
  for (const char* needle : {"tf.keras.losses.BinaryCrossentropy(from_logits=False, reduction=reduction)",
                             "tf.keras.metrics.BinaryAccuracy()", "y_train = y_train.astype(np.float32).reshape(-1, 1)"})
    EXPECT_NE(tf.find(needle), std::string::npos) << needle;
  for (const char* needle : {"F.binary_cross_entropy_with_logits(out, targets, reduction=\"sum\") / out.shape[1]",
                             "# sigmoid: folded into the loss", "decided = out > 0"})
    EXPECT_NE(torch.find(needle), std::string::npos) << needle;
  for (const std::string& program : {tf, torch}) EXPECT_EQ(program.find("MeanSquaredError"), std::string::npos);
  EXPECT_EQ(torch.find("mse_loss"), std::string::npos);
  EXPECT_EQ(torch.find("nn.Sigmoid()"), std::string::npos);
}

TEST(CodeGen, FrameworkNames) {
  EXPECT_EQ(parseFramework("tf"), Framework::TensorFlow);
  EXPECT_EQ(parseFramework("Keras"), Framework::TensorFlow);
  EXPECT_EQ(parseFramework("pytorch"), Framework::PyTorch);
  try {
    parseFramework("jax");
    FAIL() << "jax accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("allowed: tf, torch"), std::string::npos) << e.what();
  }
}
