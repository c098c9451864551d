// Convolutional models and the binary cross-entropy trained on GPUs through the plugin, held against
// the CPU path: a CNN with every spatial layer (Conv2D valid/same/strided, an even kernel whose
// "same" padding is one larger after than before, max and average pooling, global average pooling,
// Reshape), BatchNormalization with synchronized statistics (N logical or physical GPUs give the
// weights of one, empty shards under accumulation included) and per-replica statistics (the GPU
// gives what CPU devices give, and not the weights of one replica), evaluation through the moving
// statistics, and a sigmoid output with binary_crossentropy, fused and from logits. Skips with the
// probe's reason where there is no usable GPU (MIRRORLAB_REQUIRE_GPU=1 makes that a failure).
#include "GpuTrainingTest.h"

#include <cmath>
#include <cstdlib>
#include <numeric>

#include "backend/DeviceProbe.h"
#include "distribute/MirroredStrategy.h"
#include "nn/BatchNorm.h"
#include "project/LayerJson.h"
#include "support/Strategies.h"
#include "support/TestData.h"
#include "support/Training.h"
#include "train/Trainer.h"

namespace {

using mltest::relDiff;
using mltest::train;

using mlgputest::report;

class GpuConvTraining : public mlgputest::NeedsGpu {};

// 6x6x2 "images" of the 4-class test problem; binary: class >= 2.
const ml::Dataset& images() {
  static const ml::Dataset d = mltest::makeImages(1200, {6, 6, 2});
  return d;
}
const ml::Dataset& binaryImages() {
  static const ml::Dataset d = [] {
    ml::Dataset x = images();
    for (float& y : x.y) y = y >= 2 ? 1.0f : 0.0f;
    x.numClasses = 2;
    return x;
  }();
  return d;
}

// Every spatial layer the GPU runs, in one model.
ml::ModelSpec cnn() {
  ml::ModelSpec m;
  m.inputShape = {6, 6, 2};
  m.layers.push_back(
      ml::makeLayerSpec("Conv2D", {{"filters", 5}, {"kernel_size", 3}, {"padding", "same"}, {"activation", "relu"}}));
  m.layers.push_back(ml::makeLayerSpec("MaxPooling2D", {{"pool_size", 2}}));  // 3x3x5
  m.layers.push_back(
      ml::makeLayerSpec("Conv2D", {{"filters", 4}, {"kernel_size", 2}, {"padding", "same"}, {"activation", "tanh"}}));  // pad 0/1
  m.layers.push_back(ml::makeLayerSpec("AveragePooling2D", {{"pool_size", 2}, {"padding", "same"}}));  // 2x2x4, partial windows
  m.layers.push_back(ml::makeLayerSpec("Reshape", {{"target_shape", {4, 4}}}));
  m.layers.push_back(ml::makeLayerSpec("Reshape", {{"target_shape", {2, 2, 4}}}));
  m.layers.push_back(
      ml::makeLayerSpec("Conv2D", {{"filters", 6}, {"kernel_size", 2}, {"strides", 2}, {"use_bias", false}}));  // 1x1x6
  m.layers.push_back(ml::makeLayerSpec("GlobalAveragePooling2D"));
  m.layers.push_back(ml::makeLayerSpec("Dense", {{"units", 4}, {"activation", "softmax"}}));
  return m;
}

// Conv2D, BatchNormalization (0 none, 1 per-replica, 2 synchronized), pooling, a softmax.
ml::ModelSpec bnModel(int bn) {
  ml::ModelSpec m;
  m.inputShape = {6, 6, 2};
  m.layers.push_back(ml::makeLayerSpec("Conv2D", {{"filters", 6}, {"kernel_size", 3}, {"strides", 2}, {"padding", "same"}}));
  m.layers.push_back(ml::makeLayerSpec("BatchNormalization", {{"momentum", 0.8}, {"synchronized", bn == 2}}));
  m.layers.push_back(ml::makeLayerSpec("Activation", {{"activation", "relu"}}));
  m.layers.push_back(ml::makeLayerSpec("MaxPooling2D", {{"pool_size", 2}, {"padding", "same"}}));
  m.layers.push_back(ml::makeLayerSpec("Flatten"));
  m.layers.push_back(ml::makeLayerSpec("Dense", {{"units", 4}, {"activation", "softmax"}}));
  return m;
}

ml::ModelSpec binaryModel(bool logits) {
  ml::ModelSpec m;
  m.inputShape = {6, 6, 2};
  m.layers.push_back(ml::makeLayerSpec("Conv2D", {{"filters", 4}, {"kernel_size", 3}, {"activation", "relu"}}));
  m.layers.push_back(ml::makeLayerSpec("Flatten"));
  m.layers.push_back(ml::makeLayerSpec("Dense", {{"units", 1}, {"activation", logits ? "linear" : "sigmoid"}}));
  return m;
}

std::unique_ptr<ml::MirroredStrategy> strategy(const ml::ModelSpec& model, const std::string& devices,
                                               const std::string& loss = "sparse_categorical_crossentropy", bool logits = false) {
  ml::StrategyOptions so;
  so.bucketBytes = 256;  // several buckets: the all-reduce overlaps the backward pass
  return mltest::makeStrategy(model, devices, mltest::optimizer("sgd"), so, 7,
                              ml::Loss::make(ml::parseLossKind(loss).value(), logits));
}

// SGD at 0.05 over the order of seed 3; train() checks the replicas' bits after every step.
const mltest::TrainOptions kSteps{.lr = 0.05f, .orderSeed = 3, .expectFullBatch = false};

// cuDNN and the CPU's convolutions add in different orders: the GPU is held to float rounding.
TEST_F(GpuConvTraining, CnnWithEverySpatialLayerMatchesTheCpu) {
  auto cpu = strategy(cnn(), "cpu:1");
  auto gpu = strategy(cnn(), "gpu:0");
  const auto want = train(*cpu, images(), 40, 12, 1, kSteps);
  const auto got = train(*gpu, images(), 40, 12, 1, kSteps);
  EXPECT_LT(relDiff(got.weights, want.weights), 1e-4);
  for (size_t k = 0; k < want.losses.size(); ++k) EXPECT_NEAR(got.losses[k], want.losses[k], 1e-4 * (1 + want.losses[k])) << k;
  EXPECT_LT(got.losses.back(), got.losses.front()) << "the loss did not go down";
}

TEST_F(GpuConvTraining, FourLogicalGpusGiveTheWeightsOfOneForACnn) {
  const auto one = train(*strategy(cnn(), "gpu:0x1"), images(), 13, 6, 1, kSteps);  // shards 3/3/3/4
  EXPECT_LT(relDiff(train(*strategy(cnn(), "gpu:0x4"), images(), 13, 6, 1, kSteps).weights, one.weights), 1e-5);
}

// Synchronized statistics: 2, 3 and 4 replicas (shards 5/5, 4/3/3, 3/2/3/2) give the weights and
// the moving statistics of one; with 5 samples in 2 micro-batches on 4 replicas, some replicas
// sit out a micro-batch yet join its sums.
TEST_F(GpuConvTraining, SynchronizedBatchNormOnLogicalGpusGivesTheWeightsOfOne) {
  const auto one = train(*strategy(bnModel(2), "gpu:0x1"), images(), 10, 6, 1, kSteps);
  for (int n = 2; n <= 4; ++n) {
    auto s = strategy(bnModel(2), "gpu:0x" + std::to_string(n));
    const auto w = train(*s, images(), 10, 6, 1, kSteps);
    EXPECT_LT(relDiff(w.weights, one.weights), 2e-5) << n << " replicas";
    const auto& bn = dynamic_cast<const ml::BatchNorm&>(s->model(n - 1).layer(1));
    EXPECT_GT(std::fabs(bn.movingMean()[0]), 1e-3) << "the moving statistics did not move";
  }
  const auto acc1 = train(*strategy(bnModel(2), "gpu:0x1"), images(), 5, 4, 2, kSteps);
  EXPECT_LT(relDiff(train(*strategy(bnModel(2), "gpu:0x4"), images(), 5, 4, 2, kSteps).weights, acc1.weights), 2e-5);
}

TEST_F(GpuConvTraining, SynchronizedBatchNormOnTwoPhysicalGpusGivesTheWeightsOfOne) {
  if (report().gpus.size() < 2) GTEST_SKIP() << "needs 2 GPUs, this machine has " << report().gpus.size();
  auto two = strategy(bnModel(2), "gpu:0,1");
  EXPECT_EQ(two->allReduceName(), "nccl");
  EXPECT_LT(relDiff(train(*two, images(), 10, 6, 1, kSteps).weights,
                    train(*strategy(bnModel(2), "gpu:0"), images(), 10, 6, 1, kSteps).weights),
            2e-5);
}

// Per-replica statistics: 2 GPU replicas give what 2 CPU devices give, which is not what one
// replica gives (each normalises its own 4 samples); synchronized, the GPU's 2 match the CPU's 2.
TEST_F(GpuConvTraining, PerReplicaBatchNormOnGpusIsTheCpusAndNotOneReplicas) {
  for (int bn : {1, 2}) {
    const auto cpu2 = train(*strategy(bnModel(bn), "cpu:2"), images(), 8, 5, 1, kSteps);
    const auto gpu2 = train(*strategy(bnModel(bn), "gpu:0x2"), images(), 8, 5, 1, kSteps);
    EXPECT_LT(relDiff(gpu2.weights, cpu2.weights), 1e-4) << "statistics mode " << bn;
  }
  const double perReplica = relDiff(train(*strategy(bnModel(1), "gpu:0x2"), images(), 8, 5, 1, kSteps).weights,
                                    train(*strategy(bnModel(1), "gpu:0x1"), images(), 8, 5, 1, kSteps).weights);
  EXPECT_GT(perReplica, 1e-3) << "per-replica statistics should differ from the global batch's";
}

// Evaluation normalises with the moving statistics (not the batch's): after training, the GPU's
// outputs, loss and accuracy on held-out rows are the CPU's.
TEST_F(GpuConvTraining, EvaluationUsesTheMovingStatisticsLikeTheCpu) {
  auto cpu = strategy(bnModel(2), "cpu:1");
  auto gpu = strategy(bnModel(2), "gpu:0x3");
  train(*cpu, images(), 30, 8, 1, kSteps);
  train(*gpu, images(), 30, 8, 1, kSteps);
  std::vector<int64_t> idx(300);
  std::iota(idx.begin(), idx.end(), 900);
  std::vector<float> a(idx.size() * 4), b(idx.size() * 4);
  const auto ra = cpu->evaluate(images(), idx, a.data());
  const auto rb = gpu->evaluate(images(), idx, b.data());
  EXPECT_EQ(rb.samples, 300);
  EXPECT_NEAR(rb.lossSum, ra.lossSum, 1e-4 * ra.lossSum);
  EXPECT_NEAR(rb.metricSum, ra.metricSum, 2.0);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(b[i], a[i], 1e-4) << i;
  // Evaluated with one row, an output is the same: the moving statistics, not the batch's.
  std::vector<float> single(4);
  gpu->evaluate(images(), std::span<const int64_t>(idx).first(1), single.data());
  for (size_t k = 0; k < 4; ++k) EXPECT_NEAR(single[k], b[k], 1e-5);
}

// binary_crossentropy with a sigmoid output (the gradient fused into p - t) and from logits, with
// binary accuracy, on 2 logical GPUs against 2 CPU devices.
TEST_F(GpuConvTraining, BinaryCrossentropyTrainsLikeTheCpu) {
  for (bool logits : {false, true}) {
    auto cpu = strategy(binaryModel(logits), "cpu:2", "binary_crossentropy", logits);
    auto gpu = strategy(binaryModel(logits), "gpu:0x2", "binary_crossentropy", logits);
    const auto want = train(*cpu, binaryImages(), 32, 30, 1, kSteps);
    const auto got = train(*gpu, binaryImages(), 32, 30, 1, kSteps);
    EXPECT_LT(relDiff(got.weights, want.weights), 1e-4) << (logits ? "from logits" : "sigmoid");
    const double first = std::accumulate(got.losses.begin(), got.losses.begin() + 5, 0.0);
    const double last = std::accumulate(got.losses.end() - 5, got.losses.end(), 0.0);
    EXPECT_LT(last, first) << (logits ? "from logits" : "sigmoid") << ": the loss did not go down";
    std::vector<int64_t> idx(200);
    std::iota(idx.begin(), idx.end(), 1000);
    const auto ra = cpu->evaluate(binaryImages(), idx, nullptr);
    const auto rb = gpu->evaluate(binaryImages(), idx, nullptr);
    EXPECT_NEAR(rb.lossSum, ra.lossSum, 1e-4 * ra.lossSum);
    EXPECT_NEAR(rb.metricSum, ra.metricSum, 2.0);
    EXPECT_GT(rb.metricSum, 0.0);
  }
}

}  // namespace
