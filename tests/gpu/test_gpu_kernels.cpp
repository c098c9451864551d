// Every kernel of the CUDA plugin against the CPU code it stands in for (core/nn on the same random
// inputs): a normalised error with a tolerance per operation, dropout masks bit for bit. The plugin
// is loaded exactly as the program loads it. Skips with the probe's reason where there is no usable
// GPU; MIRRORLAB_REQUIRE_GPU=1 turns that skip into a failure (tests/gpu/run.sh sets it).
#include <gtest/gtest.h>
#include "GpuTestUtil.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>

#include "backend/CudaPlugin.h"
#include "nn/Activations.h"
#include "nn/Dense.h"
#include "nn/Loss.h"
#include "nn/Optimizer.h"
#include "nn/SimpleLayers.h"
#include "random/Rng.h"

namespace ml {
namespace {

// ---- the plugin, one context on gpu:0, and device buffers ---------------------------------------

struct GpuEnv {
  const CudaPlugin* plugin = nullptr;
  mlcuda_context* ctx = nullptr;
  int deviceCount = 0;
  std::string reason;  // why there is no ctx
};

GpuEnv& gpu() {
  // Created once per process and left to the process's end (CUDA teardown in static destructors
  // is fragile).
  static GpuEnv e = [] {
    GpuEnv e;
    std::string why;
    e.plugin = cudaPlugin(&why);
    if (!e.plugin) {
      e.reason = why;
      return e;
    }
    std::vector<mlcuda_gpu_info> gpus(64);
    mlcuda_probe_result r{};
    mlcuda_status s = e.plugin->probe(gpus.data(), static_cast<int>(gpus.size()), &r);
    if (s.code != MLCUDA_OK) {
      e.reason = s.message;
      return e;
    }
    if (gpus[0].cc_major < 8) {
      e.reason = "gpu:0 (" + std::string(gpus[0].name) + ") has compute capability " + std::to_string(gpus[0].cc_major) + "." +
                 std::to_string(gpus[0].cc_minor) + "; the plugin is built for 8.0 and 9.0";
      return e;
    }
    e.deviceCount = r.device_count;
    s = e.plugin->contextCreate(0, "gpu:0", 0, &e.ctx);
    if (s.code != MLCUDA_OK) {
      e.reason = s.message;
      e.ctx = nullptr;
    }
    return e;
  }();
  return e;
}

const CudaPlugin& P() { return *gpu().plugin; }
mlcuda_context* C() { return gpu().ctx; }
void ok(const mlcuda_status& s) { throwIfFailed(s); }

class Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu().ctx) return;
    const char* require = std::getenv("MIRRORLAB_REQUIRE_GPU");
    if (require && std::string(require) == "1") FAIL() << "no usable GPU (MIRRORLAB_REQUIRE_GPU=1): " << gpu().reason;
    GTEST_SKIP() << gpu().reason;
  }
};

// A device array on ctx's GPU, freed at scope end.
template <class T>
class Dev {
 public:
  explicit Dev(size_t n, mlcuda_context* ctx = C()) : n_(n), ctx_(ctx) {
    void* q = nullptr;
    ok(P().allocate(ctx_, n * sizeof(T), &q));
    p_ = static_cast<T*>(q);
  }
  explicit Dev(const std::vector<T>& v, mlcuda_context* ctx = C()) : Dev(v.size(), ctx) { put(v); }
  ~Dev() {
    if (p_) P().release(ctx_, p_);
  }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  void put(const std::vector<T>& v) { ok(P().copyToDevice(ctx_, p_, v.data(), v.size() * sizeof(T))); }
  std::vector<T> get() const {
    std::vector<T> v(n_);
    ok(P().copyToHost(ctx_, v.data(), p_, n_ * sizeof(T)));
    return v;
  }
  T* data() const { return p_; }

 private:
  size_t n_;
  mlcuda_context* ctx_;
  T* p_ = nullptr;
};

// ---- inputs and comparisons --------------------------------------------------------------------

std::vector<float> random(size_t n, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.uniform(lo, hi));
  return v;
}

// max |got - want| / max(|want|): the error relative to the tensor's scale (floor 1e-3, so that
// an all-but-zero tensor is compared absolutely).
::testing::AssertionResult close(const std::vector<float>& got, const std::vector<float>& want, double tol,
                                 const std::string& what) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << what << ": size " << got.size() << " vs " << want.size();
  double scale = 0, worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (std::isnan(d))
      return ::testing::AssertionFailure() << what << ": NaN at [" << i << "]: gpu " << got[i] << ", cpu " << want[i];
    if (d > worst) {
      worst = d;
      at = i;
    }
  }
  const double err = worst / std::max(scale, 1e-3);
  if (err <= tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": normalised error " << err << " > " << tol << " (worst at [" << at
                                       << "]: gpu " << got[at] << ", cpu " << want[at] << ")";
}

::testing::AssertionResult closeScalar(double got, double want, double tol, const std::string& what) {
  const double err = std::fabs(got - want) / std::max(std::fabs(want), 1.0);
  if (err <= tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": gpu " << got << ", cpu " << want << ", normalised error " << err;
}

::testing::AssertionResult sameBits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << what << ": sizes differ";
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0)
      return ::testing::AssertionFailure() << what << ": [" << i << "] gpu " << got[i] << " cpu " << want[i];
  return ::testing::AssertionSuccess();
}

constexpr Act kActs[] = {Act::Linear, Act::Relu, Act::Sigmoid, Act::Tanh, Act::Softmax};
struct Shape3 {
  int64_t n, in, out;
};
constexpr Shape3 kDenseShapes[] = {{37, 53, 29}, {256, 784, 128}, {1, 5, 3}};

// FP32 GEMMs summed in a different order than OpenBLAS: ~1e-6 of the tensor's scale.
constexpr double kGemmTol = 1e-5;
constexpr double kElementwiseTol = 1e-5;

