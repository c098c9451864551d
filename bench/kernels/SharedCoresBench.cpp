// Training beside another busy program: the mirrored step of the Fashion MLP (and the wide one)
// with and without a child process that spins on one core, as a build or a browser would on a
// laptop. Each benchmark runs a fixed number of steps and reports the median step, the swing (the
// slowest window of 25 steps against the fastest, in samples/s: 1 is steady) and replica 0's input
// share (the batch copy, which must show only its own work). Compare busy:1 with busy:0 of the
// same case, in the same run: with one of two cores taken, a run that shares well keeps 1/2 to
// 2/3 of its speed and swings little.
//   bench_shared --benchmark_enable_random_interleaving=true --benchmark_repetitions=3
#include <benchmark/benchmark.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <numeric>

#include "BenchData.h"
#include "distribute/MirroredStrategy.h"

namespace {

// A child process that spins on the first core this process may use, until killed.
class BusyCore {
 public:
  explicit BusyCore(bool on) {
    if (!on) return;
    cpu_set_t mine;
    sched_getaffinity(0, sizeof mine, &mine);
    int first = 0;
    while (first < CPU_SETSIZE && !CPU_ISSET(first, &mine)) ++first;
    pid_ = fork();
    if (pid_ == 0) {  // only async-signal-safe calls from here on
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(first, &one);
      sched_setaffinity(0, sizeof one, &one);
      for (;;) asm volatile("" ::: "memory");
    }
    usleep(20000);  // let it start spinning
  }
  ~BusyCore() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  BusyCore(const BusyCore&) = delete;
  BusyCore& operator=(const BusyCore&) = delete;

 private:
  pid_t pid_ = -1;
};

double nowSeconds() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// args: devices, threads per device, wide (0: 784-128-10 at 128, 1: 784-512-512-10 at 256), busy (0/1)
void BM_SharedCores(benchmark::State& s) {
  static const ml::Dataset data = mlbench::randomImages(4096);
  const bool wide = s.range(2) != 0;
  ml::StrategyOptions so;
  so.devices = ml::parseDevices("cpu:" + std::to_string(s.range(0)));
  so.threadsPerDevice = static_cast<int>(s.range(1));
  ml::MirroredStrategy strat(wide ? mlbench::mlp({512, 512}) : mlbench::mlp({128}),
                             ml::Loss::make(ml::LossKind::SparseCategoricalCrossentropy, false), ml::MetricKind::Accuracy,
                             ml::OptimizerSpec{}, so);
  strat.initialize(1);
  const int64_t B = wide ? 256 : 128;
  std::vector<int64_t> idx(static_cast<size_t>(B));
  int64_t off = 0;
  uint64_t step = 0;
  std::vector<double> times;
  double input = 0, total = 0;
  const BusyCore busy(s.range(3) != 0);
  for (auto _ : s) {
    std::iota(idx.begin(), idx.end(), off);
    off = (off + B) % (4096 - B);
    const double t0 = nowSeconds();
    auto r = strat.trainStep(data, idx, 1, 0.001f, ++step);
    times.push_back(nowSeconds() - t0);
    input += r.replicas.front().phases.input;
    total += r.replicas.front().phases.total();
  }
  s.SetItemsProcessed(s.iterations() * B);
  constexpr size_t kWindow = 25;
  double fastest = 1e300, slowest = 0;
  for (size_t w = 0; w + kWindow <= times.size(); w += kWindow) {
    const double t = std::accumulate(times.begin() + static_cast<long>(w), times.begin() + static_cast<long>(w + kWindow), 0.0);
    fastest = std::min(fastest, t);
    slowest = std::max(slowest, t);
  }
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  s.counters["step_ms"] = sorted.empty() ? 0 : 1e3 * sorted[sorted.size() / 2];
  s.counters["p90_ms"] = sorted.empty() ? 0 : 1e3 * sorted[sorted.size() * 9 / 10];
  s.counters["swing"] = slowest > 0 ? slowest / fastest : 0;
  s.counters["input_share"] = total > 0 ? input / total : 0;
}

}  // namespace

BENCHMARK(BM_SharedCores)
    ->ArgNames({"devices", "threads", "wide", "busy"})
    ->ArgsProduct({{1}, {2}, {0, 1}, {0, 1}})
    ->ArgsProduct({{2}, {1}, {0, 1}, {0, 1}})
    ->ArgsProduct({{1}, {1}, {0}, {0, 1}})
    ->Iterations(500)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
