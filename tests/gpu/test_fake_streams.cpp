// The fake plugin's stream model, held to what a GPU does: work on two streams is not ordered unless
// an event orders it, so a read on the comm stream of what the compute stream writes, without a
// wait, must not see the written values (the fake gives NaN, and counts it); with the event and the
// wait, it sees exactly them. The training tests (test_gpu_training) then rely on this: a wait the
// GPU path forgets shows up there as NaN weights. Runs against the fake only (MIRRORLAB_CUDA_PLUGIN).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cuda/CudaPluginApi.h"

namespace {

struct Fake {
  void* lib = nullptr;
  template <typename F>
  F get(const char* name) const {
    return reinterpret_cast<F>(dlsym(lib, name));
  }
};

const Fake& fake() {
  static const Fake f = [] {
    Fake x;
    const char* path = std::getenv("MIRRORLAB_CUDA_PLUGIN");
    if (path) x.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    return x;
  }();
  return f;
}

#define FAKE(name) fake().get<decltype(&name)>(#name)

void ok(const mlcuda_status& s) { ASSERT_EQ(s.code, MLCUDA_OK) << s.message; }

uint64_t unorderedReads() { return fake().get<uint64_t (*)()>("fake_unordered_reads")(); }

class FakeStreams : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fake().lib || !fake().get<void*>("fake_unordered_reads"))
      GTEST_SKIP() << "checks the fake CUDA plugin's stream model; MIRRORLAB_CUDA_PLUGIN does not name the fake";
    ok(FAKE(mlcuda_context_create)(0, "gpu:0", 0, &ctx));
    for (float*& p : bufs) {
      void* q = nullptr;
      ok(FAKE(mlcuda_alloc)(ctx, n * sizeof(float), &q));
      p = static_cast<float*>(q);
    }
    ok(FAKE(mlcuda_event_create)(ctx, &written));
    ok(FAKE(mlcuda_event_create)(ctx, &summed));
  }
  void TearDown() override {
    if (!ctx) return;
    FAKE(mlcuda_event_destroy)(written);
    FAKE(mlcuda_event_destroy)(summed);
    for (float* p : bufs) FAKE(mlcuda_free)(ctx, p);
    FAKE(mlcuda_context_destroy)(ctx);
  }

  // The compute stream writes a = 0..n-1 and b = 1000 (copy on device, fill), the comm stream sums
  // them (the logical-GPU all-reduce), the compute stream waits for that and copies a to the host.
  std::vector<float> sumAfterWrites(bool waitForTheWrites) {
    std::vector<float> host(n), ones(n, 1000.0f);
    for (size_t i = 0; i < n; ++i) host[i] = static_cast<float>(i);
    ok(FAKE(mlcuda_copy_to_device)(ctx, bufs[2], host.data(), n * sizeof(float)));
    ok(FAKE(mlcuda_copy_to_device)(ctx, bufs[3], ones.data(), n * sizeof(float)));
    ok(FAKE(mlcuda_copy_on_device)(ctx, bufs[0], bufs[2], n * sizeof(float)));
    ok(FAKE(mlcuda_copy_on_device)(ctx, bufs[1], bufs[3], n * sizeof(float)));
    ok(FAKE(mlcuda_event_record)(ctx, MLCUDA_STREAM_COMPUTE, written));
    float* pair[2] = {bufs[0], bufs[1]};
    mlcuda_event* ready[1] = {written};
    ok(FAKE(mlcuda_local_allreduce)(ctx, pair, 2, static_cast<int64_t>(n), ready, waitForTheWrites ? 1 : 0, summed));
    ok(FAKE(mlcuda_stream_wait_event)(ctx, MLCUDA_STREAM_COMPUTE, summed));
    std::vector<float> out(n);
    ok(FAKE(mlcuda_copy_to_host)(ctx, out.data(), bufs[0], n * sizeof(float)));
    return out;
  }

  static constexpr size_t n = 1000;
  mlcuda_context* ctx = nullptr;
  float* bufs[4] = {};
  mlcuda_event* written = nullptr;
  mlcuda_event* summed = nullptr;
};

TEST_F(FakeStreams, AReadThatNoEventOrdersAfterTheWriteGetsNaN) {
  const uint64_t before = unorderedReads();
  const auto out = sumAfterWrites(false);
  size_t nan = 0;
  for (float v : out) nan += std::isnan(v) ? 1 : 0;
  EXPECT_EQ(nan, n) << "the all-reduce read a and b without waiting for the copies that write them";
  EXPECT_GE(unorderedReads(), before + 2);  // a and b
}

TEST_F(FakeStreams, TheEventAndTheWaitOrderItAndTheSumIsExact) {
  const uint64_t before = unorderedReads();
  const auto out = sumAfterWrites(true);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], static_cast<float>(i) + 1000.0f) << "element " << i;
  EXPECT_EQ(unorderedReads(), before);
}

// Without the compute stream's wait for `summed`, the copy to the host may run before the sum.
TEST_F(FakeStreams, ACopyToTheHostThatDoesNotWaitForTheCommStreamGetsNaN) {
  std::vector<float> host(n, 2.0f);
  ok(FAKE(mlcuda_copy_to_device)(ctx, bufs[0], host.data(), n * sizeof(float)));
  ok(FAKE(mlcuda_copy_to_device)(ctx, bufs[1], host.data(), n * sizeof(float)));
  float* pair[2] = {bufs[0], bufs[1]};
  ok(FAKE(mlcuda_local_allreduce)(ctx, pair, 2, static_cast<int64_t>(n), nullptr, 0, summed));
  std::vector<float> out(n, 0.0f);
  ok(FAKE(mlcuda_copy_to_host)(ctx, out.data(), bufs[0], n * sizeof(float)));
  EXPECT_TRUE(std::isnan(out[0])) << out[0];
  ok(FAKE(mlcuda_synchronize)(ctx));
}

}  // namespace
