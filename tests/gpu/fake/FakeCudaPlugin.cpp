// A stand-in for libmirrorlab_cuda.so that speaks the same C ABI with host memory and the CPU
// formulas of core/nn: "device" pointers are host pointers. Work is asynchronous as on a GPU: each
// context has a compute and a comm stream, kernels and device copies are queued on them and run only
// when the host synchronises, in a varying order that respects events and waits, and a read that no
// event orders after another stream's write gets NaN (FakeStreams.h). It lets test_gpu_training
// exercise the GPU path of the mirrored step (backend/gpu/CudaBackend: layer translation, buffer
// offsets, buckets, the all-reduce hand-off between replica threads and streams, optimizer slots,
// errors) on a machine without a GPU. It says nothing about the real kernels (test_gpu_kernels).
// FAKE_GPUS (default 2) sets how many GPUs the probe reports; allocations over 16 GiB fail as out of memory.
#include <cblas.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "FakePlugin.h"
#include "backend/cuda/CudaPluginApi.h"
#include "nn/Activations.h"
#include "nn/Loss.h"
#include "nn/OptimizerConstants.h"
#include "random/Rng.h"

namespace {

using fake::floats;
using fake::launch;
using fake::ok;
using fake::span;
using fake::status;

int gpuCount() {
  const char* e = std::getenv("FAKE_GPUS");
  return e ? std::atoi(e) : 2;
}

// Bytes allocated per fake device (mlcuda_alloc minus mlcuda_free), for the NVML sample.
std::mutex allocMutex;
std::map<const void*, std::pair<int, size_t>> allocations;  // pointer -> (device, bytes)
int64_t allocatedBytes(int device) {
  std::lock_guard<std::mutex> lock(allocMutex);
  int64_t sum = 0;
  for (const auto& [p, a] : allocations)
    if (a.first == device) sum += static_cast<int64_t>(a.second);
  return sum;
}

mlcuda_status synced(bool done, const std::string& why) { return done ? ok() : status(MLCUDA_ERR_INTERNAL, why); }

// The all-reduces: each element becomes buffers[0] + buffers[1] + ... (left to right), in all of
// them; with bfloat16 on the wire, each value rounded (to nearest even) before it joins and the
// running sum after each addition.
using fake::roundBf16;
void sumInEveryBuffer(const std::vector<float*>& b, int64_t elements, bool bf16 = false) {
  for (int64_t i = 0; i < elements; ++i) {
    float s = bf16 ? roundBf16(b[0][i]) : b[0][i];
    for (size_t r = 1; r < b.size(); ++r) s = bf16 ? roundBf16(s + roundBf16(b[r][i])) : s + b[r][i];
    for (float* p : b) p[i] = s;
  }
}

fake::Stream* streamOf(mlcuda_context* ctx, int which) {
  return which == MLCUDA_STREAM_COMPUTE ? ctx->compute : which == MLCUDA_STREAM_COMM ? ctx->comm : nullptr;
}

}  // namespace

