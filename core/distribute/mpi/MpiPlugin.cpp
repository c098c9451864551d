// libmirrorlab_mpi.so: the worker group on Open MPI, behind a small C ABI (MpiPluginApi.h) so that
// mirrorlab-cli links no MPI library and runs without one; MpiWorkers.cpp loads it only when
// mpirun started the process.
//
// Every collective is non-blocking (MPI_Iallreduce, MPI_Ibcast, MPI_Iallgatherv) and completed by
// polling MPI_Test against a deadline, so a worker that died, hangs or was stopped ends the wait
// with a message instead of a hang. To name that worker, every worker sends a heartbeat (its
// collective count and where it is: "backward of step 12") to the others on its own communicator
// every 200 ms; the worker whose count is behind, whose heartbeats stopped, or whose heartbeats
// arrive with long gaps (a lossy link), is the one named, with its host.
#define OMPI_SKIP_MPICXX 1
#include <dlfcn.h>
#include <mpi.h>
#include <unistd.h>
#if MLMPI_HAVE_PMIX
#include <pmix.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "distribute/mpi/MpiPluginApi.h"

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

constexpr double kBeatSeconds = 0.2;
constexpr int kBeatTag = 17;
constexpr int64_t kChunk = int64_t{1} << 28;  // elements per MPI call (counts are int)

struct Peer {
  double lastSeen = 0;  // steady seconds of the last heartbeat
  int64_t calls = 0;    // collectives it had entered
  std::string where;    // its progress
  // (arrival time, gap since the one before) of its recent heartbeats: long gaps where one is
  // sent every kBeatSeconds mean packets between the two hosts are lost or held up.
  std::deque<std::pair<double, double>> gaps;
};

// Heartbeat gaps longer than this (4 periods and a margin for a loaded machine) are late.
constexpr double kLateGap = 4 * kBeatSeconds + 0.3;

struct State {
  MPI_Comm comm = MPI_COMM_NULL;  // the collectives
  MPI_Comm beat = MPI_COMM_NULL;  // the heartbeats
  int rank = 0, size = 1;
  double timeout = 30;
  std::vector<std::string> hosts;
  std::string engine;
  std::atomic<int64_t> calls{0};
  std::mutex mu;  // guards where, peers, interrupted
  std::string where = "start-up";
  std::vector<Peer> peers;
  std::string interrupted;
  std::atomic<bool> hasInterrupt{false};
  std::atomic<bool> stop{false};
  std::atomic<double> waitingSince{0};  // steady seconds a collective began waiting; 0: none
  double spin = 0.05;                   // seconds a wait polls without pause (waitFor)
  std::thread heart;
  // (time, TCP segments sent, of them sent again) of this host's network stack, sampled by the
  // heartbeat: many resent segments while a collective waits mean packets are being lost.
  std::deque<std::tuple<double, long long, long long>> tcp;
};

State* g = nullptr;

void setError(char* err, size_t len, const std::string& msg) {
  if (!err || len == 0) return;
  const size_t n = std::min(len - 1, msg.size());
  std::memcpy(err, msg.data(), n);
  err[n] = '\0';
}

std::string mpiError(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, buf, &len);
  return std::string(buf, static_cast<size_t>(len));
}

// "worker 2 of 4 on host node2": every message names the host, where the fault is looked for.
std::string workerName(int rank) {
  std::string name = "worker " + std::to_string(rank + 1) + " of " + std::to_string(g->size);
  if (rank >= 0 && static_cast<size_t>(rank) < g->hosts.size()) name += " on host " + g->hosts[static_cast<size_t>(rank)];
  return name;
}

std::string secondsText(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f s", s);
  return b;
}

// OutSegs and RetransSegs of this network namespace's TCP (/proc/net/snmp); false if unreadable.
bool readTcpCounters(long long& out, long long& resent) {
  std::ifstream f("/proc/net/snmp");
  std::string names, values;
  while (std::getline(f, names) && std::getline(f, values))
    if (names.rfind("Tcp:", 0) == 0) {
      std::istringstream n(names), v(values);
      std::string name, value;
      int found = 0;
      while (n >> name && v >> value) {
        if (name == "OutSegs") out = std::atoll(value.c_str()), ++found;
        if (name == "RetransSegs") resent = std::atoll(value.c_str()), ++found;
      }
      return found == 2;
    }
  return false;
}

