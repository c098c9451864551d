// One whole mirrored optimizer step (gather, forward, loss, backward, all-reduce, Adam) for
// 1 and 2 simulated devices, and for a single device with all cores: the numbers behind the
// "2 devices reach 1.8x one device" goal, without data loading or telemetry.
#include <benchmark/benchmark.h>

#include <numeric>

#include "distribute/MirroredStrategy.h"
#include "BenchData.h"

namespace {

using mlbench::mlp;
using mlbench::randomImages;

// args: devices, threads per device (single device only), global batch, wide (0/1)
void BM_MirroredStep(benchmark::State& s) {
  static const ml::Dataset data = randomImages(4096);
  ml::StrategyOptions so;
  so.devices = ml::parseDevices("cpu:" + std::to_string(s.range(0)));
  so.threadsPerDevice = static_cast<int>(s.range(1));
  ml::OptimizerSpec o;
  ml::MirroredStrategy strat(s.range(3) ? mlp({512, 512}) : mlp({128}), ml::Loss::make("sparse_categorical_crossentropy", false),
                             ml::MetricKind::Accuracy, o, so);
  strat.initialize(1);
  const int64_t B = s.range(2);
  std::vector<int64_t> idx(static_cast<size_t>(B));
  int64_t off = 0;
  uint64_t step = 0;
  double sync = 0, all = 0;
  for (auto _ : s) {
    std::iota(idx.begin(), idx.end(), off);
    off = (off + B) % (4096 - B);
    auto r = strat.trainStep(data, idx, 1, 0.001f, ++step);
    for (const auto& rs : r.replicas) {
      sync += rs.phases.allreduce + rs.phases.wait;
      all += rs.phases.total();
    }
  }
  s.SetItemsProcessed(s.iterations() * B);
  s.counters["sync_share"] = all > 0 ? sync / all : 0;
}

}  // namespace

BENCHMARK(BM_MirroredStep)
    ->ArgNames({"devices", "threads", "batch", "wide"})
    ->Args({1, 1, 256, 1})->Args({2, 1, 256, 1})->Args({1, 2, 256, 1})
    ->Args({1, 1, 128, 0})->Args({2, 1, 128, 0})->Args({1, 2, 128, 0})
    ->UseRealTime()->MinTime(1.0);
BENCHMARK_MAIN();
