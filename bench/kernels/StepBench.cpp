// One whole mirrored optimizer step (gather, forward, loss, backward, all-reduce, Adam) for
// 1 and 2 simulated devices, and for a single device with all cores: the numbers behind the
// "2 devices reach 1.8x one device" goal, without data loading or telemetry; with the sharded
// optimizer update (ZeRO stage 1) and the 2048^3 sgemm on 1 and 2 threads in the same binary, so
// that --benchmark_enable_random_interleaving=true --benchmark_repetitions=N gives the steps and
// the machine's own 2/1 ratio from interleaved rounds (medians and spread).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <numeric>

#include "BenchData.h"
#include "distribute/MirroredStrategy.h"

namespace {

using mlbench::mlp;
using mlbench::randomImages;

// args: devices, threads per device (single device only), global batch, wide (0/1), bucket KiB (0: default),
// bucket reduction (0 auto, 1 communication threads, 2 inline between layers), shard (1: ZeRO stage 1)
void BM_MirroredStep(benchmark::State& s) {
  static const ml::Dataset data = randomImages(4096);
  ml::StrategyOptions so;
  so.devices = ml::parseDevices("cpu:" + std::to_string(s.range(0)));
  so.threadsPerDevice = static_cast<int>(s.range(1));
  if (s.range(4) > 0) so.bucketBytes = s.range(4) << 10;  // KiB; 0 keeps the default
  so.bucketComm = static_cast<ml::BucketComm>(s.range(5));
  so.shardOptimizer = s.range(6) != 0;
  ml::OptimizerSpec o;
  ml::MirroredStrategy strat(s.range(3) ? mlp({512, 512}) : mlp({128}), ml::Loss::make("sparse_categorical_crossentropy", false),
                             ml::MetricKind::Accuracy, o, so);
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

}  // namespace

BENCHMARK(BM_MirroredStep)
    ->ArgNames({"devices", "threads", "batch", "wide", "bucket_kib", "comm", "shard"})
    ->Args({1, 1, 256, 1, 0, 0, 0})
    ->Args({2, 1, 256, 1, 0, 1, 0})
    ->Args({2, 1, 256, 1, 0, 2, 0})
    ->Args({1, 2, 256, 1, 0, 0, 0})
    ->Args({2, 1, 256, 1, 0, 0, 1})
    ->Args({2, 1, 256, 1, 256, 1, 0})
    ->Args({2, 1, 256, 1, 256, 2, 0})
    ->Args({2, 1, 256, 1, 65536, 0, 0})
    ->Args({1, 1, 128, 0, 0, 0, 0})
    ->Args({2, 1, 128, 0, 0, 0, 0})
    ->Args({1, 2, 128, 0, 0, 0, 0})
    ->UseRealTime()
    ->MinTime(1.0);
BENCHMARK(BM_Sgemm)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
