// One whole mirrored optimizer step (gather, forward, loss, backward, all-reduce, Adam) for
// 1 and 2 simulated devices, and for a single device with all cores: the numbers behind the
// "2 devices reach 1.8x one device" goal, without data loading or telemetry; with the sharded
// optimizer update (ZeRO stage 1) and the 2048^3 sgemm on 1 and 2 threads in the same binary, so
// that --benchmark_enable_random_interleaving=true --benchmark_repetitions=N gives the steps and
// the machine's own 2/1 ratio from interleaved rounds (medians and spread).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <numeric>
#include <vector>

#include "BenchData.h"
#include "backend/SpinBarrier.h"
#include "distribute/MirroredStrategy.h"
#include "nn/Optimizer.h"
#include "nn/Sgemm.h"
#include "nn/TeamSize.h"
#include "nn/ThreadTeam.h"
#include "random/Rng.h"

namespace {

using mlbench::mlp;
using mlbench::randomImages;

// args: devices, threads per device (single device only), global batch, wide (0/1), bucket KiB (0: default),
// bucket reduction (0 auto, 1 communication threads, 2 inline between layers), shard (1: ZeRO stage 1,
// fused with its exchange where it can be; 2: the reduce-scatter, the update and the all-gather one after the other)
void BM_MirroredStep(benchmark::State& s) {
  static const ml::Dataset data = randomImages(4096);
  ml::StrategyOptions so;
  so.devices = ml::parseDevices("cpu:" + std::to_string(s.range(0)));
  so.threadsPerDevice = static_cast<int>(s.range(1));
  if (s.range(4) > 0) so.bucketBytes = s.range(4) << 10;  // KiB; 0 keeps the default
  so.bucketComm = static_cast<ml::BucketComm>(s.range(5));
  so.shardOptimizer = s.range(6) != 0;
  so.fuseShardedExchange = s.range(6) != 2;
  ml::OptimizerSpec o;
  ml::MirroredStrategy strat(s.range(3) ? mlp({512, 512}) : mlp({128}),
                             ml::Loss::make(ml::LossKind::SparseCategoricalCrossentropy, false), ml::MetricKind::Accuracy, o, so);
  strat.initialize(1);
  const int64_t B = s.range(2);
  std::vector<int64_t> idx(static_cast<size_t>(B));
  int64_t off = 0;
  uint64_t step = 0;
  double sync = 0, all = 0;
  ml::PhaseTimes sum;  // replica 0's phases
  int64_t n = 0;
  double skew = 0;  // how much later the last replica started than replica 0
  for (auto _ : s) {
    std::iota(idx.begin(), idx.end(), off);
    off = (off + B) % (4096 - B);
    auto r = strat.trainStep(data, idx, 1, 0.001f, ++step);
    for (const auto& rs : r.replicas) {
      sync += rs.phases.allreduce + rs.phases.wait;
      all += rs.phases.total();
    }
    if (r.replicas.size() > 1) skew += r.replicas.back().start - r.replicas.front().start;
    const auto& p0 = r.replicas.front().phases;
    sum.forward += p0.forward;
    sum.backward += p0.backward;
    sum.allreduce += p0.allreduce;
    sum.wait += p0.wait;
    sum.optimizer += p0.optimizer;
    sum.allgather += p0.allgather;
    ++n;
  }
  s.SetItemsProcessed(s.iterations() * B);
  s.counters["sync_share"] = all > 0 ? sync / all : 0;
  const double k = n > 0 ? 1e3 / static_cast<double>(n) : 0;  // ms per step, replica 0
  s.counters["fwd_ms"] = sum.forward * k;
  s.counters["bwd_ms"] = sum.backward * k;
  s.counters["ar_ms"] = sum.allreduce * k;
  s.counters["wait_ms"] = sum.wait * k;
  s.counters["opt_ms"] = sum.optimizer * k;
  s.counters["gather_ms"] = sum.allgather * k;
  s.counters["start_skew_ms"] = skew * k;
}

// The crossover of one replica's thread team (nn/TeamSize.h): one device, 1 or 2 threads, an MLP
// features -> hidden (relu) -> classes (softmax) at a global batch, from a step of a few thousand
// multiply-adds (a wine-like CSV: 13 -> 32 -> 3 at batch 32) to the wide Fashion MLP's. The counter
// macs_per_step is the work the team decides by (nn::forwardMacsPerSample x rows, forward only).
// args: features, hidden, classes, batch, threads.
void BM_TeamCrossover(benchmark::State& s) {
  const int64_t features = s.range(0), hidden = s.range(1), classes = s.range(2), B = s.range(3);
  ml::Dataset data;
  data.sampleShape = {features};
  data.size = 2048;
  data.numClasses = static_cast<int>(classes);
  ml::Rng rng(3);
  data.x.resize(static_cast<size_t>(data.size * features));
  for (auto& v : data.x) v = static_cast<float>(rng.uniform());
  for (int64_t i = 0; i < data.size; ++i) data.y.push_back(static_cast<float>(i % classes));
  ml::ModelSpec m;
  m.inputShape = {features};
  m.layers.push_back({"", ml::DenseSpec{.units = hidden, .activation = ml::Act::Relu}});
  m.layers.push_back({"", ml::DenseSpec{.units = classes, .activation = ml::Act::Softmax}});
  ml::StrategyOptions so;
  so.devices = ml::parseDevices("cpu:1");
  so.threadsPerDevice = static_cast<int>(s.range(4));
  ml::MirroredStrategy strat(m, ml::Loss::make(ml::LossKind::SparseCategoricalCrossentropy, false), ml::MetricKind::Accuracy,
                             ml::OptimizerSpec{}, so);
  strat.initialize(1);
  std::vector<int64_t> idx(static_cast<size_t>(B));
  int64_t off = 0;
  uint64_t step = 0;
  for (auto _ : s) {
    std::iota(idx.begin(), idx.end(), off);
    off = (off + B) % (data.size - B);
    benchmark::DoNotOptimize(strat.trainStep(data, idx, 1, 0.001f, ++step));
  }
  s.SetItemsProcessed(s.iterations() * B);
  s.counters["macs_per_step"] = ml::forwardMacsPerSample(ml::Sequential(m)) * static_cast<double>(B);
}

// The lessons' small models as a run starts them: one step of spirals (2 -> 64 -> 64 -> 3, batch
// 64), a wine-sized MLP (13 -> 32 -> 3, batch 32) and a breast-cancer-sized one (30 -> 32 -> 2,
// batch 32) on one replica with 1 thread, with 2, with the default (threads_per_device 0: the
// team chosen by the step's work, nn/TeamSize.h, exactly as Trainer chooses it), and on cpu:2.
// bench/kernels/small_models.sh runs them interleaved and checks the default against 1 thread.
// args: model (0 spirals, 1 wine, 2 breast cancer), variant (1: 1 thread, 2: 2 threads, 0: default, 3: cpu:2).
void BM_SmallModels(benchmark::State& s) {
  struct Shape {
    int64_t features;
    std::vector<int64_t> hidden;
    int64_t classes, batch;
  };
  static const Shape shapes[] = {{2, {64, 64}, 3, 64}, {13, {32}, 3, 32}, {30, {32}, 2, 32}};
  const Shape& sh = shapes[s.range(0)];
  ml::Dataset data;
  data.sampleShape = {sh.features};
  data.size = 1024;
  data.numClasses = static_cast<int>(sh.classes);
  ml::Rng rng(5);
  data.x.resize(static_cast<size_t>(data.size * sh.features));
  for (auto& v : data.x) v = static_cast<float>(rng.uniform());
  for (int64_t i = 0; i < data.size; ++i) data.y.push_back(static_cast<float>(i % sh.classes));
  ml::ModelSpec m;
  m.inputShape = {sh.features};
  for (auto h : sh.hidden) m.layers.push_back({"", ml::DenseSpec{.units = h, .activation = ml::Act::Relu}});
  m.layers.push_back({"", ml::DenseSpec{.units = sh.classes, .activation = ml::Act::Softmax}});
  const int64_t variant = s.range(1);
  ml::StrategyOptions so;
  so.devices = ml::parseDevices(variant == 3 ? "cpu:2" : "cpu:1");
  so.threadsPerDevice = variant == 0 ? ml::chooseTeam(m, sh.batch).threads : variant == 3 ? 1 : static_cast<int>(variant);
  ml::MirroredStrategy strat(m, ml::Loss::make(ml::LossKind::SparseCategoricalCrossentropy, false), ml::MetricKind::Accuracy,
                             ml::OptimizerSpec{}, so);
  strat.initialize(1);
  std::vector<int64_t> idx(static_cast<size_t>(sh.batch));
  int64_t off = 0;
  uint64_t step = 0;
  for (auto _ : s) {
    std::iota(idx.begin(), idx.end(), off);
    off = (off + sh.batch) % (data.size - sh.batch);
    benchmark::DoNotOptimize(strat.trainStep(data, idx, 1, 0.001f, ++step));
  }
  s.SetItemsProcessed(s.iterations() * sh.batch);
  s.counters["team_threads"] = so.threadsPerDevice;  // 0: every core
}

extern "C" void openblas_set_num_threads(int);

// The machine's bound, in the same run: a 2048^3 sgemm on 1 and 2 threads (wall time).
void BM_Sgemm(benchmark::State& s) {
  openblas_set_num_threads(static_cast<int>(s.range(0)));
  const int n = 2048;
  std::vector<float> a(static_cast<size_t>(n) * n, 0.5f), b(a.size(), 0.25f), c(a.size());
  for (auto _ : s) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a.data(), n, b.data(), n, 0, c.data(), n);
  s.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * static_cast<double>(n) * static_cast<double>(s.iterations()),
                                             benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

// The bound of "cpu:2 against cpu:1 on one core" that the products alone set: the eight products of
// one step of the wide MLP (784-512-512-10: forward, and backward's weight and input gradients, less
// the first layer's input gradient) for a global batch split over R replicas, each on its own core
// at the same time with its own single-threaded products and buffers, as the replicas of cpu:R run
// them. R = 1 at batch 256 against R = 2 at 128 each is the speed-up a data-parallel step could
// reach if everything but its products cost nothing (no optimizer, all-reduce, activations or
// batch copy), with this machine's product kernel at these shapes; set beside the 2048^3 sgemm 2/1
// ratio, it says how much of that ratio the smaller products of a replica leave. With adam = 1 each
// replica also applies Adam to its 1/R of the 669,706 parameters (the sharded update, ZeRO stage 1;
// R = 1: all of them): products and the optimizer's pass over its state are the least work a
// mirrored step with Adam does, so its GFLOP/s against the 2-thread sgemm peak bounds the step's.
// With adam = 2 (R = 2) the bytes that have to cross between the replicas' cores cross too, each
// once: after both backwards each replica reads the other's gradient over the half it owns, adds
// it to its own tile by tile, applies Adam to the tile and writes the new parameters into the
// other's weights, which the other's next forward reads (the fused exchange of the sharded update,
// without anything else of a step: no activations, loss, bias, batch copy or checks).
// args: replicas, global batch, adam (0/1/2).
void BM_ReplicaProducts(benchmark::State& s) {
  openblas_set_num_threads(1);
  const int R = static_cast<int>(s.range(0));
  const int64_t n = s.range(1) / R;
  const int64_t L[] = {784, 512, 512, 10};
  const int64_t params = L[0] * L[1] + L[1] + L[1] * L[2] + L[2] + L[2] * L[3] + L[3];  // 669,706
  struct Bufs {
    std::vector<float> x, wFlat, dwFlat, y[3], dz[3], dx[3];
    float *w[3], *dw[3];  // each layer's kernel in the flat buffers (its bias after it, unused here)
  };
  std::vector<Bufs> bufs(static_cast<size_t>(R));
  const int adam = static_cast<int>(s.range(2));
  std::vector<std::unique_ptr<ml::Optimizer>> opt(static_cast<size_t>(R));
  ml::ThreadTeam team(R);
  ml::SpinBarrier both(R);
  auto shard = [&](int r) { return std::pair<int64_t, int64_t>{params * r / R, params * (r + 1) / R}; };
  // Each replica allocates and touches its own buffers on its own thread.
  team.run(R, [&](int r) {
    Bufs& b = bufs[static_cast<size_t>(r)];
    b.x.assign(static_cast<size_t>(n * L[0]), 0.5f);
    b.wFlat.assign(static_cast<size_t>(params), 0.01f);
    b.dwFlat.assign(static_cast<size_t>(params), 0.0f);
    int64_t at = 0;
    for (int l = 0; l < 3; ++l) {
      b.w[l] = b.wFlat.data() + at;
      b.dw[l] = b.dwFlat.data() + at;
      at += L[l] * L[l + 1] + L[l + 1];
      b.y[l].assign(static_cast<size_t>(n * L[l + 1]), 0.0f);
      b.dz[l].assign(b.y[l].size(), 0.001f);
      b.dx[l].assign(static_cast<size_t>(n * L[l]), 0.0f);
    }
    if (adam) {
      ml::OptimizerSpec spec;
      spec.kind = ml::OptimizerKind::Adam;
      const auto [lo, hi] = shard(r);
      opt[static_cast<size_t>(r)] = ml::Optimizer::make(spec, hi - lo);
    }
  });
  auto step = [&](int r) {
    Bufs& b = bufs[static_cast<size_t>(r)];
    const float* in = b.x.data();
    for (int l = 0; l < 3; ++l) {  // y = x W
      ml::sgemm::gemm(false, false, n, L[l + 1], L[l], in, L[l], b.w[l], L[l + 1], b.y[l].data(), L[l + 1]);
      in = b.y[l].data();
    }
    for (int l = 2; l >= 0; --l) {  // dW = x^T dz, dx = dz W^T
      const float* xl = l == 0 ? b.x.data() : b.y[l - 1].data();
      ml::sgemm::gemm(true, false, L[l], L[l + 1], n, xl, L[l], b.dz[l].data(), L[l + 1], b.dw[l], L[l + 1]);
      if (l > 0)
        ml::sgemm::gemm(false, true, n, L[l], L[l + 1], b.dz[l].data(), L[l + 1], b.w[l], L[l + 1], b.dx[l].data(), L[l]);
    }
    if (!adam) return;
    ml::Optimizer& o = *opt[static_cast<size_t>(r)];
    o.beginStep(0.001f);
    const auto [lo, hi] = shard(r);
    if (adam == 1 || R == 1) {
      o.update(0, std::span<float>(b.wFlat.data() + lo, static_cast<size_t>(hi - lo)),
               std::span<const float>(b.dwFlat.data() + lo, static_cast<size_t>(hi - lo)), 1.0f / 256);
      return;
    }
    both.arriveAndWait();  // every backward done: the gradients can be read
    const Bufs& peer = bufs[static_cast<size_t>((r + 1) % R)];
    constexpr int64_t kTile = 4096;
    alignas(64) float sum[kTile];
    for (int64_t t = lo; t < hi; t += kTile) {
      const int64_t m = std::min(kTile, hi - t);
      for (int64_t i = 0; i < m; ++i) sum[i] = b.dwFlat[static_cast<size_t>(t + i)] + peer.dwFlat[static_cast<size_t>(t + i)];
      o.update(static_cast<size_t>(t - lo), std::span<float>(b.wFlat.data() + t, static_cast<size_t>(m)),
               std::span<const float>(sum, static_cast<size_t>(m)), 1.0f / 256);
      std::copy(b.wFlat.data() + t, b.wFlat.data() + t + m, const_cast<float*>(peer.wFlat.data()) + t);
    }
    both.arriveAndWait();  // every parameter written before the next forward reads it
  };
  for (auto _ : s) team.run(R, step);
  double flop = 0;
  for (int l = 0; l < 3; ++l) flop += 2.0 * static_cast<double>(s.range(1) * L[l] * L[l + 1]) * (l == 0 ? 2 : 3);
  s.counters["GFLOP/s"] =
      benchmark::Counter(flop * static_cast<double>(s.iterations()), benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

}  // namespace

BENCHMARK(BM_ReplicaProducts)
    ->ArgNames({"replicas", "batch", "adam"})
    ->ArgsProduct({{1, 2}, {256}, {0, 1}})
    ->Args({2, 256, 2})
    ->Args({1, 128, 0})
    ->UseRealTime()
    ->MinTime(0.5);
BENCHMARK(BM_MirroredStep)
    ->ArgNames({"devices", "threads", "batch", "wide", "bucket_kib", "comm", "shard"})
    ->Args({1, 1, 256, 1, 0, 0, 0})
    ->Args({2, 1, 256, 1, 0, 1, 0})
    ->Args({2, 1, 256, 1, 0, 2, 0})
    ->Args({1, 2, 256, 1, 0, 0, 0})
    ->Args({2, 1, 256, 1, 0, 0, 1})
    ->Args({2, 1, 256, 1, 0, 0, 2})
    ->Args({2, 1, 256, 1, 256, 1, 0})
    ->Args({2, 1, 256, 1, 256, 2, 0})
    ->Args({2, 1, 256, 1, 65536, 0, 0})
    ->Args({1, 1, 128, 0, 0, 0, 0})
    ->Args({2, 1, 128, 0, 0, 0, 0})
    ->Args({1, 2, 128, 0, 0, 0, 0})
    ->UseRealTime()
    ->MinTime(1.0);
BENCHMARK(BM_TeamCrossover)
    ->ArgNames({"features", "hidden", "classes", "batch", "threads"})
    ->ArgsProduct({{13}, {32}, {3}, {32, 256}, {1, 2}})
    ->ArgsProduct({{64}, {64}, {10}, {64}, {1, 2}})
    ->ArgsProduct({{784}, {32}, {10}, {32, 128}, {1, 2}})
    ->ArgsProduct({{784}, {128}, {10}, {32, 128, 512}, {1, 2}})
    ->ArgsProduct({{784}, {512}, {10}, {128, 512}, {1, 2}})
    ->UseRealTime()
    ->MinTime(0.3);
BENCHMARK(BM_SmallModels)
    ->ArgNames({"model", "variant"})
    ->ArgsProduct({{0, 1, 2}, {1, 2, 0, 3}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime()
    ->MinTime(0.3);
BENCHMARK(BM_Sgemm)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