std::string describe(Act act, const Shape3& s, bool bias) {
  std::ostringstream o;
  o << toString(act) << " n=" << s.n << " in=" << s.in << " out=" << s.out << (bias ? " bias" : " no-bias");
  return o.str();
}

// ---- devices ---------------------------------------------------------------------------------------

TEST_F(Gpu, ProbeListsTheGpuWithItsProperties) {
  std::vector<mlcuda_gpu_info> gpus(64);
  mlcuda_probe_result r{};
  ok(P().probe(gpus.data(), 64, &r));
  ASSERT_GE(r.device_count, 1);
  EXPECT_GT(r.driver_version, 0);
  EXPECT_GT(r.runtime_version, 0);
  EXPECT_GT(std::strlen(gpus[0].name), 0u);
  EXPECT_GT(gpus[0].total_memory_bytes, int64_t{1} << 30);
  EXPECT_GE(gpus[0].cc_major, 8);
  EXPECT_GT(gpus[0].multiprocessors, 0);
  EXPECT_GT(std::strlen(gpus[0].pci_bus_id), 0u);
}

TEST_F(Gpu, NvmlSamplesUtilizationAndMemory) {
  mlcuda_gpu_sample s{};
  const mlcuda_status st = P().nvmlSample(0, &s);
  if (st.code == MLCUDA_ERR_NVML) GTEST_SKIP() << st.message;
  ok(st);
  EXPECT_GE(s.utilization_percent, 0);
  EXPECT_LE(s.utilization_percent, 100);
  EXPECT_GT(s.memory_total_bytes, 0);
  EXPECT_LE(s.memory_used_bytes, s.memory_total_bytes);
  if (s.temperature_c != -1) {  // -1: this driver's NVML has no temperature
    EXPECT_GT(s.temperature_c, 0);
    EXPECT_LT(s.temperature_c, 120);
  }
}

// ---- Dense -------------------------------------------------------------------------------------------

TEST_F(Gpu, DenseForwardMatchesCpu) {
  uint64_t seed = 100;
  for (const Act act : kActs)
    for (const bool bias : {true, false})
      for (const Shape3& s : kDenseShapes) {
        const std::string what = describe(act, s, bias);
        Dense d(s.out, act, bias);
        d.name = "d";
        d.build({s.in});
        std::vector<float> params = random(static_cast<size_t>(d.paramCount()), ++seed, -0.5, 0.5);
        std::vector<float> grads(params.size());
        d.bind(params.data(), grads.data());
        const std::vector<float> x = random(static_cast<size_t>(s.n * s.in), ++seed);
        std::vector<float> y(static_cast<size_t>(s.n * s.out));
        d.forward(x.data(), y.data(), s.n, StepContext{});

        Dev<float> gx(x), gp(params), gy(y.size());
        const float* gb = bias ? gp.data() + s.in * s.out : nullptr;
        ok(P().denseForward(C(), gx.data(), gp.data(), gb, gy.data(), s.n, s.in, s.out, static_cast<int>(act)));
        EXPECT_TRUE(close(gy.get(), y, kGemmTol, what + " y"));
      }
}

TEST_F(Gpu, DenseBackwardMatchesCpu) {
  uint64_t seed = 200;
  for (const Act act : kActs)
    for (const bool fused : {false, true}) {
      if (fused && act != Act::Softmax) continue;
      for (const bool bias : {true, false})
        for (const bool withDx : {true, false})
          for (const Shape3& s : kDenseShapes) {
            const std::string what = describe(act, s, bias) + (fused ? " fused" : "") + (withDx ? " dx" : " no-dx");
            Dense d(s.out, act, bias);
            d.name = "d";
            d.build({s.in});
            d.setFusedSoftmax(fused);
            std::vector<float> params = random(static_cast<size_t>(d.paramCount()), ++seed, -0.5, 0.5);
            // Nonzero gradients before the pass: parameter gradients accumulate (+=).
            const std::vector<float> grads0 = random(params.size(), ++seed);
            std::vector<float> grads = grads0;
            d.bind(params.data(), grads.data());
            const std::vector<float> x = random(static_cast<size_t>(s.n * s.in), ++seed);
            std::vector<float> y(static_cast<size_t>(s.n * s.out));
            d.forward(x.data(), y.data(), s.n, StepContext{});
            const std::vector<float> dy0 = random(y.size(), ++seed);
            std::vector<float> dy = dy0, dx(static_cast<size_t>(s.n * s.in));
            d.backward(x.data(), y.data(), dy.data(), withDx ? dx.data() : nullptr, s.n, StepContext{});

            Dev<float> gx(x), gp(params), gy(y), gdy(dy0), ggrads(grads0), gdx(dx.size());
            float* gdb = bias ? ggrads.data() + s.in * s.out : nullptr;
            ok(P().denseBackward(C(), gx.data(), gp.data(), gy.data(), gdy.data(), withDx ? gdx.data() : nullptr, ggrads.data(),
                                 gdb, s.n, s.in, s.out, static_cast<int>(act), fused ? 1 : 0));
            const std::vector<float> g = ggrads.get();
            const size_t kernelSize = static_cast<size_t>(s.in * s.out);
            EXPECT_TRUE(close(std::vector<float>(g.begin(), g.begin() + static_cast<long>(kernelSize)),
                              std::vector<float>(grads.begin(), grads.begin() + static_cast<long>(kernelSize)), kGemmTol,
                              what + " dW"));
            if (bias) {
              EXPECT_TRUE(close(std::vector<float>(g.begin() + static_cast<long>(kernelSize), g.end()),
                                std::vector<float>(grads.begin() + static_cast<long>(kernelSize), grads.end()), kGemmTol,
                                what + " db"));
            }
            if (withDx) {
              EXPECT_TRUE(close(gdx.get(), dx, kGemmTol, what + " dx"));
            }
          }
    }
}

