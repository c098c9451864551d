// The run store's speed goals, side by side with their baselines:
//  - recording 4 replicas x 100,000 steps: recorder vs an in-memory no-op consumer (events/s),
//    and a simulated training loop with the recorder on vs off (overhead, goal < 1%);
//  - `runs list` on 1,000 runs / 10,000,000 step rows (goal < 200 ms);
//  - loading one run's 100,000-step curves (goal < 100 ms);
//  - bytes per step per replica on disk (goal < 100).
// Sizes come from the environment (defaults are the issue's sizes):
//   MIRRORLAB_BENCH_STEPS (100000), MIRRORLAB_BENCH_RUNS (1000),
//   MIRRORLAB_BENCH_STEP_ROWS (10000000), MIRRORLAB_BENCH_TRAIN_STEPS (20000),
//   MIRRORLAB_BENCH_STEP_US (500: simulated compute per training step),
//   MIRRORLAB_BENCH_DIR (/tmp: the big store is generated once there and reused).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <map>
#include <thread>

#include <unistd.h>

#include "store/Recorder.h"
#include "store/RunStore.h"

namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// CPU seconds of the other threads (the consumer): the whole process minus the calling thread.
double consumerCpuSeconds() {
  auto read = [](clockid_t id) {
    timespec t{};
    clock_gettime(id, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  };
  return read(CLOCK_PROCESS_CPUTIME_ID) - read(CLOCK_THREAD_CPUTIME_ID);
}

int64_t envInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoll(v) : fallback;
}

const int kReplicas = 4;
std::map<std::string, double> gResults;  // for the ratios printed at the end

ml::RunStarted started(const std::string& name, int64_t steps) {
  ml::RunStarted s;
  s.runName = name;
  s.projectJson = std::string(R"({"name":"bench","model":{"layers":[)") +
                  R"({"type":"Flatten"},{"type":"Dense","units":128,"activation":"relu"},)" + R"({"type":"Dense","units":10}]}})";
  s.configJson = R"({"devices":"cpu:4","replicas":4,"global_batch":256,"lr":0.004,)"
                 R"("optimizer":{"name":"adam"},"loss":"sparse_categorical_crossentropy"})";
  for (int r = 0; r < kReplicas; ++r) s.devices.push_back("cpu:" + std::to_string(r));
  s.replicas = kReplicas;
  s.globalBatch = 256;
  s.perReplicaBatch = 64;
  s.lr = 0.004;
  s.epochs = 10;
  s.stepsPerEpoch = steps / 10;
  s.totalSteps = steps;
  return s;
}

ml::StepEvent step(int64_t i, int64_t stepsPerEpoch) {
  ml::StepEvent e;
  e.step = i;
  e.epoch = static_cast<int>((i - 1) / stepsPerEpoch + 1);
  e.loss = 2.3 / (1 + 1e-3 * static_cast<double>(i));
  e.metric = 0.9 * static_cast<double>(i) / static_cast<double>(i + 1000);
  e.lr = 0.004;
  e.samples = 256;
  e.stepTime = 0.010 + 1e-4 * static_cast<double>(i % 17);
  e.wallTime = 0.0101 * static_cast<double>(i);
  for (int r = 0; r < kReplicas; ++r) {
    double j = 1e-5 * static_cast<double>((i * 7 + r * 13) % 31);
    e.replicas.push_back({r, 64, {0.003 + j, 0.005 + j, 0.0012, 0.0004 * r + j, 0.0003}, e.wallTime - e.stepTime});
  }
  return e;
}

std::string tempStore(const char* tag) {
  fs::path dir = std::getenv("MIRRORLAB_BENCH_DIR") ? std::getenv("MIRRORLAB_BENCH_DIR") : "/tmp";
  fs::path p = dir / ("mirrorlab-bench-" + std::string(tag) + "-" + std::to_string(getpid()) + ".sqlite");
  for (const char* ext : {"", "-wal", "-shm"}) fs::remove(p.string() + ext);
  return p.string();
}

// Drains and discards: the baseline consumer for "recorder on vs off".
struct NoOpConsumer {
  explicit NoOpConsumer(std::shared_ptr<ml::Channel> ch)
      : thread([ch] {
          std::vector<ml::Event> batch;
          while (ch->waitFor(std::chrono::milliseconds(200))) {
            batch.clear();
            ch->drain(batch);
          }
        }) {}
  void stop() { thread.join(); }
  std::thread thread;
};

