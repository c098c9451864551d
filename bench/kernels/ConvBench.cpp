// Convolution kernels, the choice issue 14 asks to make by measurement: Conv2D's im2col path
// (im2col + OpenBLAS sgemm, its ThreadTeam on 2 threads) against oneDNN's convolution primitives
// (Debian's libdnnl, float32, channels-last activations as Keras keeps them, the weights in the
// layout oneDNN prefers: the reorder from and to Keras' (kh, kw, c, filters) is counted, since the
// weights change every step), on fashion-cnn's two convolutions at a replica's batch of 64.
//
// Arguments: {layer (0: 3x3x1 -> 32 on 28x28, 1: 3x3x32 -> 64 on 13x13), threads, pass (0: forward
// with ReLU, 1: backward: ReLU's gradient, kernel and bias gradients, and the input gradient for
// the second layer, whose input needs one)}. Counter GFLOP/s: 2 FLOPs per multiply-add of each
// product the pass computes. The label names oneDNN's implementation. ONEDNN_MAX_CPU_ISA=AVX2 shows
// what an AVX2-only CPU would get. BM_Conv2DMixedBf16: the mixed_bfloat16 policy's two kernels.
#include <benchmark/benchmark.h>
#include <dlfcn.h>

#include <cstdlib>
#include <memory>
#include <numeric>
#include <oneapi/dnnl/dnnl.hpp>

#include "distribute/MirroredStrategy.h"
#include "nn/Bf16Gemm.h"
#include "nn/Conv2D.h"
#include "nn/OneDnnConv.h"
#include "nn/ThreadTeam.h"
#include "random/Rng.h"

extern "C" void openblas_set_num_threads(int);

