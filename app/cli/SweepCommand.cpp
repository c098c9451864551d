// `sweep`: run a grid of batch size x learning rate x devices x scaling rule as stored runs tagged
// with one sweep id, print each point as it ends and the results table; resume, list, show, CSV.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>

#include "Commands.h"
#include "Error.h"
#include "Format.h"
#include "RunRecording.h"
#include "data/Dataset.h"
#include "learn/Sweep.h"
#include "learn/SweepResults.h"
#include "store/RunStore.h"

namespace mlcli {

namespace {

std::atomic<bool> gSweepInterrupted{false};
extern "C" void onSweepSigint(int) { gSweepInterrupted.store(true); }

struct SweepArgs {
  std::string project, name, csv, dataPath;
  std::optional<std::string> batchSizes, lrs, devices, lrScalings;  // given, even empty, or the project's
  std::optional<int> epochs;
  std::optional<int64_t> steps, resume, show;
  std::optional<double> target;
  int parallel = 1, stopAfter = 0;
  int64_t maxPoints = ml::kDefaultMaxSweepPoints;
  bool list = false;
  RecordingArgs rec;
};

std::string pointLabel(const ml::SweepPointRow& p) {
  return "#" + std::to_string(p.point + 1) + " batch " + std::to_string(p.batchSize) + ", lr " + ml::formatNumber("%g", p.lr) +
         ", " + p.devices + ", " + p.lrScaling + " scaling";
}

int listSweeps(const std::string& db) {
  ml::RunStore store = ml::RunStore::open(db);
  const auto all = ml::listSweeps(store);
  if (all.empty()) std::printf("no sweeps in %s\n", db.c_str());
  for (const auto& s : all)
    std::printf("%5lld  %-10s %3d/%-3zu points  %s\n", static_cast<long long>(s.id), s.status.c_str(), s.finishedPoints(),
                s.points.size(), s.name.c_str());
  return 0;
}

int report(const std::string& db, int64_t id, const std::string& csv) {
  ml::RunStore store = ml::RunStore::open(db);
  const ml::SweepResults r = ml::loadSweepResults(store, id);
  std::printf("\nsweep %lld (%s, %s, %d of %zu points finished%s)\n", static_cast<long long>(id), r.sweep.name.c_str(),
              r.sweep.status.c_str(), r.sweep.finishedPoints(), r.sweep.points.size(),
              r.sweep.target ? (", target " + r.metric + " " + ml::formatNumber("%g", *r.sweep.target)).c_str() : "");
  std::fputs(ml::formatSweepTable(r).c_str(), stdout);
  if (!csv.empty()) {
    ml::writeSweepCsv(r, csv);
    std::printf("wrote %s (one row per point)\n", csv.c_str());
  }
  return 0;
}

ml::SweepOptions optionsFrom(const SweepArgs& a, const ml::Project& p) {
  ml::SweepOptions o;
  o.grid.batchSizes = ml::parseBatchList(a.batchSizes.value_or(std::to_string(p.training.batchSize)));
  o.grid.lrs = ml::parseLrList(a.lrs.value_or(ml::formatNumber("%.10g", p.training.optimizer.learningRate)));
  o.grid.devices = ml::parseDeviceSpecList(a.devices.value_or(p.distribute.devices.spec));
  o.grid.lrScalings = ml::parseScalingList(a.lrScalings.value_or(ml::toString(p.training.lrScaling)));
  o.epochs = a.epochs;
  o.steps = a.steps;
  o.target = a.target;
  o.parallel = a.parallel;
  o.maxPoints = a.maxPoints;
  o.stopAfterNoImprovement = a.stopAfter;
  o.name = a.name;
  return o;
}

// Runs the sweep on a worker thread so that Ctrl-C can cancel it from here.
std::string runWithSigint(ml::SweepRunner& runner) {
  gSweepInterrupted.store(false);
  auto old = std::signal(SIGINT, onSweepSigint);
  std::string status;
  std::exception_ptr failure;
  std::atomic<bool> done{false};
  std::thread worker([&] {
    try {
      status = runner.run();
    } catch (...) {
      failure = std::current_exception();
    }
    done.store(true);
  });
  bool sent = false;
  while (!done.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (gSweepInterrupted.load() && !sent) {
      std::fprintf(stderr, "\ncancelling: finished points stay stored, the rest are marked cancelled\n");
      runner.requestCancel();
      sent = true;
    }
  }
  worker.join();
  std::signal(SIGINT, old);
  if (failure) std::rethrow_exception(failure);
  return status;
}

int sweep(SweepArgs& a) {
  const std::string db = a.rec.db.empty() ? ml::defaultStorePath() : a.rec.db;
  if (a.list) return listSweeps(db);
  if (a.show) return report(db, *a.show, a.csv);
  std::unique_ptr<ml::SweepRunner> runner;
  auto load = [&](ml::Project p) {
    if (!a.dataPath.empty()) p.data.path = a.dataPath;
    return std::make_shared<const ml::DataSplit>(ml::loadData(p.data));
  };
  if (a.resume) {
    if (!a.project.empty() || a.batchSizes || a.lrs || a.devices || a.lrScalings)
      throw ml::UserError("--resume continues a stored sweep with its own project and grid: drop the project and the lists");
    ml::RunStore store = ml::RunStore::open(db);
    const ml::SweepRecord rec = ml::loadSweep(store, *a.resume);
    if (rec.finishedPoints() == static_cast<int>(rec.points.size())) {
      std::printf("sweep %lld has no unfinished point\n", static_cast<long long>(rec.id));
      return report(db, rec.id, a.csv);
    }
    ml::Project p = ml::Project::fromJson(nlohmann::json::parse(rec.projectJson), "sweep " + std::to_string(rec.id));
    runner = std::make_unique<ml::SweepRunner>(rec.id, load(p), db);
  } else {
    if (a.project.empty())
      throw ml::UserError(
          "give a project file, e.g. mirrorlab-cli sweep projects/spirals.json --batch-size 32,64 --lr 1e-3,1e-2");
    ml::Project p = ml::Project::load(a.project);
    ml::SweepOptions o = optionsFrom(a, p);
    // The grid is checked before the data set is loaded: bad lists fail at once.
    if (static_cast<int64_t>(o.grid.size()) > o.maxPoints) ml::validateSweep(p, o, 0);
    runner = std::make_unique<ml::SweepRunner>(p, load(p), o, db);
  }
  const auto todo = runner->pending();
  std::printf("sweep %lld: %zu of %zu points to run, %d at a time; recorded in %s\n", static_cast<long long>(runner->id()),
              todo.size(), runner->points().size(), runner->options().parallel, db.c_str());
  std::atomic<int> ended{0};
  const int total = static_cast<int>(todo.size());
  runner->onPointStarted = [](const ml::SweepPointRow& p) {
    std::printf("  started  %s\n", pointLabel(p).c_str());
    std::fflush(stdout);
  };
  runner->onPointFinished = [&](const ml::SweepPointRow& p) {
    const int n = ++ended;
    std::printf("  [%d/%d] %-9s %s%s%s\n", n, total, p.status.c_str(), pointLabel(p).c_str(),
                p.runId ? (" (run " + std::to_string(*p.runId) + ")").c_str() : "",
                p.message.empty() ? "" : (": " + p.message).c_str());
    std::fflush(stdout);
  };
  const std::string status = runWithSigint(*runner);
  report(db, runner->id(), a.csv);
  if (status == "cancelled") {
    std::printf("sweep %lld cancelled: resume it with mirrorlab-cli sweep --resume %lld\n", static_cast<long long>(runner->id()),
                static_cast<long long>(runner->id()));
    return kExitInterrupted;
  }
  if (status == "failed") {
    const auto& pts = runner->points();
    const auto first = std::find_if(pts.begin(), pts.end(), [](const ml::SweepPointRow& p) { return p.status == "failed"; });
    std::fprintf(stderr,
                 "error: sweep %lld failed: no point trained (the first: %s); if the data or the disk was at fault, fix it "
                 "and resume with mirrorlab-cli sweep --resume %lld; if the project was, fix it and run a new sweep\n",
                 static_cast<long long>(runner->id()), first == pts.end() ? "unknown" : first->message.c_str(),
                 static_cast<long long>(runner->id()));
    return kExitFailed;
  }
  return kExitDone;
}

}  // namespace

void addSweepCommand(CLI::App& app, int& exitCode) {
  auto a = std::make_shared<SweepArgs>();
  auto* c = app.add_subcommand("sweep", "Run a grid of batch size x learning rate x devices as stored runs and compare them");
  c->add_option("project", a->project, "Project file (JSON); not with --resume, --list or --show");
  c->add_option("--batch-size", a->batchSizes, "Global batch sizes, comma-separated, e.g. 64,128,256 (default: the project's)");
  c->add_option("--lr", a->lrs, "Base learning rates, e.g. 1e-3,3e-3,1e-2 (default: the project's)");
  c->add_option("--devices", a->devices, "Device lists, e.g. cpu:1,cpu:2 (or cpu:1,2); ';' between GPU lists: gpu:0;gpu:0,1");
  c->add_option("--lr-scaling", a->lrScalings, "Scaling rules to try, e.g. none,linear (default: the project's)");
  auto* ep = c->add_option("--epochs", a->epochs, "Epochs per point (default: the project's)")->check(CLI::PositiveNumber);
  c->add_option("--steps", a->steps, "Optimizer steps per point instead of epochs")->check(CLI::PositiveNumber)->excludes(ep);
  c->add_option("--target", a->target, "Validation metric to reach: time and samples to it per point, e.g. 0.85");
  c->add_option("--parallel", a->parallel, "Points trained at once (each with its own devices)")->capture_default_str();
  c->add_option("--max-points", a->maxPoints, "Refuse grids with more points than this")->capture_default_str();
  c->add_option("--stop-after-no-improvement", a->stopAfter,
                "Stop a point after N epochs without a lower validation loss (0: off)");
  c->add_option("--resume", a->resume, "Run the unfinished points of stored sweep ID");
  c->add_option("--show", a->show, "Print the results table of stored sweep ID");
  c->add_flag("--list", a->list, "List the stored sweeps");
  c->add_option("--csv", a->csv, "Also write the results, one row per point, to this CSV file");
  c->add_option("--name", a->name, "Name of the sweep (default: \"<project> sweep\")");
  c->add_option("--data-path", a->dataPath, "Folder or file of the data set");
  c->add_option("--db", a->rec.db, "Run store (SQLite) (default: $MIRRORLAB_DB, else ~/.local/share/mirrorlab/runs.sqlite)");
  c->callback([a, &exitCode] { exitCode = guarded([&] { return sweep(*a); }); });
}

}  // namespace mlcli