extern "C" {

MLCUDA_EXPORT int mlcuda_api_version(void) { return MLCUDA_API_VERSION; }
MLCUDA_EXPORT const char* mlcuda_build_info(void) { return "fake CUDA plugin on host memory (tests only)"; }

MLCUDA_EXPORT mlcuda_status mlcuda_probe(mlcuda_gpu_info* gpus, int capacity, mlcuda_probe_result* result) {
  const int n = gpuCount();
  result->device_count = n;
  result->driver_version = 13000;
  result->runtime_version = 13000;
  std::strcpy(result->driver_release, "fake");
  for (int i = 0; i < std::min(n, capacity); ++i) {
    gpus[i] = mlcuda_gpu_info{};
    gpus[i].index = i;
    std::strcpy(gpus[i].name, "Fake GPU (host memory)");
    gpus[i].total_memory_bytes = int64_t{16} << 30;
    gpus[i].cc_major = 9;
    gpus[i].cc_minor = 0;
  }
  if (n == 0) return status(MLCUDA_ERR_NO_DEVICE, "fake plugin: FAKE_GPUS=0");
  return ok();
}

// NVML as the fake sees it: FAKE_NVML=0 reports no NVML (as on a machine whose driver lacks it);
// otherwise utilization 60 + 10 x device %, memory busy 20 %, the bytes this process holds on the
// device, 16 GiB in all, and 45 + device degrees: fixed figures a test can find again in the run.
MLCUDA_EXPORT mlcuda_status mlcuda_nvml_sample(int device, mlcuda_gpu_sample* s) {
  const char* e = std::getenv("FAKE_NVML");
  if (e && std::string(e) == "0") return status(MLCUDA_ERR_NVML, "fake plugin: FAKE_NVML=0, no NVML");
  if (device < 0 || device >= gpuCount()) return status(MLCUDA_ERR_NVML, "fake plugin: no device " + std::to_string(device));
  s->utilization_percent = 60 + 10 * device;
  s->memory_busy_percent = 20;
  s->memory_used_bytes = allocatedBytes(device);
  s->memory_total_bytes = int64_t{16} << 30;
  s->temperature_c = 45 + device;
  return ok();
}

MLCUDA_EXPORT mlcuda_status mlcuda_context_create(int device, const char* label, int allow_tf32, mlcuda_context** ctx) {
  *ctx = nullptr;
  if (device < 0 || device >= gpuCount()) return status(MLCUDA_ERR_NO_DEVICE, "fake plugin: no device " + std::to_string(device));
  *ctx = new mlcuda_context{device, label, allow_tf32 != 0, fake::newStream(std::string(label) + " compute"),
                            fake::newStream(std::string(label) + " comm")};
  return ok();
}
MLCUDA_EXPORT void mlcuda_context_destroy(mlcuda_context* ctx) {
  if (!ctx) return;
  fake::dropStream(ctx->compute);
  fake::dropStream(ctx->comm);
  delete ctx;
}
MLCUDA_EXPORT mlcuda_status mlcuda_synchronize(mlcuda_context* ctx) {
  std::string why;
  return synced(fake::drainStreams({ctx->compute, ctx->comm}, &why), why);
}
MLCUDA_EXPORT mlcuda_status mlcuda_memory_info(mlcuda_context*, size_t* f, size_t* t) {
  if (f) *f = size_t{16} << 30;
  if (t) *t = size_t{16} << 30;
  return ok();
}

MLCUDA_EXPORT mlcuda_status mlcuda_alloc(mlcuda_context* ctx, size_t bytes, void** ptr) {
  *ptr = nullptr;
  if (bytes == 0) return ok();
  if (bytes > (size_t{16} << 30) || !(*ptr = std::malloc(bytes)))
    return status(MLCUDA_ERR_OUT_OF_MEMORY, "out of GPU memory on " + ctx->label + " (Fake GPU): cudaMalloc of " +
                                                std::to_string(bytes) + " bytes failed: use a smaller batch per replica");
  std::memset(*ptr, 0x7f, bytes);  // not zero: like cudaMalloc, the contents are garbage until written
  std::lock_guard<std::mutex> lock(allocMutex);
  allocations[*ptr] = {ctx->device, bytes};
  return ok();
}
MLCUDA_EXPORT mlcuda_status mlcuda_free(mlcuda_context*, void* p) {
  if (!p) return ok();
  std::string why;
  if (!fake::drainAll(&why)) return status(MLCUDA_ERR_INTERNAL, why);  // cudaFree synchronises the device
  {
    std::lock_guard<std::mutex> lock(allocMutex);
    const auto it = allocations.find(p);
    if (it != allocations.end()) fake::forgetMemory(p, it->second.second);
    allocations.erase(p);
  }
  std::free(p);
  return ok();
}
// Copies with the host: queued on the compute stream, then waited for (cudaMemcpyAsync + sync).
MLCUDA_EXPORT mlcuda_status mlcuda_copy_to_device(mlcuda_context* ctx, void* d, const void* s, size_t b) {
  if (!b) return ok();
  std::string why;
  const auto done = fake::enqueue(ctx->compute, fake::Work{"copy to device", {}, {{d, b}}, [=] { std::memcpy(d, s, b); }});
  return synced(fake::waitFor(done, &why), why);
}
MLCUDA_EXPORT mlcuda_status mlcuda_copy_to_host(mlcuda_context* ctx, void* d, const void* s, size_t b) {
  if (!b) return ok();
  std::string why;
  const auto done = fake::enqueue(ctx->compute, fake::Work{"copy to host", {{s, b}}, {}, [=] { std::memcpy(d, s, b); }});
  return synced(fake::waitFor(done, &why), why);
}
MLCUDA_EXPORT mlcuda_status mlcuda_host_alloc(mlcuda_context*, size_t bytes, void** ptr) {
  *ptr = bytes ? std::malloc(bytes) : nullptr;
  return bytes && !*ptr ? status(MLCUDA_ERR_OUT_OF_MEMORY, "fake plugin: host allocation failed") : ok();
}
MLCUDA_EXPORT mlcuda_status mlcuda_host_free(mlcuda_context*, void* ptr) {
  std::string why;
  if (ptr && !fake::drainAll(&why)) return status(MLCUDA_ERR_INTERNAL, why);  // cudaFreeHost synchronises
  std::free(ptr);
  return ok();
}
// Reads the host memory when the copy runs, as the GPU does: a host that rewrites the buffer before
// the copy is known to be done sends the new contents (and a test sees it).
MLCUDA_EXPORT mlcuda_status mlcuda_copy_to_device_async(mlcuda_context* ctx, void* d, const void* s, size_t b) {
  if (!b) return ok();
  return launch(ctx, "copy to device (async)", {}, {{d, b}}, [=] { std::memcpy(d, s, b); });
}
MLCUDA_EXPORT mlcuda_status mlcuda_gather_rows(mlcuda_context* ctx, const float* src, const int64_t* rows, int64_t n,
                                               int64_t width, float* dst) {
  if (n <= 0 || width <= 0) return ok();
  if (!ctx) return status(MLCUDA_ERR_INVALID_ARGUMENT, "gather_rows: null context");
  fake::Work w{"gather_rows", {span(rows, n, 8)}, {floats(dst, n * width)}, [=] {
                 for (int64_t i = 0; i < n; ++i) {
                   if (rows[i] < 0)  // an index the fake gave NaN (read before its copy was ordered): a NaN row
                     std::fill(dst + i * width, dst + (i + 1) * width, std::nanf(""));
                   else
                     std::memcpy(dst + i * width, src + rows[i] * width, sizeof(float) * width);
                 }
               }};
  w.lateReads = [=] {
    std::vector<fake::Span> r;
    for (int64_t i = 0; i < n; ++i)
      if (rows[i] >= 0) r.push_back(floats(src + rows[i] * width, width));
    return r;
  };
  fake::enqueue(ctx->compute, std::move(w));
  return ok();
}
MLCUDA_EXPORT mlcuda_status mlcuda_copy_on_device(mlcuda_context* ctx, void* d, const void* s, size_t b) {
  if (!b || d == s) return ok();
  return launch(ctx, "copy on device", {{s, b}}, {{d, b}}, [=] { std::memmove(d, s, b); });
}
MLCUDA_EXPORT mlcuda_status mlcuda_fill_zero(mlcuda_context* ctx, void* p, size_t b) {
  if (!b) return ok();
  return launch(ctx, "fill zero", {}, {{p, b}}, [=] { std::memset(p, 0, b); });
}

MLCUDA_EXPORT mlcuda_status mlcuda_event_create(mlcuda_context*, mlcuda_event** e) {
  *e = new mlcuda_event;
  return ok();
}
MLCUDA_EXPORT void mlcuda_event_destroy(mlcuda_event* e) { delete e; }
MLCUDA_EXPORT mlcuda_status mlcuda_event_record(mlcuda_context* ctx, int stream, mlcuda_event* e) {
  fake::Stream* s = ctx ? streamOf(ctx, stream) : nullptr;
  if (!s || !e) return status(MLCUDA_ERR_INVALID_ARGUMENT, "mlcuda_event_record: bad stream, context or event");
  e->latest = fake::enqueueRecord(s);
  return ok();
}
MLCUDA_EXPORT mlcuda_status mlcuda_stream_wait_event(mlcuda_context* ctx, int stream, mlcuda_event* e) {
  fake::Stream* s = ctx ? streamOf(ctx, stream) : nullptr;
  if (!s || !e) return status(MLCUDA_ERR_INVALID_ARGUMENT, "mlcuda_stream_wait_event: bad stream, context or event");
  fake::enqueueWait(s, e->latest);
  return ok();
}
MLCUDA_EXPORT mlcuda_status mlcuda_event_synchronize(mlcuda_event* e) {
  std::string why;
  return synced(fake::waitFor(e->latest, &why), why);
}
MLCUDA_EXPORT mlcuda_status mlcuda_event_elapsed_ms(mlcuda_event* a, mlcuda_event* b, float* ms) {
  std::string why;
  if (!a->latest || !b->latest) return status(MLCUDA_ERR_CUDA, "cudaEventElapsedTime: an event was never recorded");
  if (!fake::waitFor(b->latest, &why) || !fake::waitFor(a->latest, &why)) return status(MLCUDA_ERR_INTERNAL, why);
  *ms = static_cast<float>((fake::completedAt(b->latest) - fake::completedAt(a->latest)) * 1e3);
  return ok();
}

// TF32 as the tensor cores see a float32 input: the 13 low mantissa bits rounded off (to nearest,
// ties away from zero); inf and NaN pass. Returns p itself when the context keeps float32.
static const float* tf32Input(const mlcuda_context* ctx, const float* p, int64_t n, std::vector<float>& keep) {
  if (!ctx || !ctx->tf32) return p;
  keep.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, p + i, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & ~0x1fffu;
    std::memcpy(&keep[static_cast<size_t>(i)], &u, 4);
  }
  return keep.data();
}