// The bias gradient of tall batches (many chunks of rows, row counts that are not a multiple of a
// chunk, more chunks than the cap) and of wide layers (columns not a multiple of the 32-column
// tile): db = db0 + the column sums (the CPU's, in double), to float rounding relative to the sum
// of |values| of the column, and the same bits when the same pass runs again.
TEST_F(Gpu, BiasGradientOfTallAndWideBatchesMatchesCpuAndRepeatsItsBits) {
  struct Shape {
    int64_t n, k;
  };
  const Shape shapes[] = {{4096, 10}, {3, 1000}, {1, 1}, {256, 32}, {257, 33}, {1000, 37}, {70001, 3}, {300000, 2}};
  const int64_t in = 2;
  uint64_t seed = 250;
  for (const Shape& s : shapes) {
    const std::string what = "bias gradient n=" + std::to_string(s.n) + " k=" + std::to_string(s.k);
    const size_t kernelSize = static_cast<size_t>(in * s.k);
    const std::vector<float> x = random(static_cast<size_t>(s.n * in), ++seed);
    const std::vector<float> w = random(kernelSize, ++seed);
    const std::vector<float> dz = random(static_cast<size_t>(s.n * s.k), ++seed, -2, 3);
    const std::vector<float> grads0 = random(kernelSize + static_cast<size_t>(s.k), ++seed);
    std::vector<double> want(static_cast<size_t>(s.k)), magnitude(static_cast<size_t>(s.k));
    for (int64_t j = 0; j < s.k; ++j) {
      want[static_cast<size_t>(j)] = grads0[kernelSize + static_cast<size_t>(j)];
      magnitude[static_cast<size_t>(j)] = std::fabs(want[static_cast<size_t>(j)]);
    }
    for (int64_t r = 0; r < s.n; ++r)
      for (int64_t j = 0; j < s.k; ++j) {
        const float v = dz[static_cast<size_t>(r * s.k + j)];
        want[static_cast<size_t>(j)] += v;
        magnitude[static_cast<size_t>(j)] += std::fabs(v);
      }

    Dev<float> gx(x), gw(w), gy(dz.size()), gdy(dz), gg(grads0);
    auto pass = [&] {
      ok(P().denseBackward(C(), gx.data(), gw.data(), gy.data(), gdy.data(), nullptr, gg.data(), gg.data() + kernelSize, s.n, in,
                           s.k, MLCUDA_ACT_LINEAR, 0));
      return gg.get();
    };
    const std::vector<float> first = pass();
    for (int64_t j = 0; j < s.k; ++j) {
      const double got = first[kernelSize + static_cast<size_t>(j)];
      const double err = std::fabs(got - want[static_cast<size_t>(j)]) / std::max(magnitude[static_cast<size_t>(j)], 1e-30);
      ASSERT_LE(err, 1e-5) << what << ": column " << j << ": gpu " << got << ", cpu " << want[static_cast<size_t>(j)];
    }
    gg.put(grads0);
    gdy.put(dz);
    EXPECT_TRUE(sameBits(pass(), first, what + ", second run"));
  }
}

TEST_F(Gpu, Tf32IsOffByDefaultAndAvailableOnRequest) {
  const Shape3 s{512, 512, 512};
  Dense d(s.out, Act::Linear, true);
  d.name = "d";
  d.build({s.in});
  std::vector<float> params = random(static_cast<size_t>(d.paramCount()), 7), grads(params.size());
  d.bind(params.data(), grads.data());
  const std::vector<float> x = random(static_cast<size_t>(s.n * s.in), 8);
  std::vector<float> y(static_cast<size_t>(s.n * s.out));
  d.forward(x.data(), y.data(), s.n, StepContext{});

  mlcuda_context* tf32 = nullptr;
  ok(P().contextCreate(0, "gpu:0 (tf32)", 1, &tf32));
  {
    Dev<float> gx(x), gp(params), gy(y.size());
    ok(P().denseForward(C(), gx.data(), gp.data(), gp.data() + s.in * s.out, gy.data(), s.n, s.in, s.out, 0));
    EXPECT_TRUE(close(gy.get(), y, kGemmTol, "FP32 (default)"));
    // TF32 keeps 10 mantissa bits of each product's inputs: ~1e-3 relative.
    Dev<float> tx(x, tf32), tp(params, tf32), ty(y.size(), tf32);
    ok(P().denseForward(tf32, tx.data(), tp.data(), tp.data() + s.in * s.out, ty.data(), s.n, s.in, s.out, 0));
    EXPECT_TRUE(close(ty.get(), y, 1e-2, "TF32"));
  }
  P().contextDestroy(tf32);
}

// ---- activations -----------------------------------------------------------------------------------

TEST_F(Gpu, ActivationsMatchCpuInPlaceAndNot) {
  const int64_t n = 300, k = 37;
  uint64_t seed = 300;
  for (const Act act : kActs) {
    const std::string what = toString(act);
    ActivationLayer a(act);
    a.name = "a";
    a.build({k});
    const std::vector<float> x = random(static_cast<size_t>(n * k), ++seed, -4, 4);
    std::vector<float> y(x.size());
    a.forward(x.data(), y.data(), n, StepContext{});
    const std::vector<float> dy = random(x.size(), ++seed);
    std::vector<float> dx(x.size());
    a.backward(x.data(), y.data(), std::vector<float>(dy).data(), dx.data(), n, StepContext{});

    Dev<float> gx(x), gy(y.size());
    ok(P().activationForward(C(), static_cast<int>(act), gx.data(), gy.data(), n, k));
    EXPECT_TRUE(close(gy.get(), y, kElementwiseTol, what + " forward"));
    ok(P().activationForward(C(), static_cast<int>(act), gx.data(), gx.data(), n, k));
    EXPECT_TRUE(close(gx.get(), y, kElementwiseTol, what + " forward in place"));

    Dev<float> gyc(y), gdy(dy), gdx(dx.size());
    ok(P().activationBackward(C(), static_cast<int>(act), gyc.data(), gdy.data(), gdx.data(), n, k));
    EXPECT_TRUE(close(gdx.get(), dx, kElementwiseTol, what + " backward"));
    ok(P().activationBackward(C(), static_cast<int>(act), gyc.data(), gdy.data(), gdy.data(), n, k));
    EXPECT_TRUE(close(gdy.get(), dx, kElementwiseTol, what + " backward in place"));
  }
}

