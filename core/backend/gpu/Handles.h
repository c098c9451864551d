// The plugin's handles as owning C++ objects: a device buffer, pinned host memory, an event, a
// context (its device, streams, cuBLAS handle) and an NCCL communicator each free themselves, in
// the right order, even when a constructor throws half-way.
#pragma once
#include <memory>

#include "backend/CudaPlugin.h"

namespace ml {

struct DeviceFree {
  const CudaPlugin* plugin = nullptr;
  mlcuda_context* ctx = nullptr;
  void operator()(void* p) const {
    if (p) plugin->release(ctx, p);  // teardown reports nothing: there is nothing left to do about it
  }
};
template <typename T>
using DeviceBuffer = std::unique_ptr<T, DeviceFree>;

// Page-locked host memory of the plugin (mlcuda_host_alloc).
struct HostFree {
  const CudaPlugin* plugin = nullptr;
  mlcuda_context* ctx = nullptr;
  void operator()(void* p) const {
    if (p) plugin->hostFree(ctx, p);
  }
};
using PinnedBuffer = std::unique_ptr<void, HostFree>;

struct EventDestroy {
  const CudaPlugin* plugin = nullptr;
  void operator()(mlcuda_event* e) const {
    if (e) plugin->eventDestroy(e);
  }
};
using GpuEvent = std::unique_ptr<mlcuda_event, EventDestroy>;

// Waits for the context's streams first: work in flight may still use its buffers.
struct ContextDestroy {
  const CudaPlugin* plugin = nullptr;
  void operator()(mlcuda_context* c) const {
    if (!c) return;
    plugin->synchronize(c);
    plugin->contextDestroy(c);
  }
};
using GpuContext = std::unique_ptr<mlcuda_context, ContextDestroy>;

struct NcclDestroy {
  const CudaPlugin* plugin = nullptr;
  void operator()(mlcuda_nccl* n) const {
    if (n) plugin->ncclDestroy(n);
  }
};
using NcclComm = std::unique_ptr<mlcuda_nccl, NcclDestroy>;

}  // namespace ml
