// The GPU backend's host side, which runs on every machine: the device RNG equals the CPU's (so GPU
// dropout masks can equal the CPU's), the ABI's enumerations match core/nn, the plugin loader and
// the device probe give precise reasons and never crash without a driver or GPU.
#include <gtest/gtest.h>
#include "GpuTestUtil.h"

#include <cstdio>
#include <cstdlib>
#include <optional>

#include "Error.h"
#include "backend/CudaPlugin.h"
#include "backend/DeviceProbe.h"
#include "backend/cuda/DeviceRng.h"
#include "distribute/MirroredStrategy.h"
#include "nn/Activations.h"
#include "nn/Loss.h"
#include "nn/SimpleLayers.h"
#include "project/LayerJson.h"
#include "random/Rng.h"

namespace ml {
namespace {

// Sets or clears an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

bool mentionsDriverOrPlugin(const std::string& s) {
  return s.find("driver") != std::string::npos || s.find("plugin") != std::string::npos;
}

TEST(DeviceRng, EqualsTheCoreCounterRng) {
  Rng keys(42);
  for (int i = 0; i < 10000; ++i) {
    const uint64_t a = keys.next(), b = keys.next(), c = keys.next(), d = keys.next();
    ASSERT_EQ(mlcuda::splitmix64(a), splitmix64(a));
    ASSERT_EQ(mlcuda::hashKeys(a, b), hashKeys(a, b));
    ASSERT_EQ(mlcuda::hashKeys(a, b, c, d), hashKeys(a, b, c, d));
  }
}

// The device's per-element keep decision reproduces ml::Dropout's mask for every element, with
// non-contiguous sample ids and a row length that is not a multiple of 4.
TEST(DeviceRng, DropoutKeepEqualsTheCpuDropoutMask) {
  for (const double rate : {0.1, 0.5, 0.9}) {
    const uint64_t salt = 0x5A17, seed = 1234, step = 7;
    Dropout drop(rate, salt);
    drop.name = "drop";
    const int64_t n = 9, k = 13;
    drop.build({k});
    std::vector<int64_t> ids(n);
    for (int64_t r = 0; r < n; ++r) ids[static_cast<size_t>(r)] = 1000 + 37 * r;
    StepContext ctx;
    ctx.training = true;
    ctx.seed = seed;
    ctx.step = step;
    ctx.sampleIds = ids.data();
    std::vector<float> x(static_cast<size_t>(n * k), 1.0f), y(x.size());
    drop.forward(x.data(), y.data(), n, ctx);
    const uint32_t threshold = mlcuda::dropoutThreshold(rate);
    int64_t kept = 0;
    for (int64_t r = 0; r < n; ++r) {
      const uint64_t rowKey = mlcuda::hashKeys(seed ^ salt, step, static_cast<uint64_t>(ids[static_cast<size_t>(r)]));
      for (int64_t j = 0; j < k; ++j) {
        const bool cpuKept = y[static_cast<size_t>(r * k + j)] != 0.0f;
        ASSERT_EQ(mlcuda::dropoutKeep(rowKey, j, threshold), cpuKept) << "rate " << rate << " row " << r << " col " << j;
        kept += cpuKept;
      }
    }
    // Not all kept, not all dropped: the comparison above tested both outcomes.
    EXPECT_GT(kept, 0);
    EXPECT_LT(kept, n * k);
  }
}

TEST(PluginAbi, EnumerationsMatchTheCore) {
  EXPECT_EQ(MLCUDA_ACT_LINEAR, static_cast<int>(Act::Linear));
  EXPECT_EQ(MLCUDA_ACT_RELU, static_cast<int>(Act::Relu));
  EXPECT_EQ(MLCUDA_ACT_SIGMOID, static_cast<int>(Act::Sigmoid));
  EXPECT_EQ(MLCUDA_ACT_TANH, static_cast<int>(Act::Tanh));
  EXPECT_EQ(MLCUDA_ACT_SOFTMAX, static_cast<int>(Act::Softmax));
  EXPECT_EQ(MLCUDA_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, static_cast<int>(LossKind::SparseCategoricalCrossentropy));
  EXPECT_EQ(MLCUDA_LOSS_CATEGORICAL_CROSSENTROPY, static_cast<int>(LossKind::CategoricalCrossentropy));
  EXPECT_EQ(MLCUDA_LOSS_MEAN_SQUARED_ERROR, static_cast<int>(LossKind::MeanSquaredError));
  EXPECT_EQ(MLCUDA_METRIC_ACCURACY, static_cast<int>(MetricKind::Accuracy));
  EXPECT_EQ(MLCUDA_METRIC_MEAN_ABSOLUTE_ERROR, static_cast<int>(MetricKind::MeanAbsoluteError));
}

TEST(PluginLoader, SearchesTheEnvironmentVariableAloneWhenSet) {
  ScopedEnv env("MIRRORLAB_CUDA_PLUGIN", "/nowhere/libmirrorlab_cuda.so");
  const auto c = cudaPluginCandidates();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0], "/nowhere/libmirrorlab_cuda.so");
}

