// libmirrorlab_mpi.so: the worker group on Open MPI, behind a small C ABI (MpiPluginApi.h) so that
// mirrorlab-cli links no MPI library and runs without one; MpiWorkers.cpp loads it only when
// mpirun started the process.
//
// Every collective is non-blocking (MPI_Iallreduce, MPI_Ibcast, MPI_Iallgatherv) and completed by
// polling MPI_Test against a deadline, so a worker that died, hangs or was stopped ends the wait
// with a message instead of a hang. To name that worker, every worker sends a heartbeat (its
// collective count and where it is: "backward of step 12") to the others on its own communicator
// every 200 ms; the worker whose count is behind, or whose heartbeats stopped, is the one named.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
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
};

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
  std::thread heart;
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

std::string workerName(int rank) { return "worker " + std::to_string(rank + 1) + " of " + std::to_string(g->size); }

std::string secondsText(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f s", s);
  return b;
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
      p.lastSeen = now();
      p.calls = std::atoll(text.substr(0, bar).c_str());
      p.where = bar == std::string::npos ? std::string() : text.substr(bar + 1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Why `what` did not complete: the worker that is behind, or gone.
std::string diagnose(const std::string& what, int64_t myCall) {
  std::lock_guard lock(g->mu);
  const double t = now();
  std::string out;
  for (int r = 0; r < g->size; ++r) {
    if (r == g->rank) continue;
    const Peer& p = g->peers[static_cast<size_t>(r)];
    const double silent = t - p.lastSeen;
    std::string line;
    if (p.lastSeen == 0)
      line = workerName(r) + " never answered (no heartbeat since start-up): it did not start or its host is unreachable";
    else if (silent > 5 * kBeatSeconds + 1.0)
      line = workerName(r) + " stopped answering " + secondsText(silent) + " ago (last seen in " + p.where +
             "): it died, was killed, or its host is unreachable";
    else if (p.calls < myCall)
      line = workerName(r) + " is alive but has not reached " + what + ": it is stuck in " + p.where;
    if (!line.empty()) out += (out.empty() ? "" : "; ") + line;
  }
  const std::string head = what + " did not complete within " + secondsText(g->timeout) + " (--worker-timeout)";
  return out.empty() ? head + ": the network or MPI stopped making progress" : head + ": " + out;
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
    // Open MPI moves a non-blocking collective on only inside MPI_Test: poll without pause, as a
    // blocking MPI_Allreduce would, for 50 ms (a few MB at shared-memory speed); a longer wait
    // is a straggler or a lost worker, polled every 50 us without holding a core.
    if (t - start > 0.05) std::this_thread::sleep_for(std::chrono::microseconds(50));
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
  return waitFor(req, what, call, err, errLen);
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
  MPI_Comm_dup(MPI_COMM_WORLD, &g->comm);
  MPI_Comm_dup(MPI_COMM_WORLD, &g->beat);
  MPI_Comm_set_errhandler(g->comm, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(g->beat, MPI_ERRORS_RETURN);
  MPI_Comm_rank(g->comm, &g->rank);
  MPI_Comm_size(g->comm, &g->size);
  g->peers.resize(static_cast<size_t>(g->size));
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int vlen = 0;
  MPI_Get_library_version(version, &vlen);
  std::string v(version, static_cast<size_t>(vlen));
  g->engine = v.substr(0, std::min(v.find(','), v.find('\n')));  // "Open MPI v4.1.4"
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::vector<char> all(static_cast<size_t>(g->size) * 256);
  rc = MPI_Allgather(host, 256, MPI_CHAR, all.data(), 256, MPI_CHAR, g->comm);
  if (rc != MPI_SUCCESS) {
    setError(err, errLen, "gathering the workers' host names failed: " + mpiError(rc));
    return 1;
  }
  for (int r = 0; r < g->size; ++r) g->hosts.emplace_back(all.data() + static_cast<size_t>(r) * 256);
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