// Pushes prebuilt steps as fast as possible; time until the consumer has taken everything.
void BM_RecordSteps(benchmark::State& state) {
  const bool record = state.range(0) == 1;
  const int64_t n = envInt("MIRRORLAB_BENCH_STEPS", 100000);
  std::vector<ml::StepEvent> steps;
  for (int64_t i = 1; i <= n; ++i) steps.push_back(step(i, n / 10));
  for (auto _ : state) {
    std::string path = tempStore("record");
    auto ch = std::make_shared<ml::Channel>(static_cast<size_t>(n + 16));
    std::unique_ptr<ml::Recorder> rec;
    std::unique_ptr<NoOpConsumer> noop;
    if (record)
      rec = std::make_unique<ml::Recorder>(path, ch, ml::RecorderOptions{.host = {{"bench", true}}});
    else
      noop = std::make_unique<NoOpConsumer>(ch);
    auto t0 = Clock::now();
    double c0 = consumerCpuSeconds();
    ch->tryPush(started("bench record", n));
    for (const auto& s : steps) ch->tryPush(s);
    ch->tryPush(ml::RunFinished{});
    ch->close();
    if (rec)
      rec->stop();
    else
      noop->stop();
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    state.SetIterationTime(secs);
    if (ch->dropped() != 0) state.SkipWithError("events were dropped");
    gResults[record ? "record_s" : "noop_s"] = secs;
    gResults[record ? "record_cpu" : "noop_cpu"] = consumerCpuSeconds() - c0;
    if (record) {
      rec.reset();
      // File size once the WAL is folded in: bytes per step per replica, all tables included.
      { ml::RunStore s = ml::RunStore::open(path); }
      double bytes = static_cast<double>(fs::file_size(path));
      gResults["bytes_per_step_replica"] = bytes / static_cast<double>(n * kReplicas);
      state.counters["bytes/step/replica"] = gResults["bytes_per_step_replica"];
      state.counters["file_MB"] = bytes / 1e6;
    }
    for (const char* ext : {"", "-wal", "-shm"}) fs::remove(path + ext);
  }
  state.counters["steps/s"] = benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["rows/s"] =
      benchmark::Counter(static_cast<double>(n * (1 + kReplicas)), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_RecordSteps)->Arg(0)->Arg(1)->ArgName("recorder")->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);

// A training loop that computes for STEP_US per step (busy, like a kernel) and publishes a step
// event each time: wall time with the recorder consuming vs a no-op consumer.
void BM_TrainingLoop(benchmark::State& state) {
  const bool record = state.range(0) == 1;
  const int64_t n = envInt("MIRRORLAB_BENCH_TRAIN_STEPS", 20000);
  const auto compute = std::chrono::microseconds(envInt("MIRRORLAB_BENCH_STEP_US", 500));
  for (auto _ : state) {
    std::string path = tempStore("train");
    auto ch = std::make_shared<ml::Channel>();
    std::unique_ptr<ml::Recorder> rec;
    std::unique_ptr<NoOpConsumer> noop;
    if (record)
      rec = std::make_unique<ml::Recorder>(path, ch, ml::RecorderOptions{.host = {{"bench", true}}});
    else
      noop = std::make_unique<NoOpConsumer>(ch);
    auto t0 = Clock::now();
    double c0 = consumerCpuSeconds();
    ch->tryPush(started("bench train", n));
    for (int64_t i = 1; i <= n; ++i) {
      auto until = Clock::now() + compute;
      while (Clock::now() < until) {
      }
      ch->tryPush(step(i, n / 10));
    }
    ch->tryPush(ml::RunFinished{});
    double trainSecs = std::chrono::duration<double>(Clock::now() - t0).count();
    ch->close();
    if (rec)
      rec->stop();
    else
      noop->stop();
    state.SetIterationTime(trainSecs);  // training time: what the user waits for
    gResults[record ? "train_on_s" : "train_off_s"] = trainSecs;
    gResults[record ? "train_on_cpu" : "train_off_cpu"] = consumerCpuSeconds() - c0;
    rec.reset();
    for (const char* ext : {"", "-wal", "-shm"}) fs::remove(path + ext);
  }
}
BENCHMARK(BM_TrainingLoop)->Arg(0)->Arg(1)->ArgName("recorder")->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);

