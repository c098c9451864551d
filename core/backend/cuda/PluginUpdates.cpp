// Update entry points: the fused optimizers and the two all-reduces (device memory for logical
// GPUs on one card, NCCL across cards; NCCL is loaded when the first communicator is made, and the
// waits of the contexts that ran its all-reduces watch it: Wait.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "backend/cuda/Context.h"
#include "backend/cuda/Kernels.h"
#include "backend/cuda/NcclLoader.h"
#include "nn/OptimizerConstants.h"

// The communicators live in a clique that the contexts which ran their all-reduces share (their
// waits check NCCL's errors and may abort it); the handle the core holds closes it.
struct mlcuda_nccl {
  std::shared_ptr<mlcuda::NcclClique> clique;
};

namespace mlcuda {
namespace {

std::string deviceList(const std::vector<int>& devices) {
  std::string s;
  for (size_t i = 0; i < devices.size(); ++i) s += (i ? "," : "gpu:") + std::to_string(devices[i]);
  return s;
}

// Finalize, then destroy (or abort when the work does not end in time): closeClique. Contexts that
// still hold the clique see it closed and wait for their streams as before.
void destroyNccl(mlcuda_nccl* c) {
  if (!c) return;
  if (c->clique) closeClique(*c->clique);
  delete c;
}

// Makes the clique's event of each rank on its device (recorded after every all-reduce, so that
// closing can tell when the comm streams are done with NCCL).
void createDoneEvents(NcclClique& c) {
  int device = -1;
  ML_CUDA(c.label, cudaGetDevice(&device));
  for (size_t r = 0; r < c.devices.size(); ++r) {
    const std::string gpu = "gpu:" + std::to_string(c.devices[r]);
    ML_CUDA(gpu, cudaSetDevice(c.devices[r]));
    ML_CUDA(gpu, cudaEventCreateWithFlags(&c.done[r], cudaEventDisableTiming));
  }
  ML_CUDA(c.label, cudaSetDevice(device));
}

}  // namespace
}  // namespace mlcuda

using namespace mlcuda;

