// Telemetry on vs off: the same 200 training steps with nobody listening, and with a consumer
// draining at display rate plus the SQLite recorder writing every event. The goal is < 2%
// difference in step time (training never waits for consumers or the disk). The third argument
// turns the watchdog (hang and straggler checks) off or on: its cost is part of that budget.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <filesystem>
#include <thread>

#include "BenchData.h"
#include "store/Recorder.h"
#include "train/Trainer.h"

namespace {

std::shared_ptr<const ml::DataSplit> randomSplit(int64_t n) {
  auto s = std::make_shared<ml::DataSplit>();
  s->train = mlbench::randomImages(n);
  return s;
}

ml::Project project(const std::string& devices) {
  ml::Project p;
  p.name = "telemetry bench";
  p.model = mlbench::mlp({512, 512});
  p.training.batchSize = 256;
  p.training.epochs = 100;
  p.distribute.devices = ml::parseDevices(devices);
  return p;
}

// args: devices, telemetry (0 off, 1 on), watchdog (0 off, 1 on)
void BM_TrainerSteps(benchmark::State& s) {
  static const auto data = randomSplit(8192);
  const std::string devices = "cpu:" + std::to_string(s.range(0));
  const std::string db = (std::filesystem::temp_directory_path() / "mirrorlab-telemetry-bench.sqlite").string();
  for (auto _ : s) {
    s.PauseTiming();
    std::filesystem::remove(db);
    ml::TelemetryHub hub;
    ml::TrainerOptions o;
    o.maxSteps = 200;
    o.watchdog = s.range(2) != 0;
    ml::Trainer t(project(devices), data, hub, o);
    std::unique_ptr<ml::Recorder> rec;
    std::shared_ptr<ml::Channel> ui;
    std::thread drainer;
    if (s.range(1)) {
      rec = std::make_unique<ml::Recorder>(db, hub.subscribe(1 << 18));
      ui = hub.subscribe();
      drainer = std::thread([&] {
        std::vector<ml::Event> ev;
        while (ui->waitFor(std::chrono::milliseconds(40))) {
          std::this_thread::sleep_for(std::chrono::milliseconds(40));
          ev.clear();
          ui->drain(ev);
        }
      });
    }
    s.ResumeTiming();
    t.run();
    s.PauseTiming();
    hub.closeAll();
    if (drainer.joinable()) drainer.join();
    if (rec) rec->stop();
    s.ResumeTiming();
  }
  s.SetItemsProcessed(s.iterations() * 200 * 256);
  std::filesystem::remove(db);
}

}  // namespace

BENCHMARK(BM_TrainerSteps)
    ->ArgNames({"devices", "telemetry", "watchdog"})
    ->Args({2, 0, 0})
    ->Args({2, 1, 0})
    ->Args({2, 1, 1})
    ->Args({1, 0, 0})
    ->Args({1, 1, 0})
    ->Args({1, 1, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);
// Repetitions from the command line, interleaved so that the machine's drift hits every
// configuration alike (the watchdog's cost is below one run's noise):
//   bench_telemetry --benchmark_filter='devices:2/telemetry:1' --benchmark_repetitions=15
//     --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
BENCHMARK_MAIN();