namespace {

constexpr int64_t kBatch = 64;

struct Shape {
  int64_t h, w, c, f, k;
};
const Shape kShapes[] = {{28, 28, 1, 32, 3}, {13, 13, 32, 64, 3}};

void fill(std::vector<float>& v, uint64_t seed) {
  ml::Rng r(seed);
  for (auto& x : v) x = static_cast<float>(r.uniform(-1, 1));
}

double flops(const Shape& s, bool backward) {
  const double oh = static_cast<double>(s.h - s.k + 1), ow = static_cast<double>(s.w - s.k + 1);
  const double macs = kBatch * oh * ow * static_cast<double>(s.k * s.k * s.c * s.f);
  if (!backward) return 2 * macs;
  return 2 * macs * (s.c > 1 ? 2 : 1);  // the kernel gradient, and the input gradient after the first layer
}

void BM_Conv2DIm2col(benchmark::State& st) {
  const Shape s = kShapes[st.range(0)];
  const int threads = static_cast<int>(st.range(1));
  const bool backward = st.range(2) == 1;
  openblas_set_num_threads(1);
  ml::dnnconv::forceOff(true);  // the layer's im2col path, whatever this CPU offers
  std::unique_ptr<ml::ThreadTeam> team = threads > 1 ? std::make_unique<ml::ThreadTeam>(threads) : nullptr;
  ml::ThreadTeam::Scope scope(team.get());
  ml::Conv2D conv(s.f, ml::Window{s.k, s.k, 1, 1, false}, ml::Act::Relu, true, "glorot_uniform", "zeros");
  conv.name = "conv";
  conv.build({s.h, s.w, s.c});
  std::vector<float> p(static_cast<size_t>(conv.paramCount())), g(p.size());
  conv.bind(p.data(), g.data());
  conv.initialize(1);
  std::vector<float> x(static_cast<size_t>(kBatch * s.h * s.w * s.c)), y(static_cast<size_t>(kBatch * conv.outFeatures())),
      dy(y.size()), dx(x.size());
  fill(x, 2);
  const ml::StepContext ctx;
  conv.forward(x.data(), y.data(), kBatch, ctx);
  for (auto _ : st) {
    if (!backward) {
      conv.forward(x.data(), y.data(), kBatch, ctx);
    } else {
      st.PauseTiming();
      fill(dy, 3);  // backward works in place on dy
      st.ResumeTiming();
      conv.backward(x.data(), y.data(), dy.data(), s.c > 1 ? dx.data() : nullptr, kBatch, ctx);
    }
    benchmark::ClobberMemory();
  }
  st.counters["GFLOP/s"] = benchmark::Counter(flops(s, backward), benchmark::Counter::kIsIterationInvariantRate);
  st.SetLabel("im2col + OpenBLAS sgemm" + std::string(threads > 1 ? ", ThreadTeam" : ""));
  ml::dnnconv::forceOff(false);
}

// The layer's mixed_bfloat16 passes on one thread: im2col + Bf16Gemm (forced) against oneDNN's
// bfloat16 convolutions (where this CPU has them: AVX512-BF16, AMX). Arguments {layer, pass,
// kernel (0: im2col, 1: oneDNN)}; the packing to bfloat16 and the rounding are counted.
void BM_Conv2DMixedBf16(benchmark::State& st) {
  const Shape s = kShapes[st.range(0)];
  const bool backward = st.range(1) == 1, oneDnn = st.range(2) == 1;
  openblas_set_num_threads(1);
  ml::dnnconv::forceOff(!oneDnn);
  ml::Conv2D conv(s.f, ml::Window{s.k, s.k, 1, 1, false}, ml::Act::Relu, true, "glorot_uniform", "zeros");
  conv.name = "conv";
  conv.build({s.h, s.w, s.c});
  conv.setPrecision(ml::Precision::MixedBfloat16);
  if (oneDnn && !ml::dnnconv::availableBf16(conv.geometry(), conv.window(), s.f)) {
    st.SkipWithError(("no oneDNN bfloat16 convolution here: " + ml::dnnconv::descriptionBf16()).c_str());
    ml::dnnconv::forceOff(false);
    return;
  }
  std::vector<float> p(static_cast<size_t>(conv.paramCount())), g(p.size());
  conv.bind(p.data(), g.data());
  conv.initialize(1);
  std::vector<float> x(static_cast<size_t>(kBatch * s.h * s.w * s.c)), y(static_cast<size_t>(kBatch * conv.outFeatures())),
      dy(y.size()), dx(x.size());
  fill(x, 2);
  const ml::StepContext ctx;
  conv.forward(x.data(), y.data(), kBatch, ctx);
  for (auto _ : st) {
    if (!backward) {
      conv.forward(x.data(), y.data(), kBatch, ctx);
    } else {
      st.PauseTiming();
      fill(dy, 3);
      st.ResumeTiming();
      conv.backward(x.data(), y.data(), dy.data(), s.c > 1 ? dx.data() : nullptr, kBatch, ctx);
    }
    benchmark::ClobberMemory();
  }
  st.counters["GFLOP/s"] = benchmark::Counter(flops(s, backward), benchmark::Counter::kIsIterationInvariantRate);
  st.SetLabel(oneDnn ? ml::dnnconv::descriptionBf16() : "im2col + " + ml::bf16::kernelDescription());
  ml::dnnconv::forceOff(false);
}

// oneDNN runs on OpenMP in Debian's build: the calling thread's team gets `threads` threads.
void ompThreads(int n) {
  using SetThreads = void (*)(int);
  static const auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  if (set) set(n);
}

void BM_Conv2DOneDnn(benchmark::State& st) {
  using namespace dnnl;
  using tag = memory::format_tag;
  using dt = memory::data_type;
  const Shape s = kShapes[st.range(0)];
  const int threads = static_cast<int>(st.range(1));
  const bool backward = st.range(2) == 1;
  ompThreads(threads);
  engine eng(engine::kind::cpu, 0);
  stream strm(eng);
  const int64_t oh = s.h - s.k + 1, ow = s.w - s.k + 1;
  const memory::dims src{kBatch, s.c, s.h, s.w}, wts{s.f, s.c, s.k, s.k}, bia{s.f}, dst{kBatch, s.f, oh, ow}, strides{1, 1},
      pad{0, 0};
  const memory::desc srcMd(src, dt::f32, tag::nhwc), dstMd(dst, dt::f32, tag::nhwc), biasMd(bia, dt::f32, tag::x);
  const memory::desc kerasWts(wts, dt::f32, tag::hwio), anyWts(wts, dt::f32, std::getenv("CONV_HWIO") ? tag::hwio : tag::any);
  post_ops relu;
  relu.append_eltwise(1.0f, algorithm::eltwise_relu, 0.0f, 0.0f);
  primitive_attr attr;
  attr.set_post_ops(relu);
  const convolution_forward::primitive_desc fwd(
      convolution_forward::desc(prop_kind::forward_training, algorithm::convolution_direct, srcMd, anyWts, biasMd, dstMd, strides,
                                pad, pad),
      attr, eng);
  std::vector<float> x(static_cast<size_t>(kBatch * s.h * s.w * s.c)), w(static_cast<size_t>(s.k * s.k * s.c * s.f)),
      b(static_cast<size_t>(s.f)), y(static_cast<size_t>(kBatch * oh * ow * s.f)), dy(y.size()), dx(x.size()), dw(w.size()),
      db(b.size());
  fill(x, 2);
  fill(w, 4);
  memory xm(srcMd, eng, x.data()), wk(kerasWts, eng, w.data()), bm(biasMd, eng, b.data()), ym(dstMd, eng, y.data()),
      dym(dstMd, eng, dy.data()), dxm(srcMd, eng, dx.data()), dwk(kerasWts, eng, dw.data()), dbm(biasMd, eng, db.data());
  memory wBlocked(fwd.weights_desc(), eng);
  std::string impl = fwd.impl_info_str();
  if (!backward) {
    for (auto _ : st) {
      reorder(wk, wBlocked).execute(strm, wk, wBlocked);
      convolution_forward(fwd).execute(
          strm, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, wBlocked}, {DNNL_ARG_BIAS, bm}, {DNNL_ARG_DST, ym}});
      strm.wait();
    }
  } else {
    const eltwise_backward::primitive_desc reluBwd(
        eltwise_backward::desc(algorithm::eltwise_relu_use_dst_for_bwd, dstMd, dstMd, 0.0f, 0.0f), eng,
        eltwise_forward::primitive_desc(
            eltwise_forward::desc(prop_kind::forward_training, algorithm::eltwise_relu_use_dst_for_bwd, dstMd, 0.0f, 0.0f), eng));
    const convolution_backward_weights::primitive_desc bwdW(
        convolution_backward_weights::desc(algorithm::convolution_direct, srcMd, anyWts, biasMd, dstMd, strides, pad, pad), eng,
        fwd);
    memory dwBlocked(bwdW.diff_weights_desc(), eng);
    impl += std::string(" / ") + bwdW.impl_info_str();
    std::unique_ptr<convolution_backward_data::primitive_desc> bwdD;
    if (s.c > 1) {
      bwdD = std::make_unique<convolution_backward_data::primitive_desc>(
          convolution_backward_data::desc(algorithm::convolution_direct, srcMd, anyWts, dstMd, strides, pad, pad), eng, fwd);
      impl += std::string(" / ") + bwdD->impl_info_str();
    }
    memory wData(bwdD ? bwdD->weights_desc() : fwd.weights_desc(), eng);
    convolution_forward(fwd).execute(strm,
                                     {{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, wBlocked}, {DNNL_ARG_BIAS, bm}, {DNNL_ARG_DST, ym}});
    for (auto _ : st) {
      st.PauseTiming();
      fill(dy, 3);
      st.ResumeTiming();
      eltwise_backward(reluBwd).execute(strm, {{DNNL_ARG_DST, ym}, {DNNL_ARG_DIFF_DST, dym}, {DNNL_ARG_DIFF_SRC, dym}});
      convolution_backward_weights(bwdW).execute(
          strm, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_DIFF_DST, dym}, {DNNL_ARG_DIFF_WEIGHTS, dwBlocked}, {DNNL_ARG_DIFF_BIAS, dbm}});
      reorder(dwBlocked, dwk).execute(strm, dwBlocked, dwk);
      if (bwdD) {
        reorder(wk, wData).execute(strm, wk, wData);
        convolution_backward_data(*bwdD).execute(strm,
                                                 {{DNNL_ARG_DIFF_DST, dym}, {DNNL_ARG_WEIGHTS, wData}, {DNNL_ARG_DIFF_SRC, dxm}});
      }
      strm.wait();
    }
  }
  st.counters["GFLOP/s"] = benchmark::Counter(flops(s, backward), benchmark::Counter::kIsIterationInvariantRate);
  st.SetLabel("oneDNN " + impl);
  ompThreads(1);
}