extern "C" {

MLCUDA_EXPORT mlcuda_status mlcuda_sgd_step(mlcuda_context* ctx, float* params, const float* grads, float* velocity,
                                            int64_t count, float grad_scale, float lr, float momentum, int nesterov) {
  return guarded([&] {
    use(ctx);
    ML_REQUIRE(count >= 0, "mlcuda_sgd_step: count must be >= 0");
    if (count == 0) return;
    ML_REQUIRE(params && grads, "mlcuda_sgd_step: params and grads must not be NULL");
    ML_REQUIRE(momentum == 0.0f || velocity, "mlcuda_sgd_step: momentum needs a velocity buffer");
    kernels::sgd(ctx->compute, params, grads, velocity, count, grad_scale, lr, momentum, nesterov != 0);
    ML_LAUNCHED(ctx->label, "sgd");
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_adam_step(mlcuda_context* ctx, float* params, const float* grads, float* m, float* v,
                                             int64_t count, float grad_scale, float lr, double beta1, double beta2, float epsilon,
                                             int64_t iteration) {
  return guarded([&] {
    use(ctx);
    ML_REQUIRE(count >= 0, "mlcuda_adam_step: count must be >= 0");
    ML_REQUIRE(iteration >= 1, "mlcuda_adam_step: iteration counts from 1");
    if (count == 0) return;
    ML_REQUIRE(params && grads && m && v, "mlcuda_adam_step: params, grads, m and v must not be NULL");
    // The bias-corrected rate and the coefficients on the host, exactly as ml::Adam computes them.
    const ml::AdamConstants k = ml::adamConstants(lr, beta1, beta2, iteration);
    kernels::adam(ctx->compute, params, grads, m, v, count, grad_scale, k.alpha, k.b1, k.b2, k.c1, k.c2, epsilon);
    ML_LAUNCHED(ctx->label, "adam");
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_rmsprop_step(mlcuda_context* ctx, float* params, const float* grads, float* v, float* mom,
                                                int64_t count, float grad_scale, float lr, double rho, float momentum,
                                                float epsilon) {
  return guarded([&] {
    use(ctx);
    ML_REQUIRE(count >= 0, "mlcuda_rmsprop_step: count must be >= 0");
    if (count == 0) return;
    ML_REQUIRE(params && grads && v, "mlcuda_rmsprop_step: params, grads and v must not be NULL");
    ML_REQUIRE(momentum == 0.0f || mom, "mlcuda_rmsprop_step: momentum needs a momentum buffer");
    const ml::RmsPropConstants k = ml::rmspropConstants(rho);
    kernels::rmsprop(ctx->compute, params, grads, v, mom, count, grad_scale, lr, k.rho, k.c, momentum, epsilon);
    ML_LAUNCHED(ctx->label, "rmsprop");
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_count_nonfinite(mlcuda_context* ctx, const float* x, int64_t count,
                                                   unsigned long long* counter) {
  return guarded([&] {
    use(ctx);
    ML_REQUIRE(count >= 0, "mlcuda_count_nonfinite: count must be >= 0");
    ML_REQUIRE(counter, "mlcuda_count_nonfinite: counter must not be NULL");
    if (count == 0) return;
    ML_REQUIRE(x, "mlcuda_count_nonfinite: x must not be NULL");
    kernels::countNonfinite(ctx->compute, x, count, counter);
    ML_LAUNCHED(ctx->label, "countNonfinite");
  });
}

static mlcuda_status localAllReduceAny(mlcuda_context* ctx, float* const* buffers, int count, int64_t elements,
                                       mlcuda_event* const* ready, int ready_count, mlcuda_event* done, bool bf16) {
  return guarded([&] {
    use(ctx);
    ML_REQUIRE(count >= 1 && count <= kernels::kMaxLocalBuffers, "mlcuda_local_allreduce: count must be in 1.." +
                                                                     std::to_string(kernels::kMaxLocalBuffers) + ", got " +
                                                                     std::to_string(count));
    ML_REQUIRE(elements >= 0, "mlcuda_local_allreduce: elements must be >= 0");
    ML_REQUIRE(buffers, "mlcuda_local_allreduce: buffers is NULL");
    ML_REQUIRE(ready_count == 0 || ready, "mlcuda_local_allreduce: ready is NULL");
    // The same buffer twice would be added twice.
    std::vector<const float*> seen(buffers, buffers + count);
    ML_REQUIRE(std::find(seen.begin(), seen.end(), nullptr) == seen.end(), "mlcuda_local_allreduce: a buffer is NULL");
    std::sort(seen.begin(), seen.end());
    ML_REQUIRE(std::adjacent_find(seen.begin(), seen.end()) == seen.end(),
               "mlcuda_local_allreduce: the same buffer is listed twice");
    for (int i = 0; i < ready_count; ++i) {
      ML_REQUIRE(ready[i], "mlcuda_local_allreduce: a ready event is NULL");
      ML_CUDA(ctx->label, cudaStreamWaitEvent(ctx->comm, ready[i]->event, 0));
    }
    if (count > 1 && elements > 0) {
      kernels::localAllReduce(ctx->comm, buffers, count, elements, bf16);
      ML_LAUNCHED(ctx->label, "localAllReduce");
    }
    if (done) ML_CUDA(ctx->label, cudaEventRecord(done->event, ctx->comm));
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_local_allreduce(mlcuda_context* ctx, float* const* buffers, int count, int64_t elements,
                                                   mlcuda_event* const* ready, int ready_count, mlcuda_event* done) {
  return localAllReduceAny(ctx, buffers, count, elements, ready, ready_count, done, false);
}

MLCUDA_EXPORT mlcuda_status mlcuda_local_allreduce_bf16(mlcuda_context* ctx, float* const* buffers, int count, int64_t elements,
                                                        mlcuda_event* const* ready, int ready_count, mlcuda_event* done) {
  return localAllReduceAny(ctx, buffers, count, elements, ready, ready_count, done, true);
}

MLCUDA_EXPORT mlcuda_status mlcuda_nccl_create(const int* devices, int count, mlcuda_nccl** out) {
  return guarded([&] {
    ML_REQUIRE(out, "mlcuda_nccl_create: out is NULL");
    *out = nullptr;
    ML_REQUIRE(devices && count >= 1, "mlcuda_nccl_create: needs at least one device");
    std::vector<int> list(devices, devices + count);
    const std::string label = deviceList(list);
    std::vector<int> sorted = list;
    std::sort(sorted.begin(), sorted.end());
    const auto dup = std::adjacent_find(sorted.begin(), sorted.end());
    if (dup != sorted.end())
      fail(MLCUDA_ERR_INVALID_ARGUMENT, "NCCL cannot place two ranks on one GPU (gpu:" + std::to_string(*dup) +
                                            " is listed twice in " + label +
                                            "): logical GPUs on one card use the device-memory all-reduce");
    // Loaded here, on first use: only runs over several physical GPUs need NCCL.
    const NcclApi& api = nccl();
    int available = 0;
    ML_CUDA(label, cudaGetDeviceCount(&available));
    for (int d : list)
      if (d < 0 || d >= available)
        fail(MLCUDA_ERR_NO_DEVICE, "NCCL: there is no CUDA device " + std::to_string(d) + " (this machine has " +
                                       std::to_string(available) + " GPU(s))");
    std::unique_ptr<mlcuda_nccl, void (*)(mlcuda_nccl*)> c(new mlcuda_nccl, destroyNccl);
    c->clique = std::make_shared<NcclClique>();
    NcclClique& clique = *c->clique;
    clique.devices = list;
    clique.label = label;
    clique.comms.assign(list.size(), nullptr);
    clique.done.assign(list.size(), nullptr);
    const ncclResult_t init = api.commInitAll(clique.comms.data(), count, list.data());
    if (init != ncclSuccess) {
      clique.comms.assign(list.size(), nullptr);  // not communicators: nothing to destroy
      checkNccl(init, nullptr, "ncclCommInitAll", __FILE__, __LINE__, label);
    }
    createDoneEvents(clique);
    *out = c.release();
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_nccl_unique_id(unsigned char id[MLCUDA_NCCL_ID_BYTES]) {
  return guarded([&] {
    ML_REQUIRE(id, "mlcuda_nccl_unique_id: id is NULL");
    static_assert(sizeof(ncclUniqueId) == MLCUDA_NCCL_ID_BYTES, "NCCL's unique id is 128 bytes");
    ncclUniqueId u;
    const NcclApi& api = nccl();
    checkNccl(api.getUniqueId(&u), nullptr, "ncclGetUniqueId", __FILE__, __LINE__, "worker 0");
    std::memcpy(id, &u, sizeof u);
  });
}

// As mlcuda_nccl_create, but the communicator spans processes: this process's ranks join it with
// ncclCommInitRank inside a group (several ranks of one process must init together).
MLCUDA_EXPORT mlcuda_status mlcuda_nccl_create_ranks(const unsigned char* id, int nranks, const int* ranks, const int* devices,
                                                     int count, mlcuda_nccl** out) {
  return guarded([&] {
    ML_REQUIRE(out, "mlcuda_nccl_create_ranks: out is NULL");
    *out = nullptr;
    ML_REQUIRE(id && ranks && devices && count >= 1 && nranks >= count,
               "mlcuda_nccl_create_ranks: needs an id and at least one local rank of nranks");
    std::vector<int> list(devices, devices + count);
    std::string label = deviceList(list) + " (ranks";
    for (int i = 0; i < count; ++i) {
      ML_REQUIRE(ranks[i] >= 0 && ranks[i] < nranks, "mlcuda_nccl_create_ranks: a rank outside 0..nranks-1");
      label += (i ? "," : " ") + std::to_string(ranks[i]);
    }
    label += " of " + std::to_string(nranks) + ")";
    std::vector<int> sorted = list;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      fail(MLCUDA_ERR_INVALID_ARGUMENT, "NCCL cannot place two ranks on one GPU (" + label + ")");
    const NcclApi& api = nccl();
    ncclUniqueId u;
    std::memcpy(&u, id, sizeof u);
    std::unique_ptr<mlcuda_nccl, void (*)(mlcuda_nccl*)> c(new mlcuda_nccl, destroyNccl);
    c->clique = std::make_shared<NcclClique>();
    NcclClique& clique = *c->clique;
    clique.devices = list;
    clique.label = label;
    clique.comms.assign(list.size(), nullptr);
    clique.done.assign(list.size(), nullptr);
    int device = -1;
    ML_CUDA(label, cudaGetDevice(&device));
    checkNccl(api.groupStart(), nullptr, "ncclGroupStart", __FILE__, __LINE__, label);
    ncclResult_t init = ncclSuccess;
    for (int i = 0; i < count && init == ncclSuccess; ++i) {
      ML_CUDA(label, cudaSetDevice(list[static_cast<size_t>(i)]));
      init = api.commInitRank(&clique.comms[static_cast<size_t>(i)], nranks, u, ranks[i]);
    }
    const ncclResult_t end = api.groupEnd();
    ML_CUDA(label, cudaSetDevice(device));
    if (init != ncclSuccess || end != ncclSuccess) {
      clique.comms.assign(list.size(), nullptr);  // not communicators: nothing to destroy
      checkNccl(init != ncclSuccess ? init : end, nullptr, "ncclCommInitRank", __FILE__, __LINE__, label);
    }
    createDoneEvents(clique);
    *out = c.release();
  });
}

MLCUDA_EXPORT void mlcuda_nccl_destroy(mlcuda_nccl* comm) { destroyNccl(comm); }

// Each rank's bf16 wire buffer (its comm scratch), grown before the all-reduce takes the
// communicator's lock: growing waits for the comm stream, and the wait of a context linked to this
// communicator tries that lock (Wait.cpp), which this thread must not hold then.
static std::vector<void*> bf16Scratch(const NcclClique& c, mlcuda_context* const* contexts, int64_t elements) {
  int device = -1;
  ML_CUDA(c.label, cudaGetDevice(&device));
  std::vector<void*> wire(c.devices.size());
  for (size_t r = 0; r < wire.size(); ++r) {
    ML_CUDA(contexts[r]->label, cudaSetDevice(c.devices[r]));
    wire[r] = commScratch(contexts[r], 2 * static_cast<size_t>(elements));
  }
  ML_CUDA(c.label, cudaSetDevice(device));
  return wire;
}

// bf16: each rank's buffer packed into its comm scratch first and unpacked after (half the bytes).
// Long: the argument checks, the lock that an abort on another thread waits for and the NCCL
// group must stay in one scope (the lock is held across the enqueue).
static mlcuda_status ncclAllReduceAny(mlcuda_nccl* comm, mlcuda_context* const* contexts, float* const* buffers, int64_t elements,
                                      bool bf16) {
  return guarded([&] {
    ML_REQUIRE(comm && comm->clique && contexts && buffers, "mlcuda_nccl_allreduce: NULL argument");
    ML_REQUIRE(elements >= 0, "mlcuda_nccl_allreduce: elements must be >= 0");
    NcclClique& c = *comm->clique;
    // devices and label are fixed when the communicator is made: read without the lock.
    const size_t n = c.devices.size();
    for (size_t r = 0; r < n; ++r) {
      ML_REQUIRE(contexts[r] && buffers[r], "mlcuda_nccl_allreduce: NULL context or buffer for rank " + std::to_string(r));
      ML_REQUIRE(contexts[r]->device == c.devices[r], "mlcuda_nccl_allreduce: rank " + std::to_string(r) +
                                                          " is gpu:" + std::to_string(c.devices[r]) + " but its context is " +
                                                          contexts[r]->label);
    }
    const std::vector<void*> wire =
        bf16 && elements > 0 ? bf16Scratch(c, contexts, elements) : std::vector<void*>(buffers, buffers + n);
    int device = -1;
    ML_CUDA(c.label, cudaGetDevice(&device));
    // Held while NCCL is called: a wait on another thread must not abort the communicators under
    // the enqueue (its check waits for the lock instead).
    const std::lock_guard<OwnedMutex> lock(c.mutex);
    if (c.closed)
      fail(MLCUDA_ERR_NCCL, c.abortReason.empty()
                                ? "mlcuda_nccl_allreduce: the NCCL communicator over " + c.label + " has been destroyed"
                                : c.abortReason);
    if (elements == 0) return;
    // From now on these contexts' waits watch this communicator (Wait.h).
    for (size_t r = 0; r < n; ++r) {
      const std::lock_guard<std::mutex> linkLock(contexts[r]->nccl->mutex);
      contexts[r]->nccl->clique = comm->clique;
    }
    const NcclApi& api = nccl();  // loaded: the communicators exist
    for (size_t r = 0; r < n && bf16; ++r) {
      ML_CUDA(contexts[r]->label, cudaSetDevice(c.devices[r]));
      kernels::packLow(contexts[r]->comm, MLCUDA_PRECISION_BFLOAT16, buffers[r], wire[r], elements);
      ML_LAUNCHED(contexts[r]->label, "packLow");
    }
    ML_CUDA(c.label, cudaSetDevice(device));
    ML_NCCL(c.label, nullptr, api.groupStart());
    // Whatever fails inside the group, the group must still be closed.
    ncclResult_t first = ncclSuccess;
    size_t failedRank = 0;
    for (size_t r = 0; r < n && first == ncclSuccess; ++r) {
      first = api.allReduce(wire[r], wire[r], static_cast<size_t>(elements), bf16 ? ncclBfloat16 : ncclFloat, ncclSum, c.comms[r],
                            contexts[r]->comm);
      failedRank = r;
    }
    const ncclResult_t end = api.groupEnd();
    if (first != ncclSuccess)
      checkNccl(first, c.comms[failedRank], "ncclAllReduce", __FILE__, __LINE__, contexts[failedRank]->label);
    ML_NCCL(c.label, nullptr, end);
    // Each rank's done event follows its all-reduce (and its unpacking) on its comm stream (closing
    // waits for them).
    for (size_t r = 0; r < n; ++r) {
      ML_CUDA(contexts[r]->label, cudaSetDevice(c.devices[r]));
      if (bf16) {
        kernels::unpackBf16(contexts[r]->comm, wire[r], buffers[r], elements);
        ML_LAUNCHED(contexts[r]->label, "unpackBf16");
      }
      ML_CUDA(contexts[r]->label, cudaEventRecord(c.done[r], contexts[r]->comm));
    }
    ML_CUDA(c.label, cudaSetDevice(device));
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_nccl_allreduce(mlcuda_nccl* comm, mlcuda_context* const* contexts, float* const* buffers,
                                                  int64_t elements) {
  return ncclAllReduceAny(comm, contexts, buffers, elements, false);
}

MLCUDA_EXPORT mlcuda_status mlcuda_nccl_allreduce_bf16(mlcuda_nccl* comm, mlcuda_context* const* contexts, float* const* buffers,
                                                       int64_t elements) {
  return ncclAllReduceAny(comm, contexts, buffers, elements, true);
}

}  // extern "C"