// Softmax on the plugin's own kernels (one warp per row up to 1024 columns, one block per row
// above): forward and backward against ml::activationForward / ml::activationBackward for narrow,
// wide and one-column rows, in place and not, with the same bits either way (the reduction order
// depends on the row length only); and logits around 500, where expf overflows unless the row
// maximum is subtracted first.
TEST_F(Gpu, SoftmaxForwardAndBackwardMatchCpuNarrowWideAndLarge) {
  struct Shape {
    int64_t n, k;
  };
  const Shape shapes[] = {{4096, 10}, {3, 1000}, {7, 1024}, {5, 1025}, {2, 5000}, {1000, 1}, {33, 33}};
  uint64_t seed = 350;
  for (const Shape& s : shapes) {
    const std::string what = "softmax n=" + std::to_string(s.n) + " k=" + std::to_string(s.k);
    const size_t count = static_cast<size_t>(s.n * s.k);
    const std::vector<float> x = random(count, ++seed, -3, 3);
    std::vector<float> y = x;
    activationForward(Act::Softmax, y.data(), s.n, s.k);
    const std::vector<float> dy = random(count, ++seed);
    std::vector<float> dx(count);
    activationBackward(Act::Softmax, y.data(), dy.data(), dx.data(), s.n, s.k);

    Dev<float> gx(x), gy(count);
    ok(P().activationForward(C(), MLCUDA_ACT_SOFTMAX, gx.data(), gy.data(), s.n, s.k));
    const std::vector<float> forward = gy.get();
    EXPECT_TRUE(close(forward, y, kElementwiseTol, what + " forward"));
    ok(P().activationForward(C(), MLCUDA_ACT_SOFTMAX, gx.data(), gx.data(), s.n, s.k));
    EXPECT_TRUE(sameBits(gx.get(), forward, what + " forward in place"));

    Dev<float> gyc(y), gdy(dy), gdx(count);
    ok(P().activationBackward(C(), MLCUDA_ACT_SOFTMAX, gyc.data(), gdy.data(), gdx.data(), s.n, s.k));
    const std::vector<float> backward = gdx.get();
    EXPECT_TRUE(close(backward, dx, kElementwiseTol, what + " backward"));
    ok(P().activationBackward(C(), MLCUDA_ACT_SOFTMAX, gyc.data(), gdy.data(), gdy.data(), s.n, s.k));
    EXPECT_TRUE(sameBits(gdy.get(), backward, what + " backward in place"));

    std::vector<float> large = random(count, ++seed, 420, 580);
    Dev<float> gl(large), gly(count);
    activationForward(Act::Softmax, large.data(), s.n, s.k);
    ok(P().activationForward(C(), MLCUDA_ACT_SOFTMAX, gl.data(), gly.data(), s.n, s.k));
    EXPECT_TRUE(close(gly.get(), large, kElementwiseTol, what + " forward, logits 420..580"));
  }
}

// ---- losses and metrics --------------------------------------------------------------------------------

std::vector<float> softmaxRows(std::vector<float> v, int64_t n, int64_t k) {
  activationForward(Act::Softmax, v.data(), n, k);
  return v;
}

TEST_F(Gpu, LossesAndGradientsMatchCpu) {
  // 300 rows: more than one stride of the row-sum reduction.
  const int64_t n = 300, k = 10;
  struct Case {
    const char* name;
    bool fromLogits, fused;
  };
  const Case cases[] = {{"sparse_categorical_crossentropy", true, false},
                        {"sparse_categorical_crossentropy", false, true},
                        {"sparse_categorical_crossentropy", false, false},
                        {"categorical_crossentropy", true, false},
                        {"categorical_crossentropy", false, true},
                        {"categorical_crossentropy", false, false},
                        {"mean_squared_error", false, false}};
  uint64_t seed = 400;
  for (const Case& c : cases) {
    const std::string what = std::string(c.name) + (c.fromLogits ? " from logits" : c.fused ? " fused softmax" : "");
    const Loss loss = [&] {
      Loss l = Loss::make(c.name, c.fromLogits);
      l.setFusedSoftmax(c.fused);
      return l;
    }();
    std::vector<float> pred;
    const std::vector<float> logits = random(static_cast<size_t>(n * k), ++seed, -3, 3);
    if (loss.kind() == LossKind::MeanSquaredError || c.fromLogits)
      pred = logits;
    else if (c.fused)
      pred = softmaxRows(logits, n, k);
    else
      pred = random(static_cast<size_t>(n * k), ++seed, 0.01, 1.0);  // unnormalised: Keras normalises
    if (!c.fromLogits && loss.isClassification()) {
      // Some probabilities below the clip, to take the clipped branches too.
      for (int64_t r = 0; r < n; r += 7) pred[static_cast<size_t>(r * k + r % k)] = 1e-9f;
    }
    std::vector<float> targets;
    Rng rng(++seed);
    if (loss.kind() == LossKind::SparseCategoricalCrossentropy) {
      for (int64_t r = 0; r < n; ++r) targets.push_back(static_cast<float>(rng.below(static_cast<uint64_t>(k))));
    } else if (loss.kind() == LossKind::CategoricalCrossentropy) {
      targets = softmaxRows(random(static_cast<size_t>(n * k), ++seed, -2, 2), n, k);  // soft labels, rows sum to 1
    } else {
      targets = random(static_cast<size_t>(n * k), ++seed);
    }
    std::vector<float> grad(static_cast<size_t>(n * k));
    const double sum = loss.compute(pred.data(), targets.data(), n, k, grad.data());

    Dev<float> gp(pred), gt(targets), gg(grad.size());
    Dev<double> gsum(1);
    ok(P().loss(C(), static_cast<int>(loss.kind()), c.fromLogits, c.fused, gp.data(), gt.data(), n, k, gg.data(), gsum.data()));
    EXPECT_TRUE(closeScalar(gsum.get()[0], sum, 1e-5, what + " loss sum"));
    EXPECT_TRUE(close(gg.get(), grad, kElementwiseTol, what + " gradient"));
    // Evaluation: no gradient asked for.
    ok(P().loss(C(), static_cast<int>(loss.kind()), c.fromLogits, c.fused, gp.data(), gt.data(), n, k, nullptr, gsum.data()));
    EXPECT_TRUE(closeScalar(gsum.get()[0], sum, 1e-5, what + " loss sum without gradient"));
  }
}

