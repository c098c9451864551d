// Waits that cannot hang on a stuck NCCL collective, and the bounded close of a communicator.
#include "backend/cuda/Wait.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "backend/cuda/Context.h"
#include "backend/cuda/NcclLoader.h"

namespace mlcuda {
namespace {

using Clock = std::chrono::steady_clock;

// Polls spin (with a yield) this many times, about a millisecond, then sleep between polls: a short
// wait costs no latency, a long one no CPU.
constexpr unsigned kSpinPolls = 1000;
constexpr auto kPollSleep = std::chrono::microseconds(50);

double secondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

void pause(unsigned polls) {
  if (polls < kSpinPolls)
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(kPollSleep);
}

std::string secondsText(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

const char* kWayOut =
    "set NCCL_DEBUG=WARN to see why, check the GPUs and their links (nvidia-smi, nvidia-smi topo -m), raise "
    "MIRRORLAB_GPU_COLLECTIVE_TIMEOUT if one step legitimately takes longer, or train on one GPU or on logical GPUs of "
    "one card (--devices gpu:0x2), which use no NCCL";

// The first asynchronous NCCL error of the clique's communicators, described; empty when there is
// none (ncclInProgress is none). The caller holds the mutex; the clique is not closed.
std::string asyncErrorLocked(NcclClique& c) {
  const NcclApi* api = ncclIfLoaded();
  if (!api) return {};
  for (size_t r = 0; r < c.comms.size(); ++r) {
    if (!c.comms[r]) continue;
    ncclResult_t async = ncclSuccess;
    const ncclResult_t asked = api->commGetAsyncError(c.comms[r], &async);
    if (asked != ncclSuccess) async = asked;
    if (async == ncclSuccess || async == ncclInProgress) continue;
    const char* text = api->getErrorString(async);
    const char* last = api->getLastError(c.comms[r]);
    return "NCCL failed on gpu:" + std::to_string(c.devices[r]) + " (" + (text ? text : "error") + ", " +
           std::to_string(static_cast<int>(async)) + (last && *last ? std::string(": ") + last : std::string()) + ")";
  }
  return {};
}

// Between polls of a linked wait: throws (and aborts the clique) when NCCL failed or the wait has
// lasted longer than the timeout; throws when another wait aborted it. The lock is only tried: the
// thread that holds it (enqueueing an all-reduce, or closing) must not keep this wait past its
// timeout either.
void checkClique(NcclClique& c, const std::string& label, const std::string& call, double waited, double timeout) {
  std::unique_lock<OwnedMutex> lock(c.mutex, std::try_to_lock);
  if (!lock.owns_lock()) {
    if (waited < timeout) return;  // checked at a later poll
    fail(MLCUDA_ERR_NCCL, label + " waited " + secondsText(timeout) + " s (" + kCollectiveTimeoutEnv + ") in " + call +
                              " while an NCCL call over " + c.label + " on another thread did not return; " + kWayOut);
  }
  if (!c.abortReason.empty()) fail(MLCUDA_ERR_NCCL, c.abortReason);
  if (c.closed) return;  // destroyed after its work completed: nothing of NCCL left to wait for
  std::string why = asyncErrorLocked(c);
  if (!why.empty()) {
    why += " while " + label + " waited in " + call + ": the all-reduce over " + c.label +
           " cannot complete, so its NCCL communicator was aborted; " + kWayOut;
  } else if (waited >= timeout) {
    why = label + " waited " + secondsText(timeout) + " s (" + kCollectiveTimeoutEnv + ") in " + call +
          " for work that includes NCCL all-reduces over " + c.label +
          ", and it did not finish: a collective hangs (a GPU or its link, or ranks that ran different collectives), so "
          "the NCCL communicator was aborted; " +
          kWayOut;
  } else {
    return;
  }
  abortLocked(c, why);
  fail(MLCUDA_ERR_NCCL, why);
}

// The clique a wait must watch: the link's, unless there is none or it was closed normally (its
// work had completed then, so a blocking wait cannot hang on NCCL).
std::shared_ptr<NcclClique> watched(const std::shared_ptr<NcclLink>& link) {
  std::shared_ptr<NcclClique> clique;
  if (link) {
    const std::lock_guard<std::mutex> lock(link->mutex);
    clique = link->clique;
  }
  if (!clique) return nullptr;
  const std::unique_lock<OwnedMutex> lock(clique->mutex, std::try_to_lock);
  if (lock.owns_lock() && clique->closed && clique->abortReason.empty()) return nullptr;
  return clique;
}

// Waits until query() stops answering cudaErrorNotReady: block() (one blocking call) when no
// communicator is watched, else polling with checkClique between polls.
template <class Query, class Block>
void waitUntilDone(const std::string& label, const std::shared_ptr<NcclLink>& link, const std::string& blockCall,
                   const std::string& queryCall, const char* file, int line, Query query, Block block) {
  const std::shared_ptr<NcclClique> clique = watched(link);
  if (!clique) {
    checkCuda(block(), blockCall.c_str(), file, line, label);
    return;
  }
  const double timeout = collectiveTimeoutSeconds();
  const Clock::time_point start = Clock::now();
  for (unsigned polls = 0;; ++polls) {
    const cudaError_t e = query();
    if (e != cudaErrorNotReady) {
      checkCuda(e, queryCall.c_str(), file, line, label);
      // Done; but if another wait aborted the communicator, the all-reduce's results are not sums.
      const std::unique_lock<OwnedMutex> lock(clique->mutex, std::try_to_lock);
      if (lock.owns_lock() && !clique->abortReason.empty()) fail(MLCUDA_ERR_NCCL, clique->abortReason);
      return;
    }
    checkClique(*clique, label, queryCall, secondsSince(start), timeout);
    pause(polls);
  }
}

// Waits for every rank's last all-reduce (its `done` event), bounded; returns why it could not, or
// empty. The caller holds the mutex.
std::string drainLocked(NcclClique& c) {
  const double timeout = collectiveTimeoutSeconds();
  const Clock::time_point start = Clock::now();
  for (size_t r = 0; r < c.done.size(); ++r) {
    if (!c.done[r]) continue;
    if (cudaSetDevice(c.devices[r]) != cudaSuccess) {
      (void)cudaGetLastError();
      return "gpu:" + std::to_string(c.devices[r]) + " cannot be made current";
    }
    for (unsigned polls = 0;; ++polls) {
      const cudaError_t e = cudaEventQuery(c.done[r]);
      if (e == cudaSuccess) break;
      if (e != cudaErrorNotReady) {
        (void)cudaGetLastError();
        return std::string("the all-reduces on gpu:") + std::to_string(c.devices[r]) + " failed (" + cudaGetErrorName(e) + ": " +
               cudaGetErrorString(e) + ")";
      }
      if (std::string why = asyncErrorLocked(c); !why.empty()) return why;
      if (secondsSince(start) >= timeout)
        return "its all-reduces did not finish within " + secondsText(timeout) + " s (" + kCollectiveTimeoutEnv + ")";
      pause(polls);
    }
  }
  return {};
}

// Finalizes every rank (one group: the call is collective over the ranks, all held by this thread),
// waits until none is in progress, then destroys them. Returns why it could not, or empty.
std::string finalizeLocked(NcclClique& c, const NcclApi& api) {
  ncclResult_t result = api.groupStart();
  if (result == ncclSuccess) {
    ncclResult_t first = ncclSuccess;
    for (ncclComm_t comm : c.comms)
      if (comm && first == ncclSuccess) first = api.commFinalize(comm);
    const ncclResult_t end = api.groupEnd();  // closes the group whatever happened inside it
    result = first != ncclSuccess ? first : end;
  }
  if (result != ncclSuccess && result != ncclInProgress)
    return std::string("ncclCommFinalize failed (") + api.getErrorString(result) + ")";
  // Blocking communicators (ncclCommInitAll's) are finalized when the group ends; a nonblocking one
  // says ncclInProgress until it is.
  const double timeout = collectiveTimeoutSeconds();
  const Clock::time_point start = Clock::now();
  for (unsigned polls = 0;; ++polls) {
    bool pending = false;
    for (ncclComm_t comm : c.comms) {
      if (!comm) continue;
      ncclResult_t state = ncclSuccess;
      const ncclResult_t asked = api.commGetAsyncError(comm, &state);
      if (asked != ncclSuccess) state = asked;
      if (state == ncclInProgress)
        pending = true;
      else if (state != ncclSuccess)
        return std::string("finalizing failed (") + api.getErrorString(state) + ")";
    }
    if (!pending) break;
    if (secondsSince(start) >= timeout)
      return "finalizing did not complete within " + secondsText(timeout) + " s (" + kCollectiveTimeoutEnv + ")";
    pause(polls);
  }
  for (ncclComm_t& comm : c.comms) {
    if (comm) (void)api.commDestroy(comm);  // local: frees what finalizing left
    comm = nullptr;
  }
  return {};
}

}  // namespace

double collectiveTimeoutSeconds() {
  const char* v = std::getenv(kCollectiveTimeoutEnv);
  if (!v || !*v) return kDefaultCollectiveTimeoutSeconds;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  return end != v && *end == '\0' && s > 0 ? s : kDefaultCollectiveTimeoutSeconds;
}

bool ranNccl(const std::shared_ptr<NcclLink>& link) { return watched(link) != nullptr; }

void waitStream(const mlcuda_context* ctx, cudaStream_t stream, const char* what, const char* file, int line) {
  waitUntilDone(
      ctx->label, ctx->nccl, std::string("cudaStreamSynchronize(") + what + ")", std::string("cudaStreamQuery(") + what + ")",
      file, line, [stream] { return cudaStreamQuery(stream); }, [stream] { return cudaStreamSynchronize(stream); });
}

void waitEvent(const mlcuda_event* ev, const char* what, const char* file, int line) {
  cudaEvent_t e = ev->event;
  waitUntilDone(
      ev->label, ev->nccl, std::string("cudaEventSynchronize(") + what + ")", std::string("cudaEventQuery(") + what + ")", file,
      line, [e] { return cudaEventQuery(e); }, [e] { return cudaEventSynchronize(e); });
}

void abortLocked(NcclClique& c, const std::string& why) {
  if (c.abortReason.empty()) c.abortReason = why;
  if (c.closed) return;
  c.closed = true;
  const NcclApi* api = ncclIfLoaded();
  int device = -1;
  const bool knowDevice = cudaGetDevice(&device) == cudaSuccess;
  // Every rank: a rank left running would spin forever waiting for its aborted peers.
  for (ncclComm_t& comm : c.comms) {
    if (comm && api) (void)api->commAbort(comm);
    comm = nullptr;
  }
  if (knowDevice) (void)cudaSetDevice(device);
  (void)cudaGetLastError();
}

void closeClique(NcclClique& c) {
  const std::lock_guard<OwnedMutex> lock(c.mutex);
  int device = -1;
  const bool knowDevice = cudaGetDevice(&device) == cudaSuccess;
  const NcclApi* api = ncclIfLoaded();
  if (!c.closed && api) {
    std::string why = drainLocked(c);
    if (why.empty()) why = finalizeLocked(c, *api);
    if (!why.empty()) {
      why = "the NCCL communicator over " + c.label + " was aborted when it was closed: " + why;
      abortLocked(c, why);
      std::fprintf(stderr, "Mirrorlab CUDA plugin: %s\n", why.c_str());
    }
  }
  c.closed = true;
  for (size_t r = 0; r < c.done.size(); ++r) {
    // An event whose work is still pending is released when that work completes.
    if (c.done[r] && cudaSetDevice(c.devices[r]) == cudaSuccess) (void)cudaEventDestroy(c.done[r]);
    c.done[r] = nullptr;
  }
  if (knowDevice) (void)cudaSetDevice(device);
  (void)cudaGetLastError();
}

}  // namespace mlcuda
