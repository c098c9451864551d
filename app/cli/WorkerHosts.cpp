// The hosts of a multi-worker run, checked before mpirun starts them (reachable with the launch
// agent, the same Mirrorlab) and at start-up by the workers themselves (the same Mirrorlab,
// devices, data and project), every refusal naming the host and the fix.
#include "WorkerHosts.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "Error.h"
#include "JsonFile.h"
#include "store/RunStore.h"
#include "train/Checkpoint.h"

namespace mlcli {

std::string versionLine() { return "mirrorlab-cli " MIRRORLAB_VERSION; }

std::string hostfileInEffect(const std::string& given) {
  if (!given.empty()) return given;
  const char* env = std::getenv("OMPI_MCA_orte_default_hostfile");
  return env && *env ? env : "";
}

std::vector<std::string> hostfileHosts(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw ml::UserError("the hostfile " + path + " cannot be read: give an existing file (one host a line, e.g. node1 slots=1)");
  std::vector<std::string> hosts;
  std::string line;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string host;
    if (words >> host && std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
  }
  if (hosts.empty()) throw ml::UserError("the hostfile " + path + " names no host: one host a line, e.g. node1 slots=1");
  return hosts;
}

namespace {

// The launch agent as Open MPI will use it: its first choice, split into words.
std::vector<std::string> launchAgent(double timeoutSeconds) {
  const char* env = std::getenv("OMPI_MCA_plm_rsh_agent");
  std::string agent = env && *env ? env : "ssh";
  agent = agent.substr(0, agent.find(':'));
  std::vector<std::string> words;
  std::istringstream in(agent);
  for (std::string w; in >> w;) words.push_back(w);
  if (words.empty()) words.push_back("ssh");
  if (words.front() == "ssh" || words.front().ends_with("/ssh")) {
    // No password prompt to hang on, and a connection that does not come is given up.
    for (const char* o : {"-o", "BatchMode=yes", "-o"}) words.emplace_back(o);
    words.push_back("ConnectTimeout=" + std::to_string(std::max(1, static_cast<int>(timeoutSeconds))));
  }
  return words;
}

struct Probe {
  std::string host;
  pid_t pid = -1;
  int out = -1;  // stdout and stderr together
  std::string text;
  int status = -1;
  bool timedOut = false;
};

// Starts `agent host exe --version` with its output on a pipe.
void start(Probe& p, const std::vector<std::string>& agent, const std::string& exe) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw ml::UserError(std::string("cannot check the hosts: pipe: ") + std::strerror(errno));
  std::vector<std::string> args = agent;
  args.push_back(p.host);
  args.push_back(exe);
  args.emplace_back("--version");
  p.pid = fork();
  if (p.pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    setpgid(0, 0);  // its own group: a timeout stops the agent and what it started
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    std::fprintf(stderr, "%s: %s\n", argv[0], std::strerror(errno));
    std::_Exit(127);
  }
  close(fds[1]);
  p.out = fds[0];
}

// Reads every probe's output until each ends or the deadline passes (then it is stopped).
void finish(std::vector<Probe>& probes, double timeoutSeconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutSeconds);
  for (;;) {
    std::vector<pollfd> fds;
    for (auto& p : probes)
      if (p.out >= 0) fds.push_back({p.out, POLLIN, 0});
    if (fds.empty()) break;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) break;
    if (poll(fds.data(), fds.size(), static_cast<int>(std::min<long long>(left, 200))) < 0 && errno != EINTR) break;
    for (auto& p : probes) {
      if (p.out < 0) continue;
      char buf[512];
      const ssize_t n = read(p.out, buf, sizeof buf);
      if (n > 0 && p.text.size() < 4096) p.text.append(buf, static_cast<size_t>(n));
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        close(p.out);
        p.out = -1;
      }
    }
  }
  for (auto& p : probes) {
    if (p.out >= 0) {  // still running at the deadline
      p.timedOut = true;
      kill(-p.pid, SIGKILL);
      close(p.out);
      p.out = -1;
    }
    int st = 0;
    while (waitpid(p.pid, &st, 0) < 0 && errno == EINTR) {
    }
    p.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  }
}

std::string lastLine(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  const auto nl = text.rfind('\n');
  return nl == std::string::npos ? text : text.substr(nl + 1);
}

bool isThisHost(const std::string& host) {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  const std::string me = name;
  return host == me || host == "localhost" || host == "127.0.0.1" || host.rfind(me + ".", 0) == 0;
}

}  // namespace