TEST_F(Gpu, MetricsMatchCpu) {
  const int64_t n = 300, k = 10;
  const std::vector<float> pred = random(static_cast<size_t>(n * k), 500);
  Rng rng(501);
  std::vector<float> sparse, oneHot(static_cast<size_t>(n * k), 0.0f);
  for (int64_t r = 0; r < n; ++r) {
    const auto c = static_cast<int64_t>(rng.below(static_cast<uint64_t>(k)));
    sparse.push_back(static_cast<float>(c));
    oneHot[static_cast<size_t>(r * k + c)] = 1.0f;
  }
  // Make about a third right, so that the count is neither 0 nor n.
  std::vector<float> p = pred;
  for (int64_t r = 0; r < n; r += 3) p[static_cast<size_t>(r * k + static_cast<int64_t>(sparse[static_cast<size_t>(r)]))] = 5.0f;
  const std::vector<float> regression = random(static_cast<size_t>(n * k), 502);

  Dev<float> gp(p), gs(sparse), go(oneHot), gr(regression);
  Dev<double> out(1);
  ok(P().metricSum(C(), MLCUDA_METRIC_ACCURACY, gp.data(), gs.data(), n, k, 1, out.data()));
  EXPECT_EQ(out.get()[0], metricSum(MetricKind::Accuracy, p.data(), sparse.data(), n, k, 1)) << "accuracy, sparse labels";
  ok(P().metricSum(C(), MLCUDA_METRIC_ACCURACY, gp.data(), go.data(), n, k, k, out.data()));
  EXPECT_EQ(out.get()[0], metricSum(MetricKind::Accuracy, p.data(), oneHot.data(), n, k, k)) << "accuracy, one-hot labels";
  ok(P().metricSum(C(), MLCUDA_METRIC_MEAN_ABSOLUTE_ERROR, gp.data(), gr.data(), n, k, k, out.data()));
  EXPECT_TRUE(
      closeScalar(out.get()[0], metricSum(MetricKind::MeanAbsoluteError, p.data(), regression.data(), n, k, k), 1e-9, "mae"));
}

// ---- dropout ---------------------------------------------------------------------------------------------

TEST_F(Gpu, DropoutMasksAndGradientsAreBitIdenticalToCpu) {
  const int64_t n = 50, k = 13;  // k not a multiple of 4: the last group of 16-bit draws is partial
  for (const double rate : {0.1, 0.5})
    for (const bool withIds : {true, false}) {
      const std::string what = "rate " + std::to_string(rate) + (withIds ? " sample ids" : " row numbers");
      const uint64_t salt = 0xD20F, seed = 99, step = 12;
      Dropout drop(rate, salt);
      drop.name = "drop";
      drop.build({k});
      std::vector<int64_t> ids(n);
      for (int64_t r = 0; r < n; ++r) ids[static_cast<size_t>(r)] = 5000 - 3 * r;
      StepContext ctx;
      ctx.training = true;
      ctx.seed = seed;
      ctx.step = step;
      ctx.sampleIds = withIds ? ids.data() : nullptr;
      const std::vector<float> x = random(static_cast<size_t>(n * k), 600, 0.5, 1.5);  // never 0
      std::vector<float> y(x.size());
      drop.forward(x.data(), y.data(), n, ctx);
      const std::vector<float> dy0 = random(x.size(), 601);
      std::vector<float> dy = dy0, dx(x.size());
      drop.backward(nullptr, nullptr, dy.data(), dx.data(), n, ctx);

      Dev<float> gx(x), gy(x.size()), gdy(dy0), gdx(x.size());
      Dev<uint8_t> mask(x.size());
      Dev<int64_t> gids(ids);
      ok(P().dropoutForward(C(), gx.data(), gy.data(), mask.data(), n, k, rate, seed, salt, step, withIds ? gids.data() : nullptr,
                            1));
      EXPECT_TRUE(sameBits(gy.get(), y, what + " y"));
      const std::vector<uint8_t> m = mask.get();
      for (size_t i = 0; i < m.size(); ++i) ASSERT_EQ(m[i] != 0, y[i] != 0.0f) << what << " mask [" << i << "]";
      ok(P().dropoutBackward(C(), gdy.data(), gdx.data(), mask.data(), n * k, rate, 1));
      EXPECT_TRUE(sameBits(gdx.get(), dx, what + " dx"));
    }
  // Inference: the identity, mask untouched.
  const std::vector<float> x = random(130, 602);
  Dev<float> gx(x), gy(x.size());
  ok(P().dropoutForward(C(), gx.data(), gy.data(), nullptr, 10, 13, 0.5, 1, 2, 3, nullptr, 0));
  EXPECT_TRUE(sameBits(gy.get(), x, "inference"));
}

