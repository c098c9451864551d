// `scale`: the same model on 1, 2, 4... devices, one recorded run each, and the speed-up table.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <thread>

#include "Commands.h"
#include "Overrides.h"
#include "RunRecording.h"
#include "data/Dataset.h"
#include "learn/ScalingExperiment.h"

namespace mlcli {

namespace {

std::atomic<bool> gInterrupted{false};
extern "C" void onScaleSigint(int) { gInterrupted.store(true); }

struct ScaleArgs {
  std::string project, devices = "cpu:1,2,4", keep = "global";
  int64_t steps = 200;
  Overrides o;
  RecordingArgs rec;
};

int scale(ScaleArgs& a) {
  ml::Project base = ml::Project::load(a.project);
  a.o.apply(base);
  auto data = std::make_shared<const ml::DataSplit>(ml::loadData(base.data));
  ml::ScalingOptions so;
  so.devices = a.devices;
  so.keep = ml::parseBatchPolicy(a.keep);
  so.steps = a.steps;
  so.storePath = a.rec.storePath();
  ml::ScalingExperiment experiment(base, data, so);
  std::printf("scaling %s over %s for %lld steps each, keeping the %s batch\n", base.name.c_str(), a.devices.c_str(),
              static_cast<long long>(a.steps), a.keep == "global" ? "global" : "per-device");
  experiment.onRowFinished = [](size_t, const ml::ScalingRow& r) {
    std::printf("  %s done%s\n", r.devices.c_str(), r.runId ? (" (run " + std::to_string(*r.runId) + ")").c_str() : "");
    std::fflush(stdout);
  };
  gInterrupted.store(false);
  auto old = std::signal(SIGINT, onScaleSigint);
  ml::ScalingResult result;
  std::atomic<bool> done{false};
  std::exception_ptr failure;
  std::thread worker([&] {
    try {
      result = experiment.run();
    } catch (...) {
      failure = std::current_exception();
    }
    done.store(true);
  });
  bool cancelSent = false;
  while (!done.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (gInterrupted.load() && !cancelSent) {
      experiment.requestCancel();
      cancelSent = true;
    }
  }
  worker.join();
  std::signal(SIGINT, old);
  if (failure) std::rethrow_exception(failure);
  const auto& rows = result.rows;
  if (!rows.empty()) {
    std::printf("\n%-10s %8s %10s %10s %12s %9s %11s %10s\n", "devices", "global", "per-rep.", "step ms", "samples/s", "speed-up",
                "efficiency", "sync share");
    for (const auto& r : rows)
      std::printf("%-10s %8lld %10lld %10.2f %12.0f %8.2fx %10.0f%% %9.1f%%\n", r.devices.c_str(),
                  static_cast<long long>(r.globalBatch), static_cast<long long>(r.perReplicaBatch), r.stepSeconds * 1e3,
                  r.samplesPerSecond, r.speedup, r.efficiency * 100, r.syncShare * 100);
    std::printf("(step time: median over %lld steps after warm-up; samples/s = global batch / step time)\n%s\n",
                static_cast<long long>(a.steps), result.explanation.c_str());
  }
  if (!result.completed) {
    std::fprintf(stderr, "error: the scaling experiment stopped: %s\n", result.message.c_str());
    return cancelSent ? 130 : 1;
  }
  return 0;
}

}  // namespace

void addScaleCommand(CLI::App& app, int& exitCode) {
  auto a = std::make_shared<ScaleArgs>();
  auto* c = app.add_subcommand("scale", "Run the same model on 1, 2, 4... devices and print speed-up and efficiency");
  c->add_option("project", a->project, "Project file (JSON)")->required();
  c->add_option("--devices", a->devices, "Device counts to compare, e.g. cpu:1,2,4")->capture_default_str();
  c->add_option("--steps", a->steps, "Optimizer steps per device count")->capture_default_str()->check(positiveWhole());
  c->add_option("--keep", a->keep, "Batch policy: keep the global batch or the per-device batch")
      ->check(CLI::IsMember({"global", "per-device"}))
      ->capture_default_str();
  Overrides& o = a->o;
  c->add_option("--batch-size", o.batchSize, "Global batch of the first row")->check(positiveWhole());
  c->add_option("--lr", o.lr, "Base learning rate")->check(positiveFinite());
  c->add_option("--allreduce", o.allreduce, "ring or reduce-to-one")->check(CLI::IsMember({"ring", "reduce-to-one"}));
  c->add_option("--data-path", o.dataPath, "Folder or file of the data set");
  a->rec.addTo(c);
  c->callback([a, &exitCode] { exitCode = guarded([&] { return scale(*a); }); });
}

}  // namespace mlcli
