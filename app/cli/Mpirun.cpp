// `train --workers W`: this command again as W workers under mpirun, and what is left to say
// when worker 1 could not (a lost host, a killed worker 1).
#include "Mpirun.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <thread>

#include "Commands.h"
#include "Error.h"
#include "WorkerHosts.h"

namespace mlcli {

namespace {
// Waits for mpirun; once worker 1 has written its exit status, for at most kMpirunGrace seconds
// more: mpirun waits on its daemons, and one on a host that vanished (a cut link) does not answer
// for minutes. mpirun is then stopped (SIGTERM, SIGKILL); the workers on a lost host end on their
// own after --worker-timeout. Returns mpirun's wait status.
int waitForMpirun(pid_t child, const char* statusPath) {
  constexpr double kMpirunGrace = 10;
  std::optional<std::chrono::steady_clock::time_point> reported;
  bool termSent = false;
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(child, &status, WNOHANG);
    if (r == child || (r < 0 && errno != EINTR)) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!reported) {
      std::ifstream in(statusPath);
      int rc = -1;
      if (in >> rc) reported = std::chrono::steady_clock::now();
      continue;
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - *reported).count();
    if (waited > kMpirunGrace && !termSent) {
      std::fprintf(stderr,
                   "note: mpirun had not ended %.0f s after worker 1 had (it waits on the lost worker's host); stopping it\n",
                   kMpirunGrace);
      kill(child, SIGTERM);
      termSent = true;
    } else if (waited > kMpirunGrace + 5) {
      kill(child, SIGKILL);
    }
  }
}

}  // namespace

// --workers W: this command again as W workers under mpirun, as a child: mpirun started with
// --enable-recovery exits 0 whatever its workers did, so worker 1 writes its exit status to a file
// this process reads back (MIRRORLAB_WORKERS_STATUS).
int relaunchUnderMpirun(int workers, const MpirunLaunch& a) {
  const auto& argv = commandLine();
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  const std::string self = n > 0 ? std::string(exe, static_cast<size_t>(n)) : argv.at(0);
  // Hosts that cannot be reached or run another Mirrorlab are named now, not by mpirun's own
  // messages or a start-up that never completes.
  if (const std::string hostfile = hostfileInEffect(a.hostfile); !hostfile.empty())
    checkWorkerHosts(hostfile, self, a.workerTimeout);
  char statusPath[] = "/tmp/mirrorlab-workers-XXXXXX";
  const int fd = mkstemp(statusPath);
  if (fd < 0) throw ml::UserError("--workers: cannot create a temporary file in /tmp for the workers' exit status");
  close(fd);
  setenv("MIRRORLAB_WORKERS_STATUS", statusPath, 1);
  // --enable-recovery: a worker that dies does not take the others down at once, so they name it
  // (after --worker-timeout) and worker 1 records the run failed with that reason.
  std::vector<std::string> args = {"mpirun", "-np", std::to_string(workers), "--enable-recovery", "-x",
                                   "MIRRORLAB_WORKERS_STATUS",
                                   // A worker's replicas are threads: not all bound to one core (Open MPI binds each process to a
                                   // core when there are two or fewer).
                                   "--bind-to", "none"};
  // A slot per hardware thread; more workers than that only when asked for: oversubscribed, Open
  // MPI yields the core in every wait, which made a 2.7 MB sum 2-5x slower here.
  args.push_back(workers > static_cast<int>(std::thread::hardware_concurrency()) ? "--oversubscribe" : "--use-hwthread-cpus");
  if (geteuid() == 0) args.push_back("--allow-run-as-root");
  if (!a.hostfile.empty()) args.insert(args.end(), {"--hostfile", a.hostfile});
  // When a worker ends badly Open MPI stops the others with SIGTERM, then SIGKILL after this many
  // seconds (default 1): time for worker 1 to record the run failed with the reason.
  if (!std::getenv("OMPI_MCA_odls_base_sigkill_timeout")) args.insert(args.end(), {"--mca", "odls_base_sigkill_timeout", "10"});
  args.push_back(self);
  // --workers stays: under mpirun it is checked against the number of workers started.
  for (size_t i = 1; i < argv.size(); ++i) args.push_back(argv[i]);
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  const int64_t newestBefore = a.store.empty() ? 0 : newestRunId(a.store);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t child = fork();
  if (child == 0) {
    execvp("mpirun", cargs.data());
    std::fprintf(stderr,
                 "error: --workers %d starts the workers with mpirun, which was not found: install Open MPI "
                 "(scripts/deps.sh installs openmpi-bin) or start them yourself with mpirun -np W mirrorlab-cli train ...\n",
                 workers);
    std::_Exit(127);
  }
  // Ctrl-C reaches mpirun and the workers (one process group): mpirun stops them; this one waits.
  auto oldInt = std::signal(SIGINT, SIG_IGN);
  const int status = waitForMpirun(child, statusPath);
  std::signal(SIGINT, oldInt);
  std::ifstream in(statusPath);
  int rc = -1;
  in >> rc;
  std::remove(statusPath);
  const int mpirunRc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  if (mpirunRc == 127 && rc < 0) return 2;  // mpirun missing: said above
  if (rc >= 0) return rc != 0 ? rc : mpirunRc;
  // Worker 1 was stopped before it could record: its run is stored failed from here (its host).
  const std::string lost = a.store.empty() ? std::string() : recordLostLead(a.store, newestBefore, a.resume, workers);
  if (!lost.empty())
    std::fprintf(stderr, "error: %s\n", lost.c_str());
  else
    std::fprintf(stderr, "error: worker 1 ended without an exit status (killed?); mpirun exited %d\n", mpirunRc);
  return 1;
}

}  // namespace mlcli