// ---- optimizers -----------------------------------------------------------------------------------------------

TEST_F(Gpu, OptimizersMatchCpuOverSeveralSteps) {
  const int64_t count = 10007;
  const int steps = 5;
  const float scale = 1.0f / 64, lr = 0.01f;
  struct Case {
    const char* name;
    double momentum;
    bool nesterov;
  };
  const Case cases[] = {{"sgd", 0.0, false},  {"sgd", 0.9, false},     {"sgd", 0.9, true},
                        {"adam", 0.0, false}, {"rmsprop", 0.0, false}, {"rmsprop", 0.5, false}};
  for (const Case& c : cases) {
    const std::string what = std::string(c.name) + " momentum " + std::to_string(c.momentum) + (c.nesterov ? " nesterov" : "");
    OptimizerSpec spec;
    spec.name = c.name;
    spec.learningRate = lr;
    spec.momentum = c.momentum;
    spec.nesterov = c.nesterov;
    // RMSprop with a large epsilon: Keras' sqrt(v + eps) and sqrt(v) + eps then differ well above the tolerance.
    if (spec.name == "rmsprop") spec.epsilon = 1e-2;
    auto opt = Optimizer::make(spec, count);
    std::vector<float> p = random(static_cast<size_t>(count), 700);
    Dev<float> gp(p), gg(static_cast<size_t>(count)), s1(static_cast<size_t>(count)), s2(static_cast<size_t>(count));
    ok(P().fillZero(C(), s1.data(), sizeof(float) * static_cast<size_t>(count)));
    ok(P().fillZero(C(), s2.data(), sizeof(float) * static_cast<size_t>(count)));
    for (int s = 0; s < steps; ++s) {
      const std::vector<float> g = random(static_cast<size_t>(count), 710 + static_cast<uint64_t>(s), -8, 8);
      opt->step(p, g, scale, lr);
      gg.put(g);
      const std::string name = c.name;
      if (name == "sgd")
        ok(P().sgdStep(C(), gp.data(), gg.data(), s1.data(), count, scale, lr, static_cast<float>(spec.momentum), spec.nesterov));
      else if (name == "adam")
        ok(P().adamStep(C(), gp.data(), gg.data(), s1.data(), s2.data(), count, scale, lr, spec.beta1, spec.beta2,
                        static_cast<float>(spec.epsilon), s + 1));
      else
        ok(P().rmspropStep(C(), gp.data(), gg.data(), s1.data(), s2.data(), count, scale, lr, static_cast<float>(spec.rho),
                           static_cast<float>(spec.momentum), static_cast<float>(spec.epsilon)));
    }
    EXPECT_TRUE(close(gp.get(), p, 1e-5, what + " parameters"));
    const auto state = opt->stateBuffers();
    if (!state.empty() && !state[0].empty()) {
      EXPECT_TRUE(close(s1.get(), std::vector<float>(state[0].begin(), state[0].end()), 1e-5, what + " first slot"));
    }
    if (state.size() > 1 && !state[1].empty()) {
      EXPECT_TRUE(close(s2.get(), std::vector<float>(state[1].begin(), state[1].end()), 1e-5, what + " second slot"));
    }
  }
}

// ---- all-reduce ------------------------------------------------------------------------------------------------

// Four logical replicas on gpu:0, two contexts (as two replica threads would hold): the sum is
// taken on one context's comm stream after both compute streams' events, and every buffer ends
// with the same bits, equal to the left-to-right float sum.
TEST_F(Gpu, LocalAllReduceGivesEveryLogicalReplicaTheSameSum) {
  mlcuda_context* other = nullptr;
  ok(P().contextCreate(0, "gpu:0/1", 0, &other));
  {
    const int64_t elements = 100003;
    std::vector<std::vector<float>> host;
    for (int r = 0; r < 4; ++r) host.push_back(random(static_cast<size_t>(elements), 800 + static_cast<uint64_t>(r)));
    Dev<float> b0(host[0]), b1(host[1]), b2(host[2], other), b3(host[3], other);
    mlcuda_event *readyA = nullptr, *readyB = nullptr, *done = nullptr;
    ok(P().eventCreate(C(), &readyA));
    ok(P().eventCreate(other, &readyB));
    ok(P().eventCreate(C(), &done));
    ok(P().eventRecord(C(), MLCUDA_STREAM_COMPUTE, readyA));
    ok(P().eventRecord(other, MLCUDA_STREAM_COMPUTE, readyB));
    float* buffers[] = {b0.data(), b1.data(), b2.data(), b3.data()};
    mlcuda_event* ready[] = {readyA, readyB};
    ok(P().localAllReduce(C(), buffers, 4, elements, ready, 2, done));
    ok(P().streamWaitEvent(C(), MLCUDA_STREAM_COMPUTE, done));
    ok(P().streamWaitEvent(other, MLCUDA_STREAM_COMPUTE, done));
    std::vector<float> want(static_cast<size_t>(elements));
    for (size_t i = 0; i < want.size(); ++i) want[i] = ((host[0][i] + host[1][i]) + host[2][i]) + host[3][i];
    EXPECT_TRUE(sameBits(b0.get(), want, "replica 0"));
    EXPECT_TRUE(sameBits(b1.get(), want, "replica 1"));
    EXPECT_TRUE(sameBits(b2.get(), want, "replica 2"));
    EXPECT_TRUE(sameBits(b3.get(), want, "replica 3"));

    float* twice[] = {b0.data(), b0.data()};
    const mlcuda_status dup = P().localAllReduce(C(), twice, 2, elements, nullptr, 0, nullptr);
    EXPECT_EQ(dup.code, MLCUDA_ERR_INVALID_ARGUMENT) << dup.message;
    ok(P().synchronize(C()));
    ok(P().synchronize(other));
    P().eventDestroy(readyA);
    P().eventDestroy(readyB);
    P().eventDestroy(done);
  }
  P().contextDestroy(other);
}

