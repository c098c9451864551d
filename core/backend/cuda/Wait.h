// The plugin's waits for the GPU (mlcuda_synchronize, the copies to and from the host,
// mlcuda_event_elapsed_ms, a growing scratch, teardown) and what they know of NCCL.
//
// A context whose comm stream ran NCCL all-reduces is linked to their communicator. Its waits then
// poll (cudaStreamQuery / cudaEventQuery with a yield, then short sleeps) instead of blocking in
// cudaStreamSynchronize, check NCCL's asynchronous errors as they go, and give up after
// MIRRORLAB_GPU_COLLECTIVE_TIMEOUT seconds (default 300): a failed or stuck collective aborts the
// communicator, every rank of it (ncclCommAbort: its kernels quit instead of spinning), and the wait
// fails with MLCUDA_ERR_NCCL and what to do, instead of hanging the run forever. Contexts that never
// ran NCCL work wait as they always did (one blocking call).
#pragma once
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/cuda/OwnedMutex.h"

struct mlcuda_context;
struct mlcuda_event;

namespace mlcuda {

// Seconds a wait on NCCL work may take before the communicator is aborted. Named after the GPU
// collectives: the workers' own timeout is a command-line option (--worker-timeout, 30 s) of the
// host collectives across processes, which the plugin never sees.
inline constexpr const char* kCollectiveTimeoutEnv = "MIRRORLAB_GPU_COLLECTIVE_TIMEOUT";
inline constexpr double kDefaultCollectiveTimeoutSeconds = 300;
// MIRRORLAB_GPU_COLLECTIVE_TIMEOUT when it is a positive number of seconds, else the default.
double collectiveTimeoutSeconds();

// The communicators of one mlcuda_nccl (ncclCommInitAll: rank r on devices[r], all in this process),
// shared with the contexts whose comm streams ran its all-reduces.
struct NcclClique {
  // Guards every member, and every NCCL call on comms. Never held across a wait of a linked context
  // (waitStream, waitEvent: they try it): an OwnedMutex, so that such a wait fails instead of
  // working by accident.
  OwnedMutex mutex{"the lock of an NCCL communicator (NcclClique::mutex)"};
  std::vector<int> devices;
  std::string label;              // "gpu:0,1"
  std::vector<ncclComm_t> comms;  // all null once closed
  std::vector<cudaEvent_t> done;  // rank r's: recorded on its comm stream after each all-reduce (on devices[r])
  bool closed = false;            // finalized and destroyed, or aborted
  std::string abortReason;        // why it was aborted; empty when it was not
};

// What a context, and each event made from it, knows of NCCL: the clique whose all-reduces the
// context's comm stream ran (set by mlcuda_nccl_allreduce), or none. Shared, since a context and its
// events may be destroyed in either order.
struct NcclLink {
  std::mutex mutex;
  std::shared_ptr<NcclClique> clique;
};

// Whether the link's streams ran NCCL work of a communicator that is still open, or was aborted
// (their waits poll).
bool ranNccl(const std::shared_ptr<NcclLink>& link);

// Returns when every piece of work on `stream` (of ctx) has completed, or throws: a CUDA error as
// checkCuda reports it; MLCUDA_ERR_NCCL when NCCL failed, the wait outlasted the timeout (both abort
// the communicator), or the communicator was aborted by another wait. `what` names the stream.
void waitStream(const mlcuda_context* ctx, cudaStream_t stream, const char* what, const char* file, int line);
// The same for an event (made from a context).
void waitEvent(const mlcuda_event* ev, const char* what, const char* file, int line);

// Aborts every communicator of the clique and keeps why for later calls. The caller holds its mutex.
void abortLocked(NcclClique& clique, const std::string& why);

// mlcuda_nccl_destroy: waits (bounded by the timeout) for the all-reduces enqueued on the comm
// streams, finalizes the communicators in one group (ncclCommFinalize is collective, and one thread
// holds every rank), polls ncclCommGetAsyncError until none is ncclInProgress, then destroys them.
// If the work does not finish in time or NCCL reports an error, it aborts them instead and says why
// on stderr (teardown returns nothing). Then the clique's events go.
void closeClique(NcclClique& clique);

}  // namespace mlcuda

// Waits for a stream or an event of the plugin, naming it in any message.
#define ML_WAIT_STREAM(ctx, stream) ::mlcuda::waitStream((ctx), (stream), #stream, __FILE__, __LINE__)
#define ML_WAIT_EVENT(ev) ::mlcuda::waitEvent((ev), #ev, __FILE__, __LINE__)
