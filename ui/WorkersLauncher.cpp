#include "WorkersLauncher.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "Error.h"
#include "telemetry/EventJson.h"

extern char** environ;

namespace mlui {

namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The reading end of the events pipe, opened before the workers start (so that worker 1's open of
// it does not wait) and never blocking: each look takes the complete lines written since the last.
class EventsPipe {
 public:
  explicit EventsPipe(const std::string& path) {
    if (mkfifo(path.c_str(), 0600) != 0)
      throw ml::UserError("cannot create the pipe " + path + " for the workers' events: " + std::strerror(errno));
    fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK);
    if (fd_ < 0) throw ml::UserError("cannot open the pipe " + path + " for the workers' events: " + std::strerror(errno));
    fcntl(fd_, F_SETPIPE_SZ, 1 << 20);  // room for a second of a fast run's steps between looks
  }
  ~EventsPipe() { ::close(fd_); }
  EventsPipe(const EventsPipe&) = delete;
  EventsPipe& operator=(const EventsPipe&) = delete;

  std::vector<std::string> lines() {
    char buf[1 << 16];
    for (ssize_t n; (n = ::read(fd_, buf, sizeof buf)) > 0;) pending_.append(buf, static_cast<size_t>(n));
    std::vector<std::string> out;
    size_t from = 0;
    for (size_t nl; (nl = pending_.find('\n', from)) != std::string::npos; from = nl + 1)
      out.push_back(pending_.substr(from, nl - from));
    pending_.erase(0, from);
    return out;
  }

 private:
  int fd_ = -1;
  std::string pending_;  // a line not yet complete
};

pid_t spawnCli(const std::vector<std::string>& args, const std::string& logFile) {
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
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
  const int rc = posix_spawn(&pid, args[0].c_str(), &files, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attr);
  if (rc != 0)
    throw ml::UserError("cannot start " + args[0] + ": " + std::strerror(rc) + " (install mirrorlab-cli beside the studio)");
  return pid;
}

std::string trimmedLog(std::string msg) {
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  if (msg.rfind("error: ", 0) == 0) msg = msg.substr(7);
  return msg;
}

// Worker 1's events as they arrive: published on the hub, and what the run's end needs kept.
struct Relay {
  ml::TelemetryHub& hub;
  WorkersRun out;
  bool started = false, ended = false;
  void take(const std::vector<std::string>& lines) {
    for (const auto& line : lines) {
      try {
        const auto j = nlohmann::json::parse(line);
        if (const auto id = ml::recordedRunIn(j)) {
          out.runId = id;
          continue;
        }
        const ml::Event e = ml::eventFromJson(j);
        started |= std::holds_alternative<ml::RunStarted>(e);
        if (const auto* f = std::get_if<ml::RunFinished>(&e)) {
          out.finished = *f;
          ended = true;
        }
        hub.publish(e);
      } catch (const std::exception&) {
        // Not an event (another version of mirrorlab-cli): the dashboard misses it, the store has it.
      }
    }
  }
};

// The run as the studio reports it: the end worker 1 published, or why there is none.
WorkersRun ending(Relay& relay, const std::string& log, int exitCode) {
  if (!relay.started)
    throw ml::UserError(log.empty() ? "the workers did not start the run (mirrorlab-cli exited " + std::to_string(exitCode) + ")"
                                    : log);
  WorkersRun out = std::move(relay.out);
  if (!relay.ended) {  // worker 1 died before the run's end: the store marks it interrupted
    out.finished.status = ml::RunStatus::Failed;
    out.finished.message = "the workers ended without finishing the run: " + log;
    relay.hub.publish(out.finished);
  } else if (exitCode != 0 && out.finished.status == ml::RunStatus::Finished) {
    out.error = log;  // the run ended, then the store or the weights failed
  }
  return out;
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

WorkersRun runWorkers(const std::string& cli, const ml::Project& project, const std::string& store, int64_t maxSteps,
                      ml::TelemetryHub& hub, const std::atomic<bool>& cancel) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir = fs::temp_directory_path(ec) / ("mirrorlab-workers-" + std::to_string(::getpid()));
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  const std::string projectFile = (dir / "project.json").string(), logFile = (dir / "cli.log").string(),
                    eventsFile = (dir / "events").string();
  {
    std::ofstream out(projectFile);
    out << project.toJson().dump(2) << "\n";
    if (!out) throw ml::UserError("cannot write the project for the workers to " + projectFile);
  }
  EventsPipe events(eventsFile);
  std::vector<std::string> args = {cli,      "train",      projectFile, "--db",     store,           "--quiet",
                                   "--name", project.name, "--events",  eventsFile, "--keep-weights"};
  if (maxSteps > 0) args.insert(args.end(), {"--steps", std::to_string(maxSteps)});
  const pid_t pid = spawnCli(args, logFile);
  Relay relay{hub};
  int status = 0;
  for (bool exited = false, stopSent = false; !exited;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const pid_t w = waitpid(pid, &status, WNOHANG);
    exited = w == pid || (w < 0 && errno == ECHILD);
    if (cancel.load() && !stopSent) {
      kill(-pid, SIGTERM);  // mpirun and the workers: worker 1 records the run stopped
      stopSent = true;
    }
    relay.take(events.lines());
  }
  relay.take(events.lines());
  const std::string log = trimmedLog(readFile(logFile));
  fs::remove_all(dir, ec);
  return ending(relay, log, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

}  // namespace mlui
