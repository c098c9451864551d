#include "WorkersLauncher.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>
#include <vector>

#include "Error.h"
#include "store/RunStore.h"

extern char** environ;

namespace mlui {

namespace {

ml::RunStatus statusOf(const std::string& s) {
  for (ml::RunStatus st : {ml::RunStatus::Running, ml::RunStatus::Finished, ml::RunStatus::Cancelled, ml::RunStatus::Diverged,
                           ml::RunStatus::Failed, ml::RunStatus::Interrupted})
    if (s == ml::toString(st)) return st;
  return ml::RunStatus::Failed;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int64_t newestRun(const std::string& store) {
  if (!std::filesystem::exists(store)) return 0;
  int64_t most = 0;
  for (const auto& r : ml::RunStore::open(store).listRuns()) most = std::max(most, r.id);
  return most;
}

}  // namespace

ml::RunStarted startedFromStore(const ml::RunDetail& d) {
  ml::RunStarted s;
  s.runName = d.summary.name;
  s.projectJson = d.projectJson;
  s.configJson = d.configJson;
  s.devices = d.deviceNames;
  s.replicas = d.summary.replicas;
  s.workers = d.workers;
  s.hosts = d.hosts;
  s.globalBatch = d.summary.globalBatch;
  s.perReplicaBatch = d.perReplicaBatch;
  s.baseLr = d.baseLr.value_or(0);
  s.lr = d.summary.lr.value_or(0);
  s.epochs = d.epochsPlanned;
  s.stepsPerEpoch = d.stepsPerEpoch;
  s.totalSteps = d.totalSteps;
  s.description = d.description;
  return s;
}

WorkersRun runWorkersFollowingStore(const std::string& cli, const ml::Project& project, const std::string& store,
                                    int64_t maxSteps, ml::TelemetryHub& hub, const std::atomic<bool>& cancel) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir = fs::temp_directory_path(ec) / ("mirrorlab-workers-" + std::to_string(::getpid()));
  fs::create_directories(dir, ec);
  const std::string projectFile = (dir / "project.json").string(), logFile = (dir / "cli.log").string();
  {
    std::ofstream out(projectFile);
    out << project.toJson().dump(2) << "\n";
    if (!out) throw ml::UserError("cannot write the project for the workers to " + projectFile);
  }
  const int64_t before = newestRun(store);
  std::vector<std::string> args = {cli, "train", projectFile, "--db", store, "--quiet", "--name", project.name};
  if (maxSteps > 0) args.insert(args.end(), {"--steps", std::to_string(maxSteps)});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, 1, logFile.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&files, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);  // its own group: a stop reaches mpirun and the workers
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, cli.c_str(), &files, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attr);
  if (rc != 0)
    throw ml::UserError("cannot start " + cli + " to train the " + std::to_string(project.distribute.workers) +
                        " workers: " + std::strerror(rc) + " (install mirrorlab-cli beside the studio)");

  WorkersRun out;
  int64_t lastStep = 0;
  size_t epochsSent = 0;
  bool started = false, exited = false, stopSent = false;
  int status = 0;
  // One look at the store: the run once it exists, then whatever it committed since the last look.
  auto follow = [&] {
    if (!out.runId) {
      for (const auto& r : ml::RunStore::open(store).listRuns())
        if (r.id > before && r.name == project.name) out.runId = std::min(out.runId.value_or(r.id), r.id);
      if (!out.runId) return;
    }
    auto rs = ml::RunStore::open(store);
    const ml::RunDetail d = rs.loadRun(*out.runId);
    if (!started) {
      hub.publish(startedFromStore(d));
      started = true;
    }
    // Utilization per device over the steps of this look (compute time / step time), as the
    // trainer samples it: the store keeps the steps' phases, not its samples.
    std::vector<double> compute;
    double wall = 0, at = 0;
    for (auto& st : rs.loadSteps(*out.runId, lastStep + 1, std::numeric_limits<int64_t>::max())) {
      lastStep = st.step;
      wall += st.stepTime;
      at = st.wallTime;
      for (const auto& r : st.replicas) {
        if (r.replica >= static_cast<int>(compute.size())) compute.resize(static_cast<size_t>(r.replica) + 1, 0.0);
        compute[static_cast<size_t>(r.replica)] += r.phases.compute();
      }
      hub.publish(st);
    }
    for (size_t r = 0; r < compute.size() && wall > 0; ++r) {
      ml::DeviceSample ds;
      ds.wallTime = at;
      ds.device = static_cast<int>(r);
      ds.utilization = std::min(1.0, compute[r] / wall);
      hub.publish(ds);
    }
    for (; epochsSent < d.epochs.size(); ++epochsSent) hub.publish(d.epochs[epochsSent]);
  };
  while (!exited) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const pid_t w = waitpid(pid, &status, WNOHANG);
    exited = w == pid || (w < 0 && errno == ECHILD);
    if (cancel.load() && !stopSent) {
      kill(-pid, SIGTERM);  // mpirun and the workers: worker 1 records the run stopped
      stopSent = true;
    }
    try {
      follow();
    } catch (const std::exception&) {
      // The store is being created, migrated or written by worker 1: look again at the next tick
      // (the last look, after the workers ended, reports a lasting problem).
    }
  }
  follow();
  const std::string log = readFile(logFile);
  fs::remove_all(dir, ec);
  if (!out.runId) {
    std::string msg = log;
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    if (msg.rfind("error: ", 0) == 0) msg = msg.substr(7);
    throw ml::UserError(msg.empty() ? "the workers recorded no run (mirrorlab-cli exited " +
                                          std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")"
                                    : msg);
  }
  const ml::RunDetail d = ml::RunStore::open(store).loadRun(*out.runId);
  out.finished.status = statusOf(d.summary.status);
  if (out.finished.status == ml::RunStatus::Running) {  // worker 1 died before marking it
    out.finished.status = ml::RunStatus::Failed;
    out.finished.message = "the workers ended without finishing the run: " + log;
  } else {
    out.finished.message = d.error;
  }
  out.finished.seconds = d.seconds.value_or(0);
  out.finished.steps = d.steps.value_or(lastStep);
  out.finished.finalValLoss = d.summary.finalValLoss;
  out.finished.finalValMetric = d.summary.finalValMetric;
  hub.publish(out.finished);
  return out;
}

}  // namespace mlui