void checkWorkerHosts(const std::string& hostfile, const std::string& exe, double timeoutSeconds) {
  const auto agent = launchAgent(timeoutSeconds);
  std::vector<Probe> probes;
  for (const auto& h : hostfileHosts(hostfile))
    if (!isThisHost(h)) probes.push_back({h});
  if (probes.empty()) return;
  for (auto& p : probes) start(p, agent, exe);
  finish(probes, timeoutSeconds);
  for (const auto& p : probes) {
    const std::string said = lastLine(p.text);
    if (p.timedOut)
      throw ml::UserError("host " + p.host + " (hostfile " + hostfile + ") did not answer " + agent.front() + " within " +
                          std::to_string(static_cast<int>(timeoutSeconds)) +
                          " s (--worker-timeout): check that it is up and reachable (" + agent.front() + " " + p.host +
                          " true), or remove it from the hostfile");
    if (p.status == 255 || (p.status != 0 && p.status != 127 && said.find("mirrorlab-cli") == std::string::npos))
      throw ml::UserError("host " + p.host + " (hostfile " + hostfile + ") cannot be reached with " + agent.front() + ": " +
                          (said.empty() ? "exit " + std::to_string(p.status) : said) + ". Check its name and that `" +
                          agent.front() + " " + p.host +
                          " true` works without a password (mpirun starts the workers that way), or remove it from the "
                          "hostfile");
    if (p.status != 0 || said.rfind("mirrorlab-cli ", 0) != 0)
      throw ml::UserError("host " + p.host + " has no Mirrorlab at " + exe + " (" + (said.empty() ? "no answer" : said) +
                          "): install the same Mirrorlab at the same path on every host");
    if (said != versionLine())
      throw ml::UserError("host " + p.host + " runs " + said + ", this host " + versionLine() +
                          ": install the same Mirrorlab on every host (the workers must compute alike)");
  }
}

void checkWorkersAgree(ml::WorkerGroup& group, const ml::Project& p, int64_t trainSamples, const std::string& projectPath) {
  const nlohmann::json mine{{"version", versionLine()},
                            {"devices", p.distribute.devices.spec},
                            {"samples", trainSamples},
                            {"data", p.data.path},
                            {"project", std::to_string(std::hash<std::string>{}(p.toJson().dump()))}};
  const auto all = group.allGather(mine.dump(), "the comparison of the workers' projects");
  const auto first = nlohmann::json::parse(all[0], nullptr, false);
  const std::string one = workerOnHost(group, 0);
  for (size_t w = 1; w < all.size(); ++w) {
    const auto other = nlohmann::json::parse(all[w], nullptr, false);
    const std::string them = workerOnHost(group, static_cast<int>(w));
    const std::string host = group.hosts().size() > w ? group.hosts()[w] : them;
    auto field = [&](const nlohmann::json& j, const char* k) { return j.is_object() && j.contains(k) ? j[k].dump() : "?"; };
    if (!other.is_object() || field(other, "version") != field(first, "version"))
      throw ml::UserError(them + " runs " + (other.is_object() ? other.value("version", "?") : "another program") + ", " + one +
                          " runs " + versionLine() + ": install the same Mirrorlab on every host");
    if (field(other, "devices") != field(first, "devices"))
      throw ml::UserError("the workers do not train the same thing: " + one + " has devices " + first.value("devices", "") +
                          ", " + them + " has devices " + other.value("devices", "") +
                          ": run the same command with the same devices on every worker");
    if (field(other, "samples") != field(first, "samples"))
      throw ml::UserError("the workers do not train the same thing: " + one + " reads " + field(first, "samples") +
                          " training samples, " + them + " reads " + field(other, "samples") + " from " +
                          other.value("data", std::string("its data set")) + ": put the same data set at " +
                          first.value("data", std::string("the same path")) + " on " + host);
    if (field(other, "project") != field(first, "project"))
      throw ml::UserError("the workers do not train the same thing: " + them + " read another project" +
                          (projectPath.empty() ? std::string() : " from " + projectPath) + " than " + one +
                          (projectPath.empty()
                               ? std::string(": run the same command on every worker")
                               : ": copy " + projectPath + " from " + (group.hosts().empty() ? "host 1" : group.hosts()[0]) +
                                     " to the same path on " + host + " (every host reads the project there)"));
  }
}