// The training loop's finiteness check: inf, -inf and NaN counted (several blocks' worth, so the
// per-block sums and the atomic add both matter), added to the counter, which is not reset.
TEST_F(Gpu, CountNonfiniteCountsInfAndNanAndAccumulates) {
  std::vector<float> v = random(300001, 77, -1e30, 1e30);
  const float inf = std::numeric_limits<float>::infinity();
  for (size_t i : {size_t{0}, size_t{255}, size_t{256}, size_t{70000}, size_t{300000}}) v[i] = inf;
  v[12345] = -inf;
  v[200000] = std::numeric_limits<float>::quiet_NaN();
  v[200001] = std::numeric_limits<float>::max();  // large but finite: not counted
  Dev<float> x(v);
  Dev<unsigned long long> counter(std::vector<unsigned long long>{5});
  ok(P().countNonfinite(C(), x.data(), static_cast<int64_t>(v.size()), counter.data()));
  EXPECT_EQ(counter.get()[0], 5u + 7u);
  ok(P().countNonfinite(C(), x.data(), 1, counter.data()));  // just v[0]
  EXPECT_EQ(counter.get()[0], 13u);
  ok(P().countNonfinite(C(), x.data() + 1, 255, counter.data()));  // v[1..255]: v[255] only
  EXPECT_EQ(counter.get()[0], 14u);
  ok(P().countNonfinite(C(), x.data(), 0, counter.data()));
  EXPECT_EQ(counter.get()[0], 14u);
  const mlcuda_status bad = P().countNonfinite(C(), x.data(), 10, nullptr);
  EXPECT_EQ(bad.code, MLCUDA_ERR_INVALID_ARGUMENT) << bad.message;
}

TEST_F(Gpu, NcclRefusesTwoRanksOnOneGpuAndReducesAcrossGpus) {
  const int twice[] = {0, 0};
  mlcuda_nccl* comm = nullptr;
  const mlcuda_status refused = P().ncclCreate(twice, 2, &comm);
  EXPECT_EQ(refused.code, MLCUDA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(refused.message).find("logical GPUs"), std::string::npos) << refused.message;
  EXPECT_EQ(comm, nullptr);

  // One rank: the communicator and the grouped call work, and the sum of one buffer is itself.
  // NCCL is loaded here, on first use; a machine without it says so (tests/gpu/run.sh looks for it).
  const int one[] = {0};
  const mlcuda_status created = P().ncclCreate(one, 1, &comm);
  if (created.code == MLCUDA_ERR_NCCL && std::string(created.message).find("cannot be loaded") != std::string::npos)
    GTEST_SKIP() << created.message;
  ok(created);
  {
    const std::vector<float> v = random(4099, 900);
    Dev<float> b(v);
    mlcuda_context* contexts[] = {C()};
    float* buffers[] = {b.data()};
    ok(P().ncclAllReduce(comm, contexts, buffers, static_cast<int64_t>(v.size())));
    ok(P().synchronize(C()));
    EXPECT_TRUE(sameBits(b.get(), v, "one rank"));
  }
  P().ncclDestroy(comm);

  if (gpu().deviceCount < 2) return;  // the rest needs two GPUs
  mlcuda_context* second = nullptr;
  ok(P().contextCreate(1, "gpu:1", 0, &second));
  const int two[] = {0, 1};
  ok(P().ncclCreate(two, 2, &comm));
  {
    const std::vector<float> a = random(50001, 901), b = random(50001, 902);
    Dev<float> da(a), db(b, second);
    mlcuda_context* contexts[] = {C(), second};
    float* buffers[] = {da.data(), db.data()};
    ok(P().ncclAllReduce(comm, contexts, buffers, static_cast<int64_t>(a.size())));
    ok(P().synchronize(C()));
    ok(P().synchronize(second));
    std::vector<float> want(a.size());
    for (size_t i = 0; i < a.size(); ++i) want[i] = a[i] + b[i];
    EXPECT_TRUE(close(da.get(), want, 1e-6, "gpu:0 after NCCL"));
    EXPECT_TRUE(sameBits(db.get(), da.get(), "gpu:1 equals gpu:0"));
  }
  P().ncclDestroy(comm);
  P().contextDestroy(second);
}

