// The kernel tests' fixture and helpers (test_gpu_kernels*.cpp): the plugin loaded as the program
// loads it, one context on gpu:0, device arrays, random inputs and the comparisons with the CPU.
#pragma once
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

// ---- the plugin, one context on gpu:0, and device buffers ---------------------------------------

struct GpuEnv {
  const CudaPlugin* plugin = nullptr;
  mlcuda_context* ctx = nullptr;
  int deviceCount = 0;
  std::string reason;  // why there is no ctx
};

inline GpuEnv& gpu() {
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

inline const CudaPlugin& P() { return *gpu().plugin; }
inline mlcuda_context* C() { return gpu().ctx; }
inline void ok(const mlcuda_status& s) { throwIfFailed(s); }

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

inline std::vector<float> random(size_t n, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.uniform(lo, hi));
  return v;
}

// max |got - want| / max(|want|): the error relative to the tensor's scale (floor 1e-3, so that
// an all-but-zero tensor is compared absolutely).
inline ::testing::AssertionResult close(const std::vector<float>& got, const std::vector<float>& want, double tol,
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

inline ::testing::AssertionResult closeScalar(double got, double want, double tol, const std::string& what) {
  const double err = std::fabs(got - want) / std::max(std::fabs(want), 1.0);
  if (err <= tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": gpu " << got << ", cpu " << want << ", normalised error " << err;
}

inline ::testing::AssertionResult sameBits(const std::vector<float>& got, const std::vector<float>& want,
                                           const std::string& what) {
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

inline std::string describe(Act act, const Shape3& s, bool bias) {
  std::ostringstream o;
  o << toString(act) << " n=" << s.n << " in=" << s.in << " out=" << s.out << (bias ? " bias" : " no-bias");
  return o.str();
}

}  // namespace ml