// Sends this worker's heartbeat to every other worker and reads theirs.
void heartbeat() {
  std::vector<char> in(512);
  double nextSend = 0;
  while (!g->stop.load()) {
    const double t = now();
    if (t >= nextSend) {
      std::string msg;
      {
        std::lock_guard lock(g->mu);
        msg = std::to_string(g->calls.load()) + "|" + g->where;
      }
      msg.resize(std::min<size_t>(msg.size(), in.size() - 1));
      for (int r = 0; r < g->size; ++r) {
        if (r == g->rank) continue;
        MPI_Request req;
        if (MPI_Isend(msg.data(), static_cast<int>(msg.size()), MPI_CHAR, r, kBeatTag, g->beat, &req) == MPI_SUCCESS)
          MPI_Request_free(&req);  // small and eager: completes on its own
      }
      nextSend = t + kBeatSeconds;
      long long out = 0, resent = 0;
      if (readTcpCounters(out, resent)) {
        std::lock_guard lock(g->mu);
        g->tcp.emplace_back(t, out, resent);
        while (g->tcp.size() > 2 && std::get<0>(g->tcp[1]) < t - g->timeout - 1) g->tcp.pop_front();
      }
    }
    for (;;) {
      int flag = 0;
      MPI_Status st;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kBeatTag, g->beat, &flag, &st) != MPI_SUCCESS || !flag) break;
      int count = 0;
      MPI_Get_count(&st, MPI_CHAR, &count);
      count = std::min<int>(count, static_cast<int>(in.size()));
      MPI_Recv(in.data(), count, MPI_CHAR, st.MPI_SOURCE, kBeatTag, g->beat, MPI_STATUS_IGNORE);
      const std::string text(in.data(), static_cast<size_t>(count));
      const auto bar = text.find('|');
      std::lock_guard lock(g->mu);
      Peer& p = g->peers[static_cast<size_t>(st.MPI_SOURCE)];
      const double at = now();
      if (p.lastSeen > 0) p.gaps.emplace_back(at, at - p.lastSeen);
      while (!p.gaps.empty() && (p.gaps.size() > 256 || p.gaps.front().first < at - std::max(g->timeout, 5.0)))
        p.gaps.pop_front();
      p.lastSeen = at;
      p.calls = std::atoll(text.substr(0, bar).c_str());
      p.where = bar == std::string::npos ? std::string() : text.substr(bar + 1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// The longest gap between a peer's heartbeats within the last `window` seconds, counting the
// silence since its last one (called with g->mu held).
double longestGap(const Peer& p, double t, double window) {
  double worst = p.lastSeen > 0 ? t - p.lastSeen : 0;
  for (const auto& [at, gap] : p.gaps)
    if (at >= t - window) worst = std::max(worst, gap);
  return worst;
}

// Over about the last `window` seconds (called with g->mu held): "R of S TCP segments ... (P%)"
// when many of the segments this host sent were sent again, else "".
std::string lossSeen(double t, double window) {
  if (g->tcp.size() < 2) return {};
  auto first = g->tcp.begin();
  while (std::next(first) != g->tcp.end() && std::get<0>(*std::next(first)) <= t - window) ++first;
  const auto& [t0, out0, re0] = *first;
  const auto& [t1, out1, re1] = g->tcp.back();
  const long long sent = out1 - out0, again = re1 - re0;
  if (again < 10 || static_cast<double>(again) < 0.02 * static_cast<double>(sent)) return {};
  char b[200];
  std::snprintf(b, sizeof b, "%lld of the %lld TCP segments this host sent in the last %.1f s were sent again (%.0f%%)", again,
                sent, t1 - t0, 100.0 * static_cast<double>(again) / static_cast<double>(std::max(sent, 1LL)));
  return b;
}

// Why `what` did not complete: the worker that is gone, behind a lossy link, or stuck.
std::string diagnose(const std::string& what, int64_t myCall) {
  std::lock_guard lock(g->mu);
  const double t = now();
  const std::string here = "host " + g->hosts[static_cast<size_t>(g->rank)];
  const std::string lost = lossSeen(t, g->timeout + 1);
  std::string out;
  for (int r = 0; r < g->size; ++r) {
    if (r == g->rank) continue;
    const Peer& p = g->peers[static_cast<size_t>(r)];
    const double silent = t - p.lastSeen;
    const double gap = longestGap(p, t, g->timeout);
    std::string line;
    if (p.lastSeen == 0)
      line = workerName(r) + " never answered (no heartbeat since start-up): it did not start or its host is unreachable";
    else if (silent > 5 * kBeatSeconds + 1.0)
      line = workerName(r) + " stopped answering " + secondsText(silent) + " ago (last seen in " + p.where +
             "): it died, was killed, or its host is unreachable";
    else if ((!lost.empty() && p.calls < myCall) || gap > kLateGap)
      // Its heartbeats come through the same lossy connection as the sums, late: what they say is old.
      line = workerName(r) + " answers, but late (heartbeat gaps up to " + secondsText(gap) + ", one is sent every " +
             secondsText(kBeatSeconds) + "; the last said " + p.where + "): packets between " + here +
             " and it are lost or held up";
    else if (p.calls < myCall)
      line = workerName(r) + " is alive but has not reached " + what + ": it is stuck in " + p.where;
    if (!line.empty()) out += (out.empty() ? "" : "; ") + line;
  }
  if (out.empty() && !lost.empty()) {  // every worker reached it: the link with the longest silences
    int worst = -1;
    double worstGap = -1;
    for (int r = 0; r < g->size; ++r)
      if (r != g->rank && longestGap(g->peers[static_cast<size_t>(r)], t, g->timeout) > worstGap)
        worst = r, worstGap = longestGap(g->peers[static_cast<size_t>(r)], t, g->timeout);
    if (worst >= 0)
      out = "every worker reached it, but packets between " + here + " and " + workerName(worst) +
            " are lost or held up (its heartbeat gaps up to " + secondsText(worstGap) + ", one is sent every " +
            secondsText(kBeatSeconds) + ")";
  }
  if (out.empty()) {  // no evidence of loss or a stuck worker: name the connections it waits on
    std::string peers;
    for (int r = 0; r < g->size; ++r)
      if (r != g->rank) peers += (peers.empty() ? "" : ", ") + workerName(r);
    out = "every worker reached it and answers, so the network or MPI stopped making progress between " + here + " and " + peers +
          " (a link that loses or holds up packets does this before its losses show)";
  }
  std::string msg = what + " did not complete within " + secondsText(g->timeout) + " (--worker-timeout): " + out;
  if (!lost.empty()) msg += "; " + lost + ": a lossy link (check the links between the hosts, or raise --worker-timeout)";
  return msg;
}

// The workers whose heartbeats stopped (more than two periods ago), for an interrupted wait.
std::string silentPeers() {
  std::lock_guard lock(g->mu);
  const double t = now();
  std::string out;
  for (int r = 0; r < g->size; ++r) {
    const Peer& p = g->peers[static_cast<size_t>(r)];
    if (r != g->rank && p.lastSeen > 0 && t - p.lastSeen > 2.2 * kBeatSeconds)
      out += (out.empty() ? "" : "; ") + workerName(r) + " stopped answering " + secondsText(t - p.lastSeen) +
             " ago (last seen in " + p.where + ")";
  }
  return out;
}

// Completes req, or returns 1 (timeout: err says who) or 2 (interrupted).
int waitFor(MPI_Request& req, const std::string& what, int64_t myCall, char* err, size_t errLen) {
  const double start = now(), deadline = start + g->timeout;
  for (;;) {
    int done = 0;
    const int rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      setError(err, errLen, what + " failed in MPI: " + mpiError(rc));
      return 1;
    }
    if (done) return 0;
    if (g->hasInterrupt.load(std::memory_order_relaxed)) {
      std::string why;
      {
        std::lock_guard lock(g->mu);
        why = g->interrupted + " (during " + what + ")";
      }
      if (const std::string silent = silentPeers(); !silent.empty()) why += ": " + silent;
      setError(err, errLen, why);
      return 2;
    }
    const double t = now();
    if (t > deadline) {
      setError(err, errLen, diagnose(what, myCall));
      return 1;
    }
    // Open MPI moves a non-blocking collective on only inside MPI_Test. Between workers of one
    // host (shared memory, where MPI_Test does the copying) it is polled without pause, as a
    // blocking MPI_Allreduce would, for g->spin seconds; a longer wait is a straggler or a lost
    // worker. Across hosts the kernel moves the bytes: a poll every 50 us keeps the sockets fed,
    // and spinning would take the core the network's own processing needs (a 2.7 MB sum over a
    // 2 Gbit/s link took 100 ms spinning, 11 ms polling, on a loaded 2-vCPU VM).
    if (t - start >= g->spin) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

template <typename Start>
int collective(const char* what, char* err, size_t errLen, Start&& start) {
  if (!g) {
    setError(err, errLen, "the MPI worker group is not started");
    return 1;
  }
  const int64_t call = g->calls.fetch_add(1) + 1;
  MPI_Request req = MPI_REQUEST_NULL;
  const int rc = start(req);
  if (rc != MPI_SUCCESS) {
    setError(err, errLen, std::string(what) + " failed in MPI: " + mpiError(rc));
    return 1;
  }
  g->waitingSince.store(now());
  const int done = waitFor(req, what, call, err, errLen);
  g->waitingSince.store(0);
  return done;
}

// Every worker's host name from Open MPI's PMIx (what mpirun's daemons know of the job), so that
// they are known before MPI's own connections between the workers are made; empty when this MPI
// has no PMIx loaded. libpmix is resolved in the process (Open MPI loaded it), not linked.
std::vector<std::string> hostsFromPmix(int size) {
#if MLMPI_HAVE_PMIX
  void* lib = dlopen("libpmix.so.2", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) return {};
  auto init = reinterpret_cast<decltype(&PMIx_Init)>(dlsym(lib, "PMIx_Init"));
  auto get = reinterpret_cast<decltype(&PMIx_Get)>(dlsym(lib, "PMIx_Get"));
  auto fini = reinterpret_cast<decltype(&PMIx_Finalize)>(dlsym(lib, "PMIx_Finalize"));
  pmix_proc_t me;
  if (!init || !get || !fini || init(&me, nullptr, 0) != PMIX_SUCCESS) return {};
  std::vector<std::string> hosts;
  for (int r = 0; r < size; ++r) {
    pmix_proc_t p;
    std::memset(&p, 0, sizeof p);
    std::memcpy(p.nspace, me.nspace, sizeof p.nspace);
    p.rank = static_cast<pmix_rank_t>(r);
    pmix_value_t* v = nullptr;
    if (get(&p, PMIX_HOSTNAME, nullptr, 0, &v) != PMIX_SUCCESS || !v || v->type != PMIX_STRING || !v->data.string) {
      hosts.clear();
      break;
    }
    hosts.emplace_back(v->data.string);  // the value (a few bytes, once) is not freed: PMIx's free is a macro
  }
  fini(nullptr, 0);
  return hosts;
#else
  (void)size;
  return {};
#endif
}

// Without PMIx: every worker's gethostname(), gathered over MPI.
int gatherHostNames(char* err, size_t errLen) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::vector<char> all(static_cast<size_t>(g->size) * 256);
  const int rc = collective("the exchange of the workers' host names", err, errLen, [&](MPI_Request& req) {
    return MPI_Iallgather(host, 256, MPI_CHAR, all.data(), 256, MPI_CHAR, g->comm, &req);
  });
  if (rc != 0) return rc;
  for (int r = 0; r < g->size; ++r) g->hosts[static_cast<size_t>(r)] = all.data() + static_cast<size_t>(r) * 256;
  return 0;
}

// The first use of MPI's own connections (mpirun's launcher was used so far, so every worker has
// started): each worker sends a byte to every other and waits for theirs until the deadline. A
// pair that cannot connect (a firewall on Open MPI's ports, no common network) is named, with
// both hosts, instead of a wait without end in the first collective.
int connectAll(char* err, size_t errLen) {
  constexpr int kTag = 18;
  const size_t n = static_cast<size_t>(g->size);
  char out = 1;
  std::vector<char> in(n);
  std::vector<MPI_Request> recv(n, MPI_REQUEST_NULL), send(n, MPI_REQUEST_NULL);
  for (int r = 0; r < g->size; ++r) {
    if (r == g->rank) continue;
    MPI_Irecv(&in[static_cast<size_t>(r)], 1, MPI_CHAR, r, kTag, MPI_COMM_WORLD, &recv[static_cast<size_t>(r)]);
    MPI_Isend(&out, 1, MPI_CHAR, r, kTag, MPI_COMM_WORLD, &send[static_cast<size_t>(r)]);
  }
  const double start = now(), deadline = start + g->timeout;
  for (;;) {
    bool all = true;
    for (size_t r = 0; r < n; ++r)
      for (MPI_Request* q : {&recv[r], &send[r]}) {
        int done = 1;
        if (*q != MPI_REQUEST_NULL) MPI_Test(q, &done, MPI_STATUS_IGNORE);
        all = all && done;
      }
    if (all) return 0;
    if (now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::microseconds(now() - start > 0.05 ? 1000 : 10));
  }
  std::string unreached;
  for (size_t r = 0; r < n; ++r)
    if (recv[r] != MPI_REQUEST_NULL || send[r] != MPI_REQUEST_NULL)
      unreached += (unreached.empty() ? "" : ", ") + workerName(static_cast<int>(r));
  setError(err, errLen,
           workerName(g->rank) + " cannot reach " + unreached + " over Open MPI's TCP connections within " +
               secondsText(g->timeout) +
               " (--worker-timeout), though every worker started: a firewall between the hosts blocks the ports Open MPI "
               "uses, or they share no network. Open the TCP ports that btl_tcp_port_min_v4 and btl_tcp_port_range_v4 "
               "set (default 1024-65535) between the hosts, or choose the network with --mca btl_tcp_if_include");
  return 1;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int mlmpi_api_version() { return MLMPI_API_VERSION; }

__attribute__((visibility("default"))) int mlmpi_init(double timeoutSeconds, char* err, size_t errLen) {
  if (g) return 0;
  // Open MPI's non-blocking all-reduce picks recursive doubling or Rabenseifner for large buffers
  // by default, which here summed the large MLP's 2.7 MB gradient in 0.58-0.77 ms; its ring takes
  // 0.25-0.33 ms (as fast as the blocking MPI_Allreduce) and gives every rank the same bits by
  // construction. A value the user set (mpirun --mca ...) wins.
  setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", 0);
  int provided = 0;
  int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  if (rc != MPI_SUCCESS) {
    setError(err, errLen, "MPI_Init_thread failed: " + mpiError(rc));
    return 1;
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    setError(err, errLen,
             "this MPI library does not support MPI_THREAD_MULTIPLE (the heartbeat runs beside the collectives): "
             "use Debian's Open MPI (openmpi-bin)");
    MPI_Finalize();
    return 1;
  }
  g = new State();
  g->timeout = timeoutSeconds;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &g->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g->size);
  g->peers.resize(static_cast<size_t>(g->size));
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int vlen = 0;
  MPI_Get_library_version(version, &vlen);
  std::string v(version, static_cast<size_t>(vlen));
  g->engine = v.substr(0, std::min(v.find(','), v.find('\n')));  // "Open MPI v4.1.4"
  g->hosts = hostsFromPmix(g->size);
  const bool named = !g->hosts.empty();
  if (!named) {  // no PMIx: the names go over MPI, after the connection check
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    g->hosts.assign(static_cast<size_t>(g->size), "");
    g->hosts[static_cast<size_t>(g->rank)] = host;
  }
  // Anything collective (even MPI_Comm_dup) waits forever for a worker that cannot be reached, so
  // the connections are tried first, against the deadline.
  if (connectAll(err, errLen) != 0) return 1;
  MPI_Comm_dup(MPI_COMM_WORLD, &g->comm);
  MPI_Comm_dup(MPI_COMM_WORLD, &g->beat);
  MPI_Comm_set_errhandler(g->comm, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(g->beat, MPI_ERRORS_RETURN);
  if (!named && gatherHostNames(err, errLen) != 0) return 1;
  // Spin only when every worker is on this host; MIRRORLAB_MPI_SPIN_SECONDS overrides it.
  g->spin = std::all_of(g->hosts.begin(), g->hosts.end(), [](const std::string& h) { return h == g->hosts.front(); }) ? 0.05 : 0;
  if (const char* s = std::getenv("MIRRORLAB_MPI_SPIN_SECONDS"); s && *s) g->spin = std::max(0.0, std::atof(s));
  g->heart = std::thread(heartbeat);
  return 0;
}

__attribute__((visibility("default"))) int mlmpi_rank() { return g ? g->rank : 0; }
__attribute__((visibility("default"))) int mlmpi_size() { return g ? g->size : 1; }
__attribute__((visibility("default"))) const char* mlmpi_engine() { return g ? g->engine.c_str() : ""; }
__attribute__((visibility("default"))) const char* mlmpi_host(int rank) {
  return g && rank >= 0 && rank < g->size ? g->hosts[static_cast<size_t>(rank)].c_str() : "";
}

__attribute__((visibility("default"))) int mlmpi_allreduce(void* data, int64_t count, int isDouble, const char* what, char* err,
                                                           size_t errLen) {
  const size_t elem = isDouble ? sizeof(double) : sizeof(float);
  for (int64_t off = 0; off < count || (count == 0 && off == 0); off += kChunk) {
    const int n = static_cast<int>(std::min(kChunk, count - off));
    char* p = static_cast<char*>(data) + static_cast<size_t>(off) * elem;
    const int rc = collective(what, err, errLen, [&](MPI_Request& req) {
      return MPI_Iallreduce(MPI_IN_PLACE, p, n, isDouble ? MPI_DOUBLE : MPI_FLOAT, MPI_SUM, g->comm, &req);
    });
    if (rc != 0) return rc;
    if (count == 0) break;
  }
  return 0;
}

__attribute__((visibility("default"))) int mlmpi_bcast(float* data, int64_t count, int root, const char* what, char* err,
                                                       size_t errLen) {
  for (int64_t off = 0; off < count || (count == 0 && off == 0); off += kChunk) {
    const int n = static_cast<int>(std::min(kChunk, count - off));
    const int rc = collective(what, err, errLen,
                              [&](MPI_Request& req) { return MPI_Ibcast(data + off, n, MPI_FLOAT, root, g->comm, &req); });
    if (rc != 0) return rc;
    if (count == 0) break;
  }
  return 0;
}

// Every worker's string: the lengths, then the bytes; sink(ctx, rank, bytes, len) for each.
__attribute__((visibility("default"))) int mlmpi_allgather(const char* mine, int64_t len, mlmpi_sink sink, void* ctx,
                                                           const char* what, char* err, size_t errLen) {
  if (!g) return 1;
  int mylen = static_cast<int>(std::min<int64_t>(len, INT_MAX / 2 / std::max(1, g->size)));
  std::vector<int> lens(static_cast<size_t>(g->size));
  int rc = collective(what, err, errLen, [&](MPI_Request& req) {
    return MPI_Iallgather(&mylen, 1, MPI_INT, lens.data(), 1, MPI_INT, g->comm, &req);
  });
  if (rc != 0) return rc;
  std::vector<int> displs(static_cast<size_t>(g->size));
  int total = 0;
  for (int r = 0; r < g->size; ++r) {
    displs[static_cast<size_t>(r)] = total;
    total += lens[static_cast<size_t>(r)];
  }
  std::vector<char> buf(static_cast<size_t>(std::max(total, 1)));
  rc = collective(what, err, errLen, [&](MPI_Request& req) {
    return MPI_Iallgatherv(mine, mylen, MPI_CHAR, buf.data(), lens.data(), displs.data(), MPI_CHAR, g->comm, &req);
  });
  if (rc != 0) return rc;
  for (int r = 0; r < g->size; ++r) sink(ctx, r, buf.data() + displs[static_cast<size_t>(r)], lens[static_cast<size_t>(r)]);
  return 0;
}

__attribute__((visibility("default"))) void mlmpi_set_progress(int64_t step, const char* phase) {
  if (!g) return;
  std::lock_guard lock(g->mu);
  g->where = std::string(phase) + " of step " + std::to_string(step);
}

// From any thread but not from a signal handler (the CLI's watcher thread calls it).
__attribute__((visibility("default"))) void mlmpi_interrupt(const char* reason) {
  if (!g) return;
  {
    std::lock_guard lock(g->mu);
    if (g->interrupted.empty()) g->interrupted = reason;
  }
  g->hasInterrupt.store(true);
}

__attribute__((visibility("default"))) double mlmpi_waiting_seconds() {
  const double since = g ? g->waitingSince.load() : 0;
  return since > 0 ? now() - since : 0;
}

__attribute__((visibility("default"))) void mlmpi_abort(int code) { MPI_Abort(g ? g->comm : MPI_COMM_WORLD, code); }

__attribute__((visibility("default"))) void mlmpi_finalize() {
  if (!g) return;
  g->stop.store(true);
  if (g->heart.joinable()) g->heart.join();
  // Every worker stops its heartbeats before anyone finalizes; then the last ones are read.
  MPI_Barrier(g->comm);
  for (;;) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kBeatTag, g->beat, &flag, &st) != MPI_SUCCESS || !flag) break;
    char sink[512];
    MPI_Recv(sink, sizeof sink, MPI_CHAR, st.MPI_SOURCE, kBeatTag, g->beat, MPI_STATUS_IGNORE);
  }
  MPI_Comm_free(&g->beat);
  MPI_Comm_free(&g->comm);
  MPI_Finalize();
  delete g;
  g = nullptr;
}

}  // extern "C"
