// The input pipeline's entry points: pinned host memory, the asynchronous host-to-device copy, the
// device-side gather of a batch's rows from a data set that lives on the device, and waiting on an
// event from the host (for reusing a pinned buffer once its copy is done).
#include "backend/cuda/Context.h"
#include "backend/cuda/Kernels.h"
#include "backend/cuda/Wait.h"

using namespace mlcuda;

extern "C" {

MLCUDA_EXPORT mlcuda_status mlcuda_host_alloc(mlcuda_context* ctx, size_t bytes, void** ptr) {
  return guarded([&] {
    use(ctx);
    ML_REQUIRE(ptr, "mlcuda_host_alloc: ptr is NULL");
    *ptr = nullptr;
    if (bytes == 0) return;
    // Portable: pinned for every context of the process, whichever device it is on.
    ML_CUDA(ctx->label, cudaHostAlloc(ptr, bytes, cudaHostAllocPortable));
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_host_free(mlcuda_context* ctx, void* ptr) {
  return guarded([&] {
    use(ctx);
    if (ptr) ML_CUDA(ctx->label, cudaFreeHost(ptr));
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_copy_to_device_async(mlcuda_context* ctx, void* dst, const void* host_src, size_t bytes) {
  return guarded([&] {
    use(ctx);
    if (bytes == 0) return;
    ML_REQUIRE(dst && host_src, "mlcuda_copy_to_device_async: NULL pointer");
    ML_CUDA(ctx->label, cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, ctx->compute));
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_gather_rows(mlcuda_context* ctx, const float* src, const int64_t* rows, int64_t n,
                                               int64_t width, float* dst) {
  return guarded([&] {
    use(ctx);
    ML_REQUIRE(n >= 0 && width >= 0, "mlcuda_gather_rows: n and width must be >= 0");
    if (n == 0 || width == 0) return;
    ML_REQUIRE(src && rows && dst, "mlcuda_gather_rows: NULL pointer");
    kernels::gatherRows(ctx->compute, src, rows, n, width, dst);
    ML_LAUNCHED(ctx->label, "gatherRows");
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_event_synchronize(mlcuda_event* ev) {
  return guarded([&] {
    ML_REQUIRE(ev, "mlcuda_event_synchronize: event is NULL");
    ML_CUDA(ev->label, cudaSetDevice(ev->device));
    ML_WAIT_EVENT(ev);  // polls, with NCCL's errors and timeout, where the context ran NCCL work
  });
}

}  // extern "C"
