// Every kernel of the CUDA plugin against the CPU code it stands in for (core/nn on the same random
// inputs): a normalised error with a tolerance per operation, dropout masks bit for bit. The plugin
// is loaded exactly as the program loads it. Skips with the probe's reason where there is no usable
// GPU; MIRRORLAB_REQUIRE_GPU=1 turns that skip into a failure (tests/gpu/run.sh sets it).
// Layers, losses and dropout here; optimizers, all-reduces, the input pipeline and the plumbing
// (errors, events, memory) in test_gpu_kernels_update.cpp.
#include "GpuKernelTest.h"

namespace ml {
namespace {
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
      // Fused: the loss gave d/d(the output activation's input), softmax's or (binary
      // cross-entropy) the sigmoid's, and the backward takes it as dz.
      if (fused && act != Act::Softmax && act != Act::Sigmoid) continue;
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
    // TF32 keeps 10 mantissa bits of each product's inputs: ~1e-3 relative. And it is used: a
    // 512^3 product is one cuBLAS runs on TF32 tensor cores when allowed, so the result must move
    // from float32's by more than float32's own rounding (~1e-6; 1e-5 is the floor).
    Dev<float> tx(x, tf32), tp(params, tf32), ty(y.size(), tf32);
    ok(P().denseForward(tf32, tx.data(), tp.data(), tp.data() + s.in * s.out, ty.data(), s.n, s.in, s.out, 0));
    const std::vector<float> rounded = ty.get(), exact = gy.get();
    EXPECT_TRUE(close(rounded, y, 1e-2, "TF32"));
    double moved = 0, scale = 0;
    for (size_t i = 0; i < exact.size(); ++i) {
      moved = std::max(moved, std::fabs(static_cast<double>(rounded[i]) - exact[i]));
      scale = std::max(scale, std::fabs(static_cast<double>(exact[i])));
    }
    EXPECT_GT(moved / scale, 1e-5) << "TF32 gave float32's products: the setting did not reach cuBLAS";
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
      Loss l = Loss::make(parseLossKind(c.name).value(), c.fromLogits);
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

}  // namespace
}  // namespace ml