// ---- the big store ------------------------------------------------------------------------------

struct BigStore {
  std::string path;
  int64_t curvesRun = 0;  // a run with STEPS steps x 4 replicas
};

// Generated once per size with one prepared INSERT per table in large transactions.
BigStore bigStore() {
  static BigStore big;
  if (!big.path.empty()) return big;
  const int64_t runs = envInt("MIRRORLAB_BENCH_RUNS", 1000);
  const int64_t rows = envInt("MIRRORLAB_BENCH_STEP_ROWS", 10000000);
  const int64_t curveSteps = envInt("MIRRORLAB_BENCH_STEPS", 100000);
  fs::path dir = std::getenv("MIRRORLAB_BENCH_DIR") ? std::getenv("MIRRORLAB_BENCH_DIR") : "/tmp";
  big.path = (dir / ("mirrorlab-bench-big-" + std::to_string(runs) + "-" + std::to_string(rows) + "-" +
                     std::to_string(curveSteps) + ".sqlite"))
                 .string();
  ml::RunStore store = ml::RunStore::open(big.path);
  if (store.db().queryInt("SELECT count(*) FROM runs") == runs + 1) {
    big.curvesRun = store.db().queryInt("SELECT max(id) FROM runs");
    return big;
  }
  std::fprintf(stderr, "generating %s: %lld runs, %lld step rows (once)...\n", big.path.c_str(), static_cast<long long>(runs),
               static_cast<long long>(rows));
  auto t0 = Clock::now();
  store.db().exec("PRAGMA synchronous=OFF");
  auto ins = store.db().prepare(
      "INSERT INTO steps(run_id, step, epoch, loss, metric, lr, samples, step_time, wall_time) "
      "VALUES(?,?,?,?,?,?,?,?,?)");
  const int64_t perRun = rows / runs;
  for (int64_t r = 0; r < runs; ++r) {
    auto tx = store.transaction();
    ml::RunStarted s = started("bench run " + std::to_string(r), perRun);
    int64_t id = store.createRun(s, {{"bench", true}});
    for (int64_t i = 1; i <= perRun; ++i) {
      ml::StepEvent e = step(i, std::max<int64_t>(1, perRun / 10));
      ins.bindAll(id, e.step, e.epoch, e.loss, e.metric, e.lr, e.samples, e.stepTime, e.wallTime);
      ins.run();
    }
    std::vector<ml::EpochEvent> epochs;
    for (int ep = 1; ep <= 10; ++ep)
      epochs.push_back({ep, 1.0 / ep, 0.8, 1.1 / ep, 0.7 + 0.02 * ep, 12.5, 2048, 0.1, 0.02, {1, 1, 1, 1}, true, 13.0 * ep});
    store.appendEpochs(id, epochs);
    if (r % 10 == 0) store.tagRun(id, "sweep");
    store.finishRun(id, ml::RunFinished{});
    tx.commit();
  }
  {
    auto tx = store.transaction();
    int64_t id = store.createRun(started("bench curves", curveSteps), {{"bench", true}});
    std::vector<ml::StepEvent> batch;
    for (int64_t i = 1; i <= curveSteps; ++i) batch.push_back(step(i, curveSteps / 10));
    store.appendSteps(id, batch);
    store.finishRun(id, ml::RunFinished{});
    tx.commit();
    big.curvesRun = id;
  }
  store.db().exec("PRAGMA wal_checkpoint(TRUNCATE)");
  std::fprintf(stderr, "generated in %.0f s, %.0f MB\n", std::chrono::duration<double>(Clock::now() - t0).count(),
               static_cast<double>(fs::file_size(big.path)) / 1e6);
  return big;
}

void BM_ListRuns(benchmark::State& state) {
  BigStore big = bigStore();
  ml::RunStore store = ml::RunStore::open(big.path);
  size_t n = 0;
  for (auto _ : state) n = store.listRuns().size();
  state.counters["runs"] = static_cast<double>(n);
}
BENCHMARK(BM_ListRuns)->Unit(benchmark::kMillisecond);