MLCUDA_EXPORT mlcuda_status mlcuda_dense_forward(mlcuda_context* ctx, const float* x, const float* w, const float* b, float* y,
                                                 int64_t n, int64_t in, int64_t out, int act) {
  if (n == 0) return ok();
  return launch(ctx, "dense_forward", {floats(x, n * in), floats(w, in * out), floats(b, out)}, {floats(y, n * out)}, [=] {
    std::vector<float> xk, wk;
    const float* xi = tf32Input(ctx, x, n * in, xk);
    const float* wi = tf32Input(ctx, w, in * out, wk);
    if (b)
      for (int64_t r = 0; r < n; ++r) std::copy(b, b + out, y + r * out);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(n), int(out), int(in), 1.0f, xi, int(in), wi, int(out),
                b ? 1.0f : 0.0f, y, int(out));
    ml::activationForward(static_cast<ml::Act>(act), y, n, out);
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_dense_backward(mlcuda_context* ctx, const float* x, const float* w, const float* y, float* dy,
                                                  float* dx, float* dw, float* db, int64_t n, int64_t in, int64_t out, int act,
                                                  int fused) {
  if (n == 0) return ok();
  return launch(
      ctx, "dense_backward",
      {floats(x, n * in), floats(w, in * out), floats(y, n * out), floats(dy, n * out), floats(dw, in * out), floats(db, out)},
      {floats(dy, n * out), floats(dx, n * in), floats(dw, in * out), floats(db, out)}, [=] {
        if (!fused) ml::activationBackward(static_cast<ml::Act>(act), y, dy, dy, n, out);
        std::vector<float> xk, wk, dyk;
        const float* dyIn = tf32Input(ctx, dy, n * out, dyk);  // the products' input; the bias gradient sums dy itself
        const float* xi = tf32Input(ctx, x, n * in, xk);
        const float* wi = tf32Input(ctx, w, in * out, wk);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(in), int(out), int(n), 1.0f, xi, int(in), dyIn, int(out), 1.0f,
                    dw, int(out));
        if (db)
          for (int64_t r = 0; r < n; ++r)
            for (int64_t j = 0; j < out; ++j) db[j] += dy[r * out + j];
        if (dx)
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(n), int(in), int(out), 1.0f, dyIn, int(out), wi, int(out),
                      0.0f, dx, int(in));
      });
}