// A collective that cannot finish in time: gpu:1's all-reduce waits behind ~0.7 s of GEMMs on its
// compute stream, so gpu:0's half waits for it. With MIRRORLAB_GPU_COLLECTIVE_TIMEOUT=0.05, gpu:0's
// synchronize gives up, aborts the communicator and says so (the devices, the timeout, what to do)
// instead of blocking; gpu:1's waits then report the abort too, and everything tears down. Its own
// contexts: an aborted communicator leaves the contexts that ran it failing their waits.
TEST_F(Gpu, AStuckNcclAllReduceTimesOutAbortsAndSaysWhy) {
  if (gpu().deviceCount < 2) GTEST_SKIP() << "needs two GPUs";
  mlcuda_context *c0 = nullptr, *c1 = nullptr;
  ok(P().contextCreate(0, "gpu:0 (timeout)", 0, &c0));
  ok(P().contextCreate(1, "gpu:1 (timeout)", 0, &c1));
  const int two[] = {0, 1};
  mlcuda_nccl* comm = nullptr;
  ok(P().ncclCreate(two, 2, &comm));
  {
    const int64_t m = 4096;
    Dev<float> a(random(static_cast<size_t>(m * m), 950), c1), b(static_cast<size_t>(m * m), c1);
    Dev<float> g0(random(1000, 951), c0), g1(random(1000, 952), c1);
    mlcuda_context* contexts[] = {c0, c1};
    float* buffers[] = {g0.data(), g1.data()};
    // A first all-reduce connects the ranks (host work that could outlast the GEMMs below).
    ok(P().ncclAllReduce(comm, contexts, buffers, 1000));
    ok(P().synchronize(c0));
    ok(P().synchronize(c1));
    for (int i = 0; i < 256; ++i)  // 256 x 0.14 TFLOP on gpu:1's compute stream
      ok(P().denseForward(c1, a.data(), a.data(), nullptr, b.data(), m, m, m, MLCUDA_ACT_LINEAR));
    mlcuda_event* gemms = nullptr;
    ok(P().eventCreate(c1, &gemms));
    ok(P().eventRecord(c1, MLCUDA_STREAM_COMPUTE, gemms));
    ok(P().streamWaitEvent(c1, MLCUDA_STREAM_COMM, gemms));
    setenv("MIRRORLAB_GPU_COLLECTIVE_TIMEOUT", "0.05", 1);
    ok(P().ncclAllReduce(comm, contexts, buffers, 1000));
    const mlcuda_status s = P().synchronize(c0);
    unsetenv("MIRRORLAB_GPU_COLLECTIVE_TIMEOUT");
    EXPECT_EQ(s.code, MLCUDA_ERR_NCCL) << s.message;
    const std::string msg = s.message;
    EXPECT_NE(msg.find("gpu:0,1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("MIRRORLAB_GPU_COLLECTIVE_TIMEOUT"), std::string::npos) << msg;
    EXPECT_NE(msg.find("aborted"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--devices gpu:0x2"), std::string::npos) << msg;
    const mlcuda_status again = P().synchronize(c1);
    EXPECT_EQ(again.code, MLCUDA_ERR_NCCL) << again.message;
    const mlcuda_status more = P().ncclAllReduce(comm, contexts, buffers, 1000);
    EXPECT_EQ(more.code, MLCUDA_ERR_NCCL) << more.message;
    P().eventDestroy(gemms);
  }
  P().ncclDestroy(comm);
  P().contextDestroy(c1);
  P().contextDestroy(c0);
}

// ---- errors, events, edge cases -----------------------------------------------------------------------------

TEST_F(Gpu, OutOfMemoryNamesTheDeviceTheSizeAndTheFix) {
  void* p = nullptr;
  const size_t huge = size_t{1} << 50;  // 1 PiB
  const mlcuda_status s = P().allocate(C(), huge, &p);
  EXPECT_EQ(s.code, MLCUDA_ERR_OUT_OF_MEMORY) << s.message;
  EXPECT_EQ(p, nullptr);
  const std::string m = s.message;
  EXPECT_NE(m.find("gpu:0"), std::string::npos) << m;
  EXPECT_NE(m.find(std::to_string(huge) + " bytes"), std::string::npos) << m;
  EXPECT_NE(m.find("smaller batch"), std::string::npos) << m;
  // The refusal does not stick: the next work runs.
  Dev<float> small(std::vector<float>{1, 2, 3});
  EXPECT_EQ(small.get()[2], 3.0f);
}

TEST_F(Gpu, CudaErrorsNameTheCallTheFileAndTheDevice) {
  mlcuda_event *a = nullptr, *b = nullptr;
  ok(P().eventCreate(C(), &a));
  ok(P().eventCreate(C(), &b));
  float ms = 0;
  const mlcuda_status s = P().eventElapsedMs(a, b, &ms);  // never recorded
  EXPECT_EQ(s.code, MLCUDA_ERR_CUDA) << s.message;
  const std::string m = s.message;
  EXPECT_NE(m.find("cudaEventElapsedTime"), std::string::npos) << m;
  EXPECT_NE(m.find("core/backend/cuda/PluginContext.cpp:"), std::string::npos) << m;
  EXPECT_NE(m.find("gpu:0"), std::string::npos) << m;
  ok(P().synchronize(C()));
  P().eventDestroy(a);
  P().eventDestroy(b);

  mlcuda_context* none = nullptr;
  const mlcuda_status c = P().contextCreate(gpu().deviceCount + 7, nullptr, 0, &none);
  EXPECT_EQ(c.code, MLCUDA_ERR_NO_DEVICE) << c.message;
  EXPECT_EQ(none, nullptr);
}

TEST_F(Gpu, EventsTimeAPhaseOnTheComputeStream) {
  const Shape3 s{1024, 1024, 1024};
  Dev<float> x(random(static_cast<size_t>(s.n * s.in), 1)), w(random(static_cast<size_t>(s.in * s.out), 2)),
      y(static_cast<size_t>(s.n * s.out));
  mlcuda_event *start = nullptr, *end = nullptr;
  ok(P().eventCreate(C(), &start));
  ok(P().eventCreate(C(), &end));
  ok(P().eventRecord(C(), MLCUDA_STREAM_COMPUTE, start));
  ok(P().denseForward(C(), x.data(), w.data(), nullptr, y.data(), s.n, s.in, s.out, MLCUDA_ACT_RELU));
  ok(P().eventRecord(C(), MLCUDA_STREAM_COMPUTE, end));
  float ms = -1;
  ok(P().eventElapsedMs(start, end, &ms));
  EXPECT_GT(ms, 0.0f);
  EXPECT_LT(ms, 10000.0f);
  P().eventDestroy(start);
  P().eventDestroy(end);
}

TEST_F(Gpu, AnEmptyBatchIsANoOp) {
  Dev<float> w(random(15, 3));
  Dev<double> sum(1);
  ok(P().denseForward(C(), nullptr, w.data(), nullptr, nullptr, 0, 5, 3, MLCUDA_ACT_SOFTMAX));
  ok(P().loss(C(), MLCUDA_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, 0, 1, nullptr, nullptr, 0, 3, nullptr, sum.data()));
  EXPECT_EQ(sum.get()[0], 0.0);
}

}  // namespace
}  // namespace ml