TEST(PluginLoader, SearchesBesideTheExecutableThenTheInstalledLibThenTheLibraryPath) {
  ScopedEnv env("MIRRORLAB_CUDA_PLUGIN", nullptr);
  const auto c = cudaPluginCandidates();
  ASSERT_EQ(c.size(), 4u);
  EXPECT_NE(c[0].find("/libmirrorlab_cuda.so"), std::string::npos);
  EXPECT_NE(c[1].find("/../lib/mirrorlab/libmirrorlab_cuda.so"), std::string::npos);  // cmake --install, the .deb
  EXPECT_NE(c[2].find("/../lib/libmirrorlab_cuda.so"), std::string::npos);
  EXPECT_EQ(c[3], "libmirrorlab_cuda.so");
}

TEST(PluginLoader, AMissingFileIsNamedInTheReason) {
  std::string why;
  EXPECT_EQ(loadCudaPlugin("/nowhere/libmirrorlab_cuda.so", &why), nullptr);
  EXPECT_NE(why.find("/nowhere/libmirrorlab_cuda.so"), std::string::npos) << why;
  EXPECT_NE(why.find("cannot be loaded"), std::string::npos) << why;
}

TEST(PluginLoader, ALibraryThatIsNotThePluginIsRefused) {
  std::string why;
  EXPECT_EQ(loadCudaPlugin("libm.so.6", &why), nullptr);
  EXPECT_NE(why.find("not a Mirrorlab CUDA plugin"), std::string::npos) << why;
}

TEST(DeviceProbe, ListsGpusOrSaysWhyNot) {
  const DeviceReport r = probeDevices();
  EXPECT_GE(r.cpuCores, 1);
  EXPECT_FALSE(r.cpuModel.empty());
  if (r.gpus.empty()) {
    EXPECT_TRUE(mentionsDriverOrPlugin(r.noGpuReason)) << r.noGpuReason;
    EXPECT_NE(r.noGpuReason.find("simulated CPU devices only"), std::string::npos) << r.noGpuReason;
  } else {
    EXPECT_TRUE(r.noGpuReason.empty()) << r.noGpuReason;
    for (const auto& g : r.gpus) {
      EXPECT_FALSE(g.name.empty());
      EXPECT_GT(g.memoryBytes, 0);
      EXPECT_GT(g.ccMajor, 0);
      EXPECT_FALSE(g.driverVersion.empty());
      EXPECT_FALSE(g.runtimeVersion.empty());
    }
  }
}