MLCUDA_EXPORT mlcuda_status mlcuda_activation_forward(mlcuda_context* ctx, int act, const float* x, float* y, int64_t n,
                                                      int64_t k) {
  return launch(ctx, "activation_forward", {floats(x, n * k)}, {floats(y, n * k)}, [=] {
    if (x != y) std::copy(x, x + n * k, y);
    ml::activationForward(static_cast<ml::Act>(act), y, n, k);
  });
}
MLCUDA_EXPORT mlcuda_status mlcuda_activation_backward(mlcuda_context* ctx, int act, const float* y, const float* dy, float* dx,
                                                       int64_t n, int64_t k) {
  if (act == MLCUDA_ACT_SOFTMAX && dx == y) return status(MLCUDA_ERR_INVALID_ARGUMENT, "dx aliases y");
  return launch(ctx, "activation_backward", {floats(y, n * k), floats(dy, n * k)}, {floats(dx, n * k)},
                [=] { ml::activationBackward(static_cast<ml::Act>(act), y, dy, dx, n, k); });
}

MLCUDA_EXPORT mlcuda_status mlcuda_loss(mlcuda_context* ctx, int kind, int fromLogits, int fused, const float* pred,
                                        const float* targets, int64_t n, int64_t k, float* grad, double* sum) {
  const int64_t targetCount = kind == MLCUDA_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY ? n : n * k;
  return launch(ctx, "loss", {floats(pred, n * k), floats(targets, targetCount)}, {floats(grad, n * k), span(sum, 1, 8)}, [=] {
    ml::Loss l = ml::Loss::make(static_cast<ml::LossKind>(kind), fromLogits != 0);
    l.setFusedSoftmax(fused != 0);
    *sum = n == 0 ? 0.0 : l.compute(pred, targets, n, k, grad);
  });
}
MLCUDA_EXPORT mlcuda_status mlcuda_metric_sum(mlcuda_context* ctx, int kind, const float* pred, const float* targets, int64_t n,
                                              int64_t k, int64_t td, double* sum) {
  return launch(ctx, "metric_sum", {floats(pred, n * k), floats(targets, n * td)}, {span(sum, 1, 8)},
                [=] { *sum = n == 0 ? 0.0 : ml::metricSum(static_cast<ml::MetricKind>(kind), pred, targets, n, k, td); });
}