// One whole mirrored step of projects/fashion-cnn.json (Conv2D 32 -> MaxPool -> Conv2D 64 -> MaxPool
// -> Dense 128 -> Dense 10, Adam) on random 28x28x1 images at the global batch of 64, as the CLI
// trains it: args devices, threads per device, precision (0 float32, 1 mixed_bfloat16). GFLOP/s
// counts forward and both gradients (the first convolution's input gradient left out), as
// bench/e2e/compare.sh does; with --benchmark_counters_tabular the step's phases show beside it.
void BM_CnnStep(benchmark::State& st) {
  static const ml::Dataset data = [] {
    ml::Dataset d;
    d.sampleShape = {28, 28, 1};
    d.size = 2048;
    d.numClasses = 10;
    d.x.resize(static_cast<size_t>(d.size * 784));
    ml::Rng r(1);
    for (auto& v : d.x) v = static_cast<float>(r.uniform());
    for (int64_t i = 0; i < d.size; ++i) d.y.push_back(static_cast<float>(i % 10));
    return d;
  }();
  ml::ModelSpec m;
  m.inputShape = {28, 28, 1};
  m.layers = {{"", ml::Conv2DSpec{.filters = 32, .kernelSize = {3, 3}, .activation = ml::Act::Relu}},
              {"", ml::MaxPooling2DSpec{}},
              {"", ml::Conv2DSpec{.filters = 64, .kernelSize = {3, 3}, .activation = ml::Act::Relu}},
              {"", ml::MaxPooling2DSpec{}},
              {"", ml::FlattenSpec{}},
              {"", ml::DenseSpec{.units = 128, .activation = ml::Act::Relu}},
              {"", ml::DenseSpec{.units = 10, .activation = ml::Act::Softmax}}};
  ml::StrategyOptions so;
  so.devices = ml::parseDevices("cpu:" + std::to_string(st.range(0)));
  so.threadsPerDevice = static_cast<int>(st.range(1));
  so.precision = st.range(2) ? ml::Precision::MixedBfloat16 : ml::Precision::Float32;
  ml::MirroredStrategy strat(m, ml::Loss::make(ml::LossKind::SparseCategoricalCrossentropy, false), ml::MetricKind::Accuracy,
                             ml::OptimizerSpec{}, so);
  strat.initialize(1);
  constexpr int64_t B = 64;
  std::vector<int64_t> idx(static_cast<size_t>(B));
  int64_t off = 0;
  uint64_t step = 0;
  ml::PhaseTimes sum;
  for (auto _ : st) {
    std::iota(idx.begin(), idx.end(), off);
    off = (off + B) % (data.size - B);
    const auto r = strat.trainStep(data, idx, 1, 0.001f, ++step);
    const auto& p = r.replicas.front().phases;
    sum.input += p.input;
    sum.forward += p.forward;
    sum.backward += p.backward;
    sum.allreduce += p.allreduce + p.wait;
    sum.optimizer += p.optimizer;
  }
  const double macs = 26 * 26 * 9 * 32 + 11 * 11 * 9 * 32 * 64 + 1600 * 128 + 128 * 10;
  st.counters["GFLOP/s"] =
      benchmark::Counter((6 * macs - 2 * 26 * 26 * 9 * 32) * B, benchmark::Counter::kIsIterationInvariantRate);
  const double k = st.iterations() > 0 ? 1e3 / static_cast<double>(st.iterations()) : 0;
  st.counters["in_ms"] = sum.input * k;
  st.counters["fwd_ms"] = sum.forward * k;
  st.counters["bwd_ms"] = sum.backward * k;
  st.counters["sync_ms"] = sum.allreduce * k;
  st.counters["opt_ms"] = sum.optimizer * k;
}

void args(benchmark::internal::Benchmark* b) {
  for (int layer : {0, 1})
    for (int threads : {1, 2})
      for (int pass : {0, 1}) b->Args({layer, threads, pass});
}

}  // namespace

BENCHMARK(BM_Conv2DIm2col)->Apply(args)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Conv2DOneDnn)->Apply(args)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Conv2DMixedBf16)->ArgsProduct({{0, 1}, {0, 1}, {0, 1}})->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_CnnStep)
    ->ArgNames({"devices", "threads", "bf16"})
    ->ArgsProduct({{1}, {1, 2}, {0, 1}})
    ->ArgsProduct({{2}, {1}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(1.0);
BENCHMARK_MAIN();