// GPU devices go through the same strategy as CPU devices: without a GPU they are refused with the
// probe's own reason (and the way out, cpu:N); with GPUs, an index past the last one is named along
// with the GPUs the machine has. Either way it is a UserError, which the CLI turns into exit 2.
TEST(GpuDevices, AreRefusedWithTheProbesReasonOrTheMachinesGpus) {
  const DeviceReport r = probeDevices();
  ModelSpec m;
  m.inputShape = {4};
  m.layers.push_back(ml::makeLayerSpec("Dense", {{"units", 3}, {"activation", "softmax"}}));
  OptimizerSpec o;
  o.kind = ml::OptimizerKind::Sgd;
  StrategyOptions so;
  const int count = static_cast<int>(r.gpus.size());
  so.devices = parseDevices(count == 0 ? "gpu:0x2" : "gpu:" + std::to_string(count));
  try {
    MirroredStrategy s(m, Loss::make(LossKind::SparseCategoricalCrossentropy, false), MetricKind::Accuracy, o, so);
    FAIL() << so.devices.spec << " was accepted on a machine with " << count << " GPU(s)";
  } catch (const UserError& e) {
    const std::string msg = e.what();
    if (count == 0) {
      ASSERT_FALSE(r.noGpuReason.empty());
      EXPECT_NE(msg.find(r.noGpuReason), std::string::npos) << msg;
      EXPECT_NE(msg.find("'gpu:0x2'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("cpu:N"), std::string::npos) << msg;
    } else {
      EXPECT_NE(msg.find("gpu:" + std::to_string(count) + " does not exist: this machine has " + std::to_string(count) + " GPU"),
                std::string::npos)
          << msg;
    }
  }
}

#ifdef MIRRORLAB_TEST_CUDA_PLUGIN

// The plugin under test: the one this build made, unless MIRRORLAB_CUDA_PLUGIN names another (as
// tests/gpu/run.sh does for a carried build, whose build folder is not on the GPU machine).
const char* testPlugin() {
  const char* named = std::getenv("MIRRORLAB_CUDA_PLUGIN");
  return named && *named ? named : MIRRORLAB_TEST_CUDA_PLUGIN;
}

// The plugin this build made, loaded directly: it must load wherever the toolkit's libraries are
// (they are, on the machine that built it), and its probe must answer with a reason, not crash,
// when there is no driver or no GPU.
TEST(BuiltPlugin, LoadsAndProbesWithoutCrashing) {
  std::string why;
  std::printf("plugin under test: %s\n", testPlugin());
  const auto p = loadCudaPlugin(testPlugin(), &why);
  ASSERT_NE(p, nullptr) << why;
  EXPECT_EQ(p->apiVersion(), MLCUDA_API_VERSION);
  EXPECT_NE(p->buildInfo.find("CUDA runtime"), std::string::npos) << p->buildInfo;
  std::vector<mlcuda_gpu_info> gpus(16);
  mlcuda_probe_result result{};
  const mlcuda_status s = p->probe(gpus.data(), static_cast<int>(gpus.size()), &result);
  EXPECT_GT(result.runtime_version, 0);
  if (s.code == MLCUDA_OK) {
    EXPECT_GE(result.device_count, 1);
    EXPECT_GT(result.driver_version, 0);
    EXPECT_GT(gpus[0].total_memory_bytes, 0);
  } else {
    EXPECT_EQ(s.code, MLCUDA_ERR_NO_DEVICE) << s.message;
    EXPECT_EQ(result.device_count, 0);
    EXPECT_TRUE(mentionsDriverOrPlugin(s.message) || std::string(s.message).find("GPU") != std::string::npos) << s.message;
    if (result.driver_version == 0) {
      // No driver at all: the reason says so and names the runtime's error.
      EXPECT_NE(std::string(s.message).find("no NVIDIA GPU driver"), std::string::npos) << s.message;
      EXPECT_NE(std::string(s.message).find("cudaErrorInsufficientDriver"), std::string::npos) << s.message;
    }
  }
}

// Without a usable GPU every entry point that needs one fails with a status and a reason.
TEST(BuiltPlugin, ContextAndNvmlFailCleanlyWithoutAGpu) {
  std::string why;
  const auto p = loadCudaPlugin(testPlugin(), &why);
  ASSERT_NE(p, nullptr) << why;
  mlcuda_probe_result result{};
  if (p->probe(nullptr, 0, &result).code == MLCUDA_OK)
    GTEST_SKIP() << "this machine has a GPU: tests/gpu/test_gpu_kernels covers it";
  mlcuda_context* ctx = nullptr;
  const mlcuda_status c = p->contextCreate(0, "gpu:0", 0, &ctx);
  EXPECT_NE(c.code, MLCUDA_OK);
  EXPECT_EQ(ctx, nullptr);
  EXPECT_NE(std::string(c.message).find("gpu:0"), std::string::npos) << c.message;
  if (result.driver_version == 0) {
    EXPECT_NE(std::string(c.message).find("cudaErrorInsufficientDriver"), std::string::npos) << c.message;
  }
  mlcuda_gpu_sample sample{};
  const mlcuda_status n = p->nvmlSample(0, &sample);
  EXPECT_NE(n.code, MLCUDA_OK);
  EXPECT_GT(std::string(n.message).size(), 0u);
}

// NCCL is loaded by the first communicator, not with the plugin (one-GPU and logical-GPU runs work
// without it): the build information says so, a library that cannot be loaded is named with the
// way out, and the one this machine has loads and gets as far as the device check.
TEST(BuiltPlugin, LoadsNcclOnFirstUseAndNamesAMissingOneWithTheFix) {
  std::string why;
  const auto p = loadCudaPlugin(testPlugin(), &why);
  ASSERT_NE(p, nullptr) << why;
  EXPECT_TRUE(p->buildInfo.find("NCCL: loaded on first use") != std::string::npos ||
              p->buildInfo.find("NCCL 2.") != std::string::npos)
      << p->buildInfo;
  const int two[] = {0, 1};
  mlcuda_nccl* comm = nullptr;
  {
    ScopedEnv env("MIRRORLAB_NCCL_LIBRARY", "/nonexistent/libnccl.so.2");
    const mlcuda_status s = p->ncclCreate(two, 2, &comm);
    if (s.code == MLCUDA_OK) p->ncclDestroy(comm);
    if (s.code != MLCUDA_ERR_NCCL) GTEST_SKIP() << "NCCL was already loaded in this process: " << s.message;
    const std::string m = s.message;
    EXPECT_EQ(comm, nullptr);
    EXPECT_NE(m.find("MIRRORLAB_NCCL_LIBRARY=/nonexistent/libnccl.so.2 cannot be loaded"), std::string::npos) << m;
    EXPECT_NE(m.find("install it"), std::string::npos) << m;
    EXPECT_NE(m.find("--devices gpu:0x2"), std::string::npos) << m;
    EXPECT_NE(m.find("one GPU"), std::string::npos) << m;
  }
  mlcuda_probe_result result{};
  if (p->probe(nullptr, 0, &result).code == MLCUDA_OK)
    GTEST_SKIP() << "this machine has a GPU: tests/gpu/test_gpu_kernels makes communicators";
  const mlcuda_status s = p->ncclCreate(two, 2, &comm);
  EXPECT_EQ(comm, nullptr);
  if (s.code == MLCUDA_ERR_NCCL) {
    // This machine has no NCCL: the search and the way out are said.
    EXPECT_NE(std::string(s.message).find("NCCL cannot be loaded: "), std::string::npos) << s.message;
    EXPECT_NE(std::string(s.message).find("--devices gpu:0x2"), std::string::npos) << s.message;
  } else {
    // Loaded; then there is no GPU to put the ranks on.
    EXPECT_EQ(s.code, MLCUDA_ERR_NO_DEVICE) << s.message;
  }
}

// The program's own probe with the plugin present: no crash, and a reason when no GPU is usable.
TEST(BuiltPlugin, ProbeDevicesWithThePluginPresent) {
  const std::string plugin = testPlugin();
  ScopedEnv env("MIRRORLAB_CUDA_PLUGIN", plugin.c_str());
  const DeviceReport r = probeDevices();
  if (r.gpus.empty())
    EXPECT_TRUE(mentionsDriverOrPlugin(r.noGpuReason)) << r.noGpuReason;
  else
    EXPECT_TRUE(r.noGpuReason.empty()) << r.noGpuReason;
}

#endif

}  // namespace
}  // namespace ml