ml::ResumeSource resumeAcrossWorkers(ml::WorkerGroup& group, const std::function<ml::ResumeSource()>& find) {
  const bool lead = group.rank() == 0;
  ml::ResumeSource src;
  std::string refused, payload;
  if (lead) {
    try {
      src = find();
      std::ifstream in(src.checkpointPath, std::ios::binary);
      std::ostringstream bytes;
      bytes << in.rdbuf();
      if (!in) throw ml::UserError("cannot read the checkpoint " + src.checkpointPath + " to hand it to the other workers");
      // The project's JSON, a NUL, then the checkpoint file as it is.
      payload =
          nlohmann::json{
              {"project", src.project.toJson()}, {"run", src.runId}, {"name", src.runName}, {"path", src.checkpointPath}}
              .dump() +
          std::string(1, '\0') + bytes.str();
    } catch (const ml::UserError& e) {
      refused = e.what();
    }
  }
  const auto why = group.allGather(refused, "the start of the resumed run");
  if (!why[0].empty()) throw ml::UserError(why[0]);
  const std::string got = group.allGather(lead ? payload : std::string(), "the hand-over of the checkpoint")[0];
  if (lead) return src;
  const size_t nul = got.find('\0');
  const auto head = ml::parseJsonOrDiscarded(got.substr(0, nul));
  if (nul == std::string::npos || !head.is_object())
    throw ml::UserError("the checkpoint worker 1 handed over arrived damaged (" + std::to_string(got.size()) + " bytes)");
  src.runId = head.value("run", int64_t{0});
  src.runName = head.value("name", std::string());
  src.checkpointPath = head.value("path", std::string());
  src.project = ml::Project::fromJson(head["project"], "run " + std::to_string(src.runId) + "'s project");
  // loadCheckpoint reads a file (and checks its checksum): a private copy, removed at once.
  char tmp[] = "/tmp/mirrorlab-resume-XXXXXX";
  const int fd = mkstemp(tmp);
  if (fd < 0) throw ml::UserError(std::string("cannot write the handed-over checkpoint to /tmp: ") + std::strerror(errno));
  const std::string bytes = got.substr(nul + 1);
  const bool written = write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
  close(fd);
  try {
    if (!written) throw ml::UserError("cannot write the handed-over checkpoint to " + std::string(tmp));
    src.checkpoint = ml::loadCheckpoint(tmp);
  } catch (...) {
    std::remove(tmp);
    throw;
  }
  std::remove(tmp);
  return src;
}

namespace {
std::string recordLostLeadIn(ml::RunStore&& rs, int64_t newestBefore, std::optional<int64_t> resumed, int workers);
}  // namespace

int64_t newestRunId(const std::string& store) {
  std::error_code ec;
  if (store.empty() || !std::filesystem::exists(store, ec)) return 0;
  int64_t most = 0;
  for (const auto& r : ml::RunStore::open(store).listRuns()) most = std::max(most, r.id);
  return most;
}

std::string recordLostLead(const std::string& store, int64_t newestBefore, std::optional<int64_t> resumed, int workers) {
  std::error_code ec;
  if (store.empty() || !std::filesystem::exists(store, ec)) return {};
  try {
    return recordLostLeadIn(ml::RunStore::open(store), newestBefore, resumed, workers);
  } catch (const std::exception&) {
    return {};  // the store cannot be opened now: the next command finds the run interrupted
  }
}

namespace {
// The run worker 1 left (running, or marked interrupted, with its steps, when the store was
// opened), stored failed with what is known.
std::string recordLostLeadIn(ml::RunStore&& rs, int64_t newestBefore, std::optional<int64_t> resumed, int workers) {
  std::optional<ml::RunSummary> run;
  for (const auto& r : rs.listRuns())
    if ((resumed ? r.id == *resumed : r.id > newestBefore) && (r.status == "running" || r.status == "interrupted") &&
        (!run || r.id < run->id))
      run = r;
  if (!run) return {};
  const ml::RunDetail d = rs.loadRun(run->id);
  const std::string lead = ml::workerName(0, workers) + (d.hosts.empty() ? std::string() : " on host " + d.hosts.front());
  std::string others;
  for (int w = 1; w < workers; ++w)
    others += (others.empty() ? "" : ", ") + ml::workerName(w, workers) +
              (static_cast<size_t>(w) < d.hosts.size() ? " on host " + d.hosts[static_cast<size_t>(w)] : std::string());
  const std::string msg = lead +
                          " ended before it recorded how the run ended: Open MPI stops a worker whose connection to "
                          "another breaks while it sends, so " +
                          (workers == 2 ? others + " was" : "one of " + others + " was") +
                          " probably killed or its host lost. Resume the run with mirrorlab-cli train --resume " +
                          std::to_string(run->id);
  rs.finishRun(run->id, ml::RunStatus::Failed, msg);
  return msg + " (run " + std::to_string(run->id) + " is stored failed)";
}
}  // namespace

}  // namespace mlcli
