// The fake plugin's shared pieces (FakeCudaPlugin.cpp, FakeConvLayers.cpp): its context, event and
// communicator types, and the helpers that build statuses and queue work on a fake stream.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "FakeStreams.h"
#include "backend/cuda/CudaPluginApi.h"

struct mlcuda_context {
  int device;
  std::string label;
  bool tf32 = false;  // products see TF32 inputs, as cuBLAS' TF32 tensor-op math does
  fake::Stream* compute = nullptr;
  fake::Stream* comm = nullptr;
};
struct mlcuda_event {
  std::shared_ptr<fake::Signal> latest;  // the newest recording (what a wait waits for)
};
namespace fake {
struct NcclGroup;  // a communicator across workers (FakeCudaPlugin.cpp)
}
struct mlcuda_nccl {
  std::vector<int> devices;
  std::shared_ptr<fake::NcclGroup> group;  // across workers: the shared communicator, else null
  std::vector<int> ranks;                  // this process's ranks in it
  uint64_t calls = 0;                      // all-reduces made so far (each worker makes the same ones)
};

namespace fake {

inline mlcuda_status status(int code, const std::string& m) {
  mlcuda_status s;
  s.code = code;
  const size_t n = std::min(m.size(), sizeof s.message - 1);
  std::memcpy(s.message, m.data(), n);
  s.message[n] = '\0';
  return s;
}
inline mlcuda_status ok() { return status(MLCUDA_OK, ""); }

inline Span span(const void* p, int64_t count, size_t size) {
  return Span{p, p && count > 0 ? static_cast<size_t>(count) * size : 0};
}
inline Span floats(const void* p, int64_t count) { return span(p, count, sizeof(float)); }

// float -> bfloat16 -> float, to nearest even (as __float2bfloat16_rn); NaN stays NaN.
inline float roundBf16(float v) {
  if (v != v) return v;
  uint32_t u;
  std::memcpy(&u, &v, 4);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  std::memcpy(&v, &u, 4);
  return v;
}

// Queues f on ctx's compute stream as `what`, reading and writing the given spans.
inline mlcuda_status launch(mlcuda_context* ctx, const char* what, std::vector<Span> reads, std::vector<Span> writes,
                            std::function<void()> f) {
  if (!ctx) return status(MLCUDA_ERR_INVALID_ARGUMENT, std::string(what) + ": null context");
  enqueue(ctx->compute, Work{what, std::move(reads), std::move(writes), std::move(f)});
  return ok();
}

}  // namespace fake
