// The CUDA plugin's optimizers, all-reduces, input pipeline (pinned memory, asynchronous copies,
// the device-side gather) and plumbing (errors, events, memory) against the CPU; see
// test_gpu_kernels.cpp for the layers. Skips the same way where there is no usable GPU.
#include "GpuKernelTest.h"

namespace ml {
namespace {

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
    spec.kind = *optimizerKindNamed(c.name);
    spec.learningRate = lr;
    spec.momentum = c.momentum;
    spec.nesterov = c.nesterov;
    // RMSprop with a large epsilon: Keras' sqrt(v + eps) and sqrt(v) + eps then differ well above the tolerance.
    if (spec.kind == OptimizerKind::RmsProp) spec.epsilon = 1e-2;
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
        ok(P().rmspropStep(C(), gp.data(), gg.data(), s1.data(), s2.data(), count, scale, lr, spec.rho,
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

// The input pipeline: indices written to pinned memory, copied asynchronously, then the batch's
// rows gathered on the device from a resident data set: exactly the rows (a copy, bit for bit),
// in the order of the indices, repeats and the last row included. The pinned buffer is reused
// only after the event behind its copy has passed, as CudaBackend::stage does.
TEST_F(Gpu, PinnedIndicesAndTheDeviceGatherGiveTheBatchsRows) {
  const int64_t rows = 1000, width = 784, n = 257;
  const auto data = random(static_cast<size_t>(rows * width), 91);
  Dev<float> resident(data);
  Dev<int64_t> ids(static_cast<size_t>(n));
  Dev<float> batch(static_cast<size_t>(n * width));
  void* pinned = nullptr;
  ok(P().hostAlloc(C(), static_cast<size_t>(n) * sizeof(int64_t), &pinned));
  mlcuda_event* copied = nullptr;
  ok(P().eventCreate(C(), &copied));
  for (int round = 0; round < 2; ++round) {
    auto* idx = static_cast<int64_t*>(pinned);
    for (int64_t i = 0; i < n; ++i) idx[i] = (i * 389 + 17 * round) % rows;
    idx[n - 1] = rows - 1;
    idx[n - 2] = idx[0];  // a repeat
    std::vector<int64_t> want(idx, idx + n);
    ok(P().copyToDeviceAsync(C(), ids.data(), pinned, static_cast<size_t>(n) * sizeof(int64_t)));
    ok(P().gatherRows(C(), resident.data(), ids.data(), n, width, batch.data()));
    ok(P().eventRecord(C(), MLCUDA_STREAM_COMPUTE, copied));
    ok(P().eventSynchronize(copied));  // the pinned indices may now be written again
    const auto got = batch.get();
    std::vector<float> expect(static_cast<size_t>(n * width));
    for (int64_t i = 0; i < n; ++i)
      std::copy_n(data.begin() + want[static_cast<size_t>(i)] * width, width, expect.begin() + i * width);
    EXPECT_TRUE(sameBits(got, expect, "gathered rows, round " + std::to_string(round)));
    EXPECT_EQ(ids.get(), want);
  }
  P().eventDestroy(copied);
  ok(P().hostFree(C(), pinned));
  ok(P().gatherRows(C(), resident.data(), ids.data(), 0, width, batch.data()));  // no rows: nothing to do
}

}  // namespace
}  // namespace ml