MLCUDA_EXPORT mlcuda_status mlcuda_dropout_forward(mlcuda_context* ctx, const float* x, float* y, uint8_t* mask, int64_t n,
                                                   int64_t k, double rate, uint64_t seed, uint64_t salt, uint64_t step,
                                                   const int64_t* ids, int training) {
  const bool drop = training && rate != 0.0;
  return launch(ctx, "dropout_forward", {floats(x, n * k), span(drop ? ids : nullptr, n, 8)},
                {floats(y, n * k), span(drop ? mask : nullptr, n * k, 1)}, [=] {
                  if (!drop) {
                    if (x != y) std::copy(x, x + n * k, y);
                    return;
                  }
                  const uint32_t threshold = static_cast<uint32_t>(rate * 65536.0);
                  const float scale = static_cast<float>(1.0 / (1.0 - rate));
                  for (int64_t r = 0; r < n; ++r) {
                    const uint64_t base =
                        ml::hashKeys(seed ^ salt, step, ids ? static_cast<uint64_t>(ids[r]) : static_cast<uint64_t>(r));
                    for (int64_t j0 = 0; j0 < k; j0 += 4) {
                      uint64_t bits = ml::splitmix64(base + static_cast<uint64_t>(j0));
                      for (int64_t j = j0; j < std::min(k, j0 + 4); ++j, bits >>= 16) {
                        const bool keep = static_cast<uint32_t>(bits & 0xFFFF) >= threshold;
                        mask[r * k + j] = keep;
                        y[r * k + j] = keep ? x[r * k + j] * scale : 0.0f;
                      }
                    }
                  }
                });
}
MLCUDA_EXPORT mlcuda_status mlcuda_dropout_backward(mlcuda_context* ctx, const float* dy, float* dx, const uint8_t* mask,
                                                    int64_t count, double rate, int training) {
  const bool drop = training && rate != 0.0;
  return launch(ctx, "dropout_backward", {floats(dy, count), span(drop ? mask : nullptr, count, 1)}, {floats(dx, count)}, [=] {
    const float scale = static_cast<float>(1.0 / (1.0 - rate));
    for (int64_t i = 0; i < count; ++i) dx[i] = !drop ? dy[i] : (mask[i] ? dy[i] * scale : 0.0f);
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_count_nonfinite(mlcuda_context* ctx, const float* x, int64_t count, unsigned long long* c) {
  return launch(ctx, "count_nonfinite", {floats(x, count), span(c, 1, 8)}, {span(c, 1, 8)}, [=] {
    for (int64_t i = 0; i < count; ++i) *c += std::isfinite(x[i]) ? 0 : 1;
  });
}

MLCUDA_EXPORT mlcuda_status mlcuda_sgd_step(mlcuda_context* ctx, float* p, const float* g, float* v, int64_t n, float scale,
                                            float lr, float m, int nesterov) {
  if (m != 0.0f && !v) return status(MLCUDA_ERR_INVALID_ARGUMENT, "momentum needs a velocity buffer");
  if (m == 0.0f) v = nullptr;
  return launch(ctx, "sgd_step", {floats(p, n), floats(g, n), floats(v, n)}, {floats(p, n), floats(v, n)}, [=] {
    for (int64_t i = 0; i < n; ++i) {
      const float gi = g[i] * scale;
      if (m == 0.0f) {
        p[i] -= lr * gi;
      } else {
        v[i] = m * v[i] - lr * gi;
        p[i] += nesterov ? m * v[i] - lr * gi : v[i];
      }
    }
  });
}
MLCUDA_EXPORT mlcuda_status mlcuda_adam_step(mlcuda_context* ctx, float* p, const float* g, float* m, float* v, int64_t n,
                                             float scale, float lr, double b1, double b2, float eps, int64_t t) {
  if (t < 1) return status(MLCUDA_ERR_INVALID_ARGUMENT, "iteration counts from 1");
  const ml::AdamConstants k = ml::adamConstants(lr, b1, b2, t);
  return launch(ctx, "adam_step", {floats(p, n), floats(g, n), floats(m, n), floats(v, n)},
                {floats(p, n), floats(m, n), floats(v, n)}, [=] {
                  for (int64_t i = 0; i < n; ++i) {
                    const float gi = g[i] * scale;
                    m[i] = k.b1 * m[i] + k.c1 * gi;
                    v[i] = k.b2 * v[i] + k.c2 * gi * gi;
                    p[i] -= k.alpha * m[i] / (std::sqrt(v[i]) + eps);
                  }
                });
}
MLCUDA_EXPORT mlcuda_status mlcuda_rmsprop_step(mlcuda_context* ctx, float* p, const float* g, float* v, float* mom, int64_t n,
                                                float scale, float lr, double rhoSet, float momentum, float eps) {
  if (momentum == 0.0f) mom = nullptr;
  const ml::RmsPropConstants k = ml::rmspropConstants(rhoSet);
  const float rho = k.rho, c = k.c;
  return launch(ctx, "rmsprop_step", {floats(p, n), floats(g, n), floats(v, n), floats(mom, n)},
                {floats(p, n), floats(v, n), floats(mom, n)}, [=] {
                  for (int64_t i = 0; i < n; ++i) {
                    const float gi = g[i] * scale;
                    v[i] = rho * v[i] + c * gi * gi;
                    if (momentum != 0.0f) {
                      mom[i] = momentum * mom[i] + lr * gi / std::sqrt(v[i] + eps);
                      p[i] -= mom[i];
                    } else {
                      p[i] -= lr * gi / std::sqrt(v[i] + eps);
                    }
                  }
                });
}

// On ctx's comm stream: wait for every ready event, sum, then record `done`, as the plugin does.
static mlcuda_status localAllReduce(mlcuda_context* ctx, float* const* bufs, int count, int64_t elements,
                                    mlcuda_event* const* ready, int readyCount, mlcuda_event* done, bool bf16) {
  if (!ctx || count < 1 || count > 64 || (readyCount > 0 && !ready))
    return status(MLCUDA_ERR_INVALID_ARGUMENT, "mlcuda_local_allreduce: bad arguments");
  for (int i = 0; i < readyCount; ++i) fake::enqueueWait(ctx->comm, ready[i]->latest);
  std::vector<float*> b(bufs, bufs + count);
  std::vector<fake::Span> spans;
  for (float* p : b) spans.push_back(floats(p, elements));
  fake::enqueue(ctx->comm,
                fake::Work{"local_allreduce", spans, spans, [b, elements, bf16] { sumInEveryBuffer(b, elements, bf16); }});
  if (done) done->latest = fake::enqueueRecord(ctx->comm);
  return ok();
}
MLCUDA_EXPORT mlcuda_status mlcuda_local_allreduce(mlcuda_context* ctx, float* const* bufs, int count, int64_t elements,
                                                   mlcuda_event* const* ready, int readyCount, mlcuda_event* done) {
  return localAllReduce(ctx, bufs, count, elements, ready, readyCount, done, false);
}
MLCUDA_EXPORT mlcuda_status mlcuda_local_allreduce_bf16(mlcuda_context* ctx, float* const* bufs, int count, int64_t elements,
                                                        mlcuda_event* const* ready, int readyCount, mlcuda_event* done) {
  return localAllReduce(ctx, bufs, count, elements, ready, readyCount, done, true);
}

MLCUDA_EXPORT mlcuda_status mlcuda_nccl_create(const int* devices, int count, mlcuda_nccl** comm) {
  std::vector<int> d(devices, devices + count), s = d;
  std::sort(s.begin(), s.end());
  if (std::adjacent_find(s.begin(), s.end()) != s.end())
    return status(MLCUDA_ERR_INVALID_ARGUMENT, "NCCL cannot place two ranks on one GPU");
  *comm = new mlcuda_nccl{d, nullptr, {}, 0};
  return ok();
}
MLCUDA_EXPORT void mlcuda_nccl_destroy(mlcuda_nccl* c) { delete c; }

// ---- NCCL across workers: the workers of the tests are threads of one process (ThreadWorkers), so
// a communicator made from one id is a group in this process's memory. ----
namespace fake {
struct NcclGroup {
  int nranks = 0;
  int joined = 0;
  std::mutex mu;
  std::condition_variable cv;
  struct Call {
    std::map<int, std::pair<Stream*, float*>> parts;  // by global rank
    int64_t elements = 0;
    bool enqueued = false;
  };
  std::map<uint64_t, Call> calls;  // by the call's number
};
}  // namespace fake

namespace {
std::mutex groupsMutex;
std::map<std::string, std::weak_ptr<fake::NcclGroup>> groups;
std::atomic<uint64_t> nextId{1};
constexpr auto kRendezvous = std::chrono::seconds(60);
}  // namespace

MLCUDA_EXPORT mlcuda_status mlcuda_nccl_unique_id(unsigned char id[MLCUDA_NCCL_ID_BYTES]) {
  std::memset(id, 0, MLCUDA_NCCL_ID_BYTES);
  const uint64_t v = nextId++ ^ (static_cast<uint64_t>(getpid()) << 32);
  std::memcpy(id, &v, sizeof v);
  return ok();
}

// Blocks until nranks ranks have joined, as ncclCommInitRank does.
MLCUDA_EXPORT mlcuda_status mlcuda_nccl_create_ranks(const unsigned char* id, int nranks, const int* ranks, const int* devices,
                                                     int count, mlcuda_nccl** comm) {
  std::shared_ptr<fake::NcclGroup> g;
  {
    std::lock_guard<std::mutex> lock(groupsMutex);
    const std::string key(reinterpret_cast<const char*>(id), MLCUDA_NCCL_ID_BYTES);
    g = groups[key].lock();
    if (!g) {
      g = std::make_shared<fake::NcclGroup>();
      g->nranks = nranks;
      groups[key] = g;
    }
  }
  std::unique_lock<std::mutex> lock(g->mu);
  if (g->nranks != nranks) return status(MLCUDA_ERR_NCCL, "fake NCCL: ranks disagree on the communicator's size");
  g->joined += count;
  g->cv.notify_all();
  if (!g->cv.wait_for(lock, kRendezvous, [&] { return g->joined >= g->nranks; }))
    return status(MLCUDA_ERR_NCCL, "fake NCCL: not every rank joined the communicator within 60 s");
  *comm = new mlcuda_nccl{std::vector<int>(devices, devices + count), g, std::vector<int>(ranks, ranks + count), 0};
  return ok();
}

// Across workers: every worker's call with the same number is one collective over all their comm
// streams, enqueued by the last to arrive (the others wait for that, so that nothing they enqueue
// next lands before it on their streams); the sum is taken in global rank order.
static mlcuda_status crossAllReduce(mlcuda_nccl* comm, mlcuda_context* const* ctxs, float* const* bufs, int64_t elements,
                                    bool bf16) {
  fake::NcclGroup& g = *comm->group;
  const uint64_t call = comm->calls++;
  std::unique_lock<std::mutex> lock(g.mu);
  fake::NcclGroup::Call& c = g.calls[call];
  for (size_t r = 0; r < comm->ranks.size(); ++r) c.parts[comm->ranks[r]] = {ctxs[r]->comm, bufs[r]};
  c.elements = elements;
  if (static_cast<int>(c.parts.size()) == g.nranks) {
    std::vector<float*> b;
    std::vector<fake::Stream*> streams;
    std::vector<fake::Work> parts;
    for (const auto& [rank, part] : c.parts) {
      streams.push_back(part.first);
      b.push_back(part.second);
      parts.push_back(fake::Work{"ncclAllReduce", {floats(part.second, elements)}, {floats(part.second, elements)}, {}});
    }
    if (elements > 0)
      fake::enqueueCollective(streams, std::move(parts), [b, elements, bf16] { sumInEveryBuffer(b, elements, bf16); });
    c.enqueued = true;
    g.cv.notify_all();
  } else if (!g.cv.wait_for(lock, kRendezvous, [&] { return g.calls[call].enqueued; })) {
    return status(MLCUDA_ERR_NCCL, "fake NCCL: another worker did not join all-reduce " + std::to_string(call) + " within 60 s");
  }
  return ok();
}

// One collective over the ranks' comm streams: it runs once every rank's stream reaches it.
static mlcuda_status ncclAllReduce(mlcuda_nccl* comm, mlcuda_context* const* ctxs, float* const* bufs, int64_t elements,
                                   bool bf16) {
  const size_t n = comm->devices.size();
  for (size_t r = 0; r < n; ++r)
    if (ctxs[r]->device != comm->devices[r]) return status(MLCUDA_ERR_INVALID_ARGUMENT, "rank/context device mismatch");
  if (comm->group) return crossAllReduce(comm, ctxs, bufs, elements, bf16);
  if (elements == 0) return ok();
  std::vector<float*> b(bufs, bufs + n);
  std::vector<fake::Stream*> streams;
  std::vector<fake::Work> parts;
  for (size_t r = 0; r < n; ++r) {
    streams.push_back(ctxs[r]->comm);
    parts.push_back(fake::Work{"ncclAllReduce", {floats(b[r], elements)}, {floats(b[r], elements)}, {}});
  }
  fake::enqueueCollective(streams, std::move(parts), [b, elements, bf16] { sumInEveryBuffer(b, elements, bf16); });
  return ok();
}
MLCUDA_EXPORT mlcuda_status mlcuda_nccl_allreduce(mlcuda_nccl* comm, mlcuda_context* const* ctxs, float* const* bufs,
                                                  int64_t elements) {
  return ncclAllReduce(comm, ctxs, bufs, elements, false);
}
MLCUDA_EXPORT mlcuda_status mlcuda_nccl_allreduce_bf16(mlcuda_nccl* comm, mlcuda_context* const* ctxs, float* const* bufs,
                                                       int64_t elements) {
  return ncclAllReduce(comm, ctxs, bufs, elements, true);
}

// For the fake's own tests: how many reads got NaN because nothing ordered them after a write.
MLCUDA_EXPORT uint64_t fake_unordered_reads(void) { return fake::unorderedReads(); }

}  // extern "C"

// The fake defines every entry point of CudaPluginEntryPoints.def (here and in FakeConvLayers.cpp):
// this table takes the address of each, so one left out fails the fake's link (--no-undefined)
// instead of the loader's check when a test first loads it.
namespace {
using EntryPoint = void (*)();
#define MLCUDA_ENTRY(ret, name, field, params) reinterpret_cast<EntryPoint>(&mlcuda_##name),
[[gnu::used]] const EntryPoint kEveryEntryPoint[] = {
#include "backend/cuda/CudaPluginEntryPoints.def"
};
#undef MLCUDA_ENTRY
}  // namespace