// What `mirrorlab-cli runs list` does: open (validate, migrate check, interrupted runs) + list.
void BM_OpenAndListRuns(benchmark::State& state) {
  BigStore big = bigStore();
  for (auto _ : state) {
    ml::RunStore store = ml::RunStore::open(big.path);
    benchmark::DoNotOptimize(store.listRuns().size());
  }
}
BENCHMARK(BM_OpenAndListRuns)->Unit(benchmark::kMillisecond);

void BM_LoadCurves(benchmark::State& state) {
  BigStore big = bigStore();
  ml::RunStore store = ml::RunStore::open(big.path);
  size_t n = 0;
  for (auto _ : state) n = store.loadCurves(big.curvesRun).size();
  state.counters["steps"] = static_cast<double>(n);
}
BENCHMARK(BM_LoadCurves)->Unit(benchmark::kMillisecond);

// `runs show`: configuration, epochs and the per-replica totals over 4 x 100,000 rows.
void BM_LoadRunDetail(benchmark::State& state) {
  BigStore big = bigStore();
  ml::RunStore store = ml::RunStore::open(big.path);
  for (auto _ : state) benchmark::DoNotOptimize(store.loadRun(big.curvesRun).replicas.size());
}
BENCHMARK(BM_LoadRunDetail)->Unit(benchmark::kMillisecond);

// Mean wall time of a finished benchmark run, in ms, by name.
class Collector : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs)
      if (r.run_type == Run::RT_Iteration && !r.error_occurred) gResults[r.benchmark_name()] = r.GetAdjustedRealTime();
    ConsoleReporter::ReportRuns(runs);
  }
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  Collector reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  auto has = [](const char* k) { return gResults.count(k) > 0; };
  std::printf("\nSummary (goal in brackets)\n");
  if (has("record_s") && has("noop_s")) {
    double steps = static_cast<double>(envInt("MIRRORLAB_BENCH_STEPS", 100000));
    std::printf(
        "  recording %d replicas x %.0f steps: %.2f s (%.0f steps/s, %.0f rows/s); "
        "no-op consumer %.3f s; ratio %.1fx\n",
        kReplicas, steps, gResults["record_s"], steps / gResults["record_s"], steps * (1 + kReplicas) / gResults["record_s"],
        gResults["noop_s"], gResults["record_s"] / gResults["noop_s"]);
    double cpuPerStep = gResults["record_cpu"] / steps;
    std::printf(
        "  recorder thread CPU per step (1 step row + %d replica rows): %.1f us; no-op "
        "consumer %.2f us\n",
        kReplicas, 1e6 * cpuPerStep, 1e6 * gResults["noop_cpu"] / steps);
  }
  if (has("train_on_s") && has("train_off_s")) {
    double n = static_cast<double>(envInt("MIRRORLAB_BENCH_TRAIN_STEPS", 20000));
    double stepUs = static_cast<double>(envInt("MIRRORLAB_BENCH_STEP_US", 500));
    double recCpu = gResults["train_on_cpu"] / n;
    std::printf(
        "  training loop (%.0f us compute per step), recorder on vs off: %.3f s vs %.3f s: "
        "wall overhead %+.2f%% [< 1%%]\n",
        stepUs, gResults["train_on_s"], gResults["train_off_s"], 100 * (gResults["train_on_s"] / gResults["train_off_s"] - 1));
    std::printf(
        "    recorder CPU %.1f us per step = %.2f%% of the step (on its own thread: the "
        "wall overhead depends on a free core)\n",
        1e6 * recCpu, 100 * recCpu / (stepUs * 1e-6));
  }
  if (has("BM_ListRuns"))
    std::printf("  runs list: %.1f ms, with open %.1f ms [< 200 ms]\n", gResults["BM_ListRuns"], gResults["BM_OpenAndListRuns"]);
  if (has("BM_LoadCurves"))
    std::printf("  load 100k-step curves: %.1f ms [< 100 ms]; run detail %.1f ms\n", gResults["BM_LoadCurves"],
                gResults["BM_LoadRunDetail"]);
  if (has("bytes_per_step_replica"))
    std::printf("  bytes per step per replica: %.1f [< 100]\n", gResults["bytes_per_step_replica"]);
  benchmark::Shutdown();
  return 0;
}
