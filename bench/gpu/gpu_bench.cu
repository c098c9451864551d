// gpu_bench: the ceilings the GPU step is held against, measured on the GPU the check runs on.
//   - the 784-512-512-10 MLP step's own GEMMs in cuBLAS, called as the plugin calls them
//     (core/backend/cuda/PluginLayers.cpp): 3 forward, 3 weight gradients, 2 input gradients (the
//     first layer's is not needed), FP32 (CUBLAS_DEFAULT_MATH, as Mirrorlab without --tf32) and TF32;
//   - device-to-device copy bandwidth (the ceiling of a memory-bound kernel);
//   - the all-reduce over device memory: NCCL across the GPUs where there are several and libnccl
//     loads (dlopen, never linked: MIRRORLAB_NCCL_LIBRARY, else libnccl.so.2), and the sum of 2 and 4
//     buffers on one GPU as the plugin's logical-GPU all-reduce does it (UpdateKernels.cu);
//   - host-to-device copies from pageable and from pinned memory (the batch comes from the host).
// Each figure is one line "name value unit" (medians of repeated runs timed with CUDA events or,
// for synchronous copies, the host clock); "#" lines are remarks, "skip name reason" lines say what
// could not be measured and why. Where there is no GPU (no driver, no device) it prints
// "no GPU: <reason>" and exits 0; a CUDA error on a GPU exits 1.
//   gpu_bench [--quick] [--device N] [--reps N]
// cuBLAS is loaded at run time as well, and the CUDA runtime is linked statically: the program
// starts on any machine, with or without the toolkit or a driver.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace {

bool gQuick = false;
int gReps = 0;  // 0: each measurement's own default

void check(cudaError_t e, const char* call, int line) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "gpu_bench: %s failed: %s (%s), gpu_bench.cu:%d\n", call, cudaGetErrorName(e), cudaGetErrorString(e),
               line);
  std::exit(1);
}
#define CK(call) check((call), #call, __LINE__)

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2);
}

int reps(int normal, int quick) { return gReps > 0 ? gReps : (gQuick ? quick : normal); }

void figure(const std::string& name, double value, const char* unit) { std::printf("%s %.6g %s\n", name.c_str(), value, unit); }

// Milliseconds of `work` enqueued on `s`, median of `n` runs after `warm` untimed ones.
template <class F>
double timeOnStream(cudaStream_t s, int n, int warm, F work) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < warm; ++i) work();
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    CK(cudaEventRecord(a, s));
    work();
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float t = 0;
    CK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return median(ms);
}

// Milliseconds by the host clock (for synchronous work), median of `n` after one untimed run.
template <class F>
double timeOnHost(int n, F work) {
  work();
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    work();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(ms);
}

__global__ void fillKernel(float* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = (static_cast<float>(h & 0xffff) / 65535.0f - 0.5f) * 0.1f;
  }
}

float* deviceBuffer(size_t n, unsigned seed) {
  float* p = nullptr;
  CK(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(float)));
  fillKernel<<<1024, 256>>>(p, n, seed);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());  // the legacy stream does not order the non-blocking streams timed below
  return p;
}

// The plugin's logical-GPU all-reduce (core/backend/cuda/UpdateKernels.cu, localAllReduceKernel):
// each element summed left to right once and written to every buffer, 256 threads, a grid-stride
// loop over at most 65536 blocks.
constexpr int kMaxBuffers = 8;
struct BufferList {
  float* p[kMaxBuffers];
};
__global__ void localAllReduceKernel(BufferList b, int count, long long elements) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < elements;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    float s = b.p[0][i];
    for (int r = 1; r < count; ++r) s += b.p[r][i];
    for (int r = 0; r < count; ++r) b.p[r][i] = s;
  }
}
unsigned gridFor(long long n) { return static_cast<unsigned>(std::clamp<long long>((n + 255) / 256, 1, 65536)); }

// ---- cuBLAS, loaded at run time ---------------------------------------------------------------
struct Cublas {
  void* lib = nullptr;
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) setStream = nullptr;
  decltype(&cublasSetMathMode) setMathMode = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  decltype(&cublasGetVersion_v2) version = nullptr;
  std::string name, error;
  bool load() {
    for (const char* n : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) {
      if ((lib = dlopen(n, RTLD_NOW | RTLD_LOCAL))) {
        name = n;
        break;
      }
      error = dlerror();
    }
    if (!lib) return false;
    create = reinterpret_cast<decltype(create)>(dlsym(lib, "cublasCreate_v2"));
    destroy = reinterpret_cast<decltype(destroy)>(dlsym(lib, "cublasDestroy_v2"));
    setStream = reinterpret_cast<decltype(setStream)>(dlsym(lib, "cublasSetStream_v2"));
    setMathMode = reinterpret_cast<decltype(setMathMode)>(dlsym(lib, "cublasSetMathMode"));
    sgemm = reinterpret_cast<decltype(sgemm)>(dlsym(lib, "cublasSgemm_v2"));
    version = reinterpret_cast<decltype(version)>(dlsym(lib, "cublasGetVersion_v2"));
    if (!create || !destroy || !setStream || !setMathMode || !sgemm || !version) {
      error = name + " lacks a cuBLAS v2 entry point";
      return false;
    }
    return true;
  }
};

void ckb(cublasStatus_t s, const char* call, int line) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  std::fprintf(stderr, "gpu_bench: %s failed: cuBLAS status %d, gpu_bench.cu:%d\n", call, static_cast<int>(s), line);
  std::exit(1);
}
#define CKB(call) ckb((call), #call, __LINE__)

// One GEMM of the step, as the plugin calls cublasSgemm (column-major views of row-major tensors).
struct Gemm {
  std::string name;
  cublasOperation_t ta, tb;
  int m, n, k, lda, ldb, ldc;
  const float *a, *b;
  float* c;
  float beta;
  double flops() const { return 2.0 * m * n * k; }
};

// The 784-512-512-10 MLP at batch `batch`: its 8 GEMMs with buffers of their sizes, median
// milliseconds of all 8 in a row and of each alone, in FP32 and in TF32.
void mlpGemms(Cublas& cb, cudaStream_t s, int batch) {
  const int sizes[] = {784, 512, 512, 10};
  const int layers = 3;
  std::vector<float*> owned;
  auto buf = [&](size_t n) {
    owned.push_back(deviceBuffer(n, static_cast<unsigned>(owned.size() * 7919 + 1)));
    return owned.back();
  };
  const int B = batch;
  std::vector<float*> act(layers + 1), w(layers), dw(layers), dz(layers), dx(layers, nullptr);
  for (int l = 0; l <= layers; ++l) act[static_cast<size_t>(l)] = buf(size_t(B) * sizes[l]);
  std::vector<Gemm> g;
  for (int l = 0; l < layers; ++l) {
    const int I = sizes[l], O = sizes[l + 1];
    const size_t L = static_cast<size_t>(l);
    w[L] = buf(size_t(I) * O);
    dw[L] = buf(size_t(I) * O);
    dz[L] = buf(size_t(B) * O);
    if (l > 0) dx[L] = buf(size_t(B) * I);
  }
  for (int l = 0; l < layers; ++l) {  // forward: y (n, out) = x W: sgemm(N, N, out, n, in, W, x, y)
    const int I = sizes[l], O = sizes[l + 1];
    const size_t L = static_cast<size_t>(l);
    g.push_back({"fwd" + std::to_string(l + 1), CUBLAS_OP_N, CUBLAS_OP_N, O, B, I, O, I, O, w[L], act[L], act[L + 1], 0.0f});
  }
  for (int l = layers - 1; l >= 0; --l) {  // backward, last layer first
    const int I = sizes[l], O = sizes[l + 1];
    const size_t L = static_cast<size_t>(l);
    // dW (in, out) += x^T dz: sgemm(N, T, out, in, n, dz, x, dW), beta 1
    g.push_back({"dw" + std::to_string(l + 1), CUBLAS_OP_N, CUBLAS_OP_T, O, I, B, O, I, O, dz[L], act[L], dw[L], 1.0f});
    // dx (n, in) = dz W^T: sgemm(T, N, in, n, out, W, dz, dx); not for the first layer
    if (l > 0) g.push_back({"dx" + std::to_string(l + 1), CUBLAS_OP_T, CUBLAS_OP_N, I, B, O, O, O, I, w[L], dz[L], dx[L], 0.0f});
  }
  cublasHandle_t h;
  CKB(cb.create(&h));
  CKB(cb.setStream(h, s));
  const float one = 1.0f;
  auto run = [&](const Gemm& x) {
    CKB(cb.sgemm(h, x.ta, x.tb, x.m, x.n, x.k, &one, x.a, x.lda, x.b, x.ldb, &x.beta, x.c, x.ldc));
  };
  double flops = 0;
  for (const auto& x : g) flops += x.flops();
  const std::string tag = "b" + std::to_string(batch);
  const int n = reps(batch >= 2048 ? 50 : 200, 5);
  for (const bool tf32 : {false, true}) {
    CKB(cb.setMathMode(h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    const std::string mode = tf32 ? "tf32" : "fp32";
    const double all = timeOnStream(s, n, 5, [&] {
      for (const auto& x : g) run(x);
    });
    figure("gemms_" + tag + "_" + mode, all, "ms");
    figure("gemms_" + tag + "_" + mode + "_rate", flops / (all * 1e-3) / 1e12, "TFLOP/s");
    if (!tf32)
      for (const auto& x : g) figure("gemm_" + tag + "_" + x.name, timeOnStream(s, n, 2, [&] { run(x); }), "ms");
  }
  std::printf("# %s: %zu GEMMs, %.4g GFLOP per step (3 forward, 3 weight gradients, 2 input gradients)\n", tag.c_str(), g.size(),
              flops / 1e9);
  CKB(cb.destroy(h));
  CK(cudaStreamSynchronize(s));
  for (float* p : owned) CK(cudaFree(p));
}

// ---- NCCL, loaded at run time (no header: the few declarations it needs) ------------------------
using ncclComm_t = struct ncclComm*;
using ncclResult_t = int;  // ncclSuccess = 0
constexpr int kNcclFloat32 = 7, kNcclSum = 0;
struct Nccl {
  void* lib = nullptr;
  ncclResult_t (*getVersion)(int*) = nullptr;
  ncclResult_t (*commInitAll)(ncclComm_t*, int, const int*) = nullptr;
  ncclResult_t (*commDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*allReduce)(const void*, void*, size_t, int, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*groupStart)() = nullptr;
  ncclResult_t (*groupEnd)() = nullptr;
  const char* (*errorString)(ncclResult_t) = nullptr;
  std::string path, error;
  bool load() {
    const char* env = std::getenv("MIRRORLAB_NCCL_LIBRARY");
    path = env && *env ? env : "libnccl.so.2";
    lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      error = dlerror();
      return false;
    }
    auto sym = [&](auto& f, const char* n) { f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(dlsym(lib, n)); };
    sym(getVersion, "ncclGetVersion");
    sym(commInitAll, "ncclCommInitAll");
    sym(commDestroy, "ncclCommDestroy");
    sym(allReduce, "ncclAllReduce");
    sym(groupStart, "ncclGroupStart");
    sym(groupEnd, "ncclGroupEnd");
    sym(errorString, "ncclGetErrorString");
    if (!getVersion || !commInitAll || !commDestroy || !allReduce || !groupStart || !groupEnd || !errorString) {
      error = path + " lacks an NCCL entry point";
      return false;
    }
    return true;
  }
  void ck(ncclResult_t r, const char* call) const {
    if (r == 0) return;
    std::fprintf(stderr, "gpu_bench: %s failed: %s\n", call, errorString(r));
    std::exit(1);
  }
};

// NCCL's all-reduce over `gpus` GPUs: bus bandwidth (2(n-1)/n x bytes / time, NCCL's own measure)
// for 64 MiB per GPU and the time for the MLP's gradient.
void ncclAllReduce(int gpus, size_t modelElements) {
  Nccl nc;
  if (!nc.load()) {
    std::printf("skip nccl_allreduce %s could not be loaded: %s\n", nc.path.c_str(), nc.error.c_str());
    return;
  }
  int v = 0;
  nc.ck(nc.getVersion(&v), "ncclGetVersion");
  std::printf("# NCCL %d (%s), %d GPUs\n", v, nc.path.c_str(), gpus);
  std::vector<int> devs(static_cast<size_t>(gpus));
  for (int i = 0; i < gpus; ++i) devs[static_cast<size_t>(i)] = i;
  std::vector<ncclComm_t> comms(static_cast<size_t>(gpus));
  nc.ck(nc.commInitAll(comms.data(), gpus, devs.data()), "ncclCommInitAll");
  const size_t big = (gQuick ? 4u : 64u) << 20;  // bytes per GPU
  std::vector<float*> bufs(static_cast<size_t>(gpus));
  std::vector<cudaStream_t> streams(static_cast<size_t>(gpus));
  for (int i = 0; i < gpus; ++i) {
    CK(cudaSetDevice(i));
    CK(cudaStreamCreateWithFlags(&streams[static_cast<size_t>(i)], cudaStreamNonBlocking));
    bufs[static_cast<size_t>(i)] = deviceBuffer(big / sizeof(float), static_cast<unsigned>(i + 1));
  }
  for (int i = 0; i < gpus; ++i) {
    CK(cudaSetDevice(i));
    CK(cudaDeviceSynchronize());
  }
  auto once = [&](size_t elements) {
    nc.ck(nc.groupStart(), "ncclGroupStart");
    for (int i = 0; i < gpus; ++i) {
      const size_t I = static_cast<size_t>(i);
      nc.ck(nc.allReduce(bufs[I], bufs[I], elements, kNcclFloat32, kNcclSum, comms[I], streams[I]), "ncclAllReduce");
    }
    nc.ck(nc.groupEnd(), "ncclGroupEnd");
    for (int i = 0; i < gpus; ++i) CK(cudaStreamSynchronize(streams[static_cast<size_t>(i)]));
  };
  const std::string tag = "nccl_allreduce_gpus" + std::to_string(gpus);
  for (int w = 0; w < 3; ++w) once(big / sizeof(float));
  const double msBig = timeOnHost(reps(20, 3), [&] { once(big / sizeof(float)); });
  figure(tag + (gQuick ? "_4MiB_busbw" : "_64MiB_busbw"), 2.0 * (gpus - 1) / gpus * double(big) / (msBig * 1e-3) / 1e9, "GB/s");
  const double msModel = timeOnHost(reps(50, 3), [&] { once(modelElements); });
  figure(tag + "_mlp_gradient", msModel * 1e3, "us");
  for (int i = 0; i < gpus; ++i) {
    const size_t I = static_cast<size_t>(i);
    CK(cudaSetDevice(i));
    CK(cudaFree(bufs[I]));
    CK(cudaStreamDestroy(streams[I]));
    nc.commDestroy(comms[I]);
  }
  CK(cudaSetDevice(0));
}

}  // namespace

int main(int argc, char** argv) {
  int device = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      gQuick = true;
    } else if (a == "--device" && i + 1 < argc) {
      device = std::atoi(argv[++i]);
    } else if (a == "--reps" && i + 1 < argc) {
      gReps = std::atoi(argv[++i]);
    } else {
      std::printf(
          "usage: gpu_bench [--quick] [--device N] [--reps N]\n"
          "  prints 'name value unit' lines: the 784-512-512-10 MLP's GEMMs in cuBLAS at batch 256 and 4096,\n"
          "  device-to-device, pageable and pinned host-to-device copies, and the all-reduce over device memory\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    // Without a driver the runtime says "insufficient driver": say what is missing.
    void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    std::printf("no GPU: cudaGetDeviceCount says %s (%s)%s: nothing to measure\n", cudaGetErrorName(e), cudaGetErrorString(e),
                driver ? "" : "; no NVIDIA GPU driver found (libcuda.so.1 cannot be loaded)");
    if (driver) dlclose(driver);
    return 0;
  }
  if (count < 1) {
    std::printf("no GPU: cudaGetDeviceCount found no device: nothing to measure\n");
    return 0;
  }
  if (device < 0 || device >= count) {
    std::fprintf(stderr, "gpu_bench: --device %d, but there are %d GPUs\n", device, count);
    return 2;
  }
  CK(cudaSetDevice(device));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, device));
  int driver = 0, runtime = 0;
  CK(cudaDriverGetVersion(&driver));
  CK(cudaRuntimeGetVersion(&runtime));
  std::printf("# gpu_bench on GPU %d of %d: %s, compute capability %d.%d, %d SMs, %.1f GiB; driver %d, runtime %d%s\n", device,
              count, prop.name, prop.major, prop.minor, prop.multiProcessorCount, double(prop.totalGlobalMem) / (1 << 30), driver,
              runtime, gQuick ? "; --quick: fewer repetitions and smaller buffers" : "");
  figure("gpus", count, "count");
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  // The MLP's GEMMs.
  Cublas cb;
  if (cb.load()) {
    cublasHandle_t h;
    CKB(cb.create(&h));
    int v = 0;
    CKB(cb.version(h, &v));
    CKB(cb.destroy(h));
    std::printf("# cuBLAS %d (%s)\n", v, cb.name.c_str());
    for (const int batch : {256, 4096}) mlpGemms(cb, s, batch);
  } else {
    std::printf("skip gemms cuBLAS could not be loaded: %s\n", cb.error.c_str());
  }

  // Device-to-device copy: bytes read plus bytes written per second.
  const size_t d2dBytes = (gQuick ? 16u : 256u) << 20;
  {
    float *a = deviceBuffer(d2dBytes / 4, 1), *b = deviceBuffer(d2dBytes / 4, 2);
    const double ms = timeOnStream(s, reps(20, 3), 3, [&] { CK(cudaMemcpyAsync(b, a, d2dBytes, cudaMemcpyDeviceToDevice, s)); });
    figure(gQuick ? "d2d_copy_16MiB_rw" : "d2d_copy_256MiB_rw", 2.0 * double(d2dBytes) / (ms * 1e-3) / 1e9, "GB/s");
    CK(cudaFree(a));
    CK(cudaFree(b));
  }

  // The logical-GPU all-reduce (one GPU): 2 and 4 buffers, for the MLP's gradient and 64 MiB each.
  // "traffic" counts every buffer read once and written once, to compare with the copy above.
  const size_t modelElements = 784 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10;  // 669,706 parameters
  for (const int buffers : {2, 4}) {
    const size_t bigElements = (gQuick ? 4u : 64u) << 18;  // 64 MiB of floats (4 MiB with --quick)
    for (const size_t elements : {modelElements, bigElements}) {
      BufferList bl{};
      for (int r = 0; r < buffers; ++r) bl.p[r] = deviceBuffer(elements, static_cast<unsigned>(r + 11));
      const long long n = static_cast<long long>(elements);
      const double ms = timeOnStream(s, reps(elements == modelElements ? 100 : 20, 3), 3, [&] {
        localAllReduceKernel<<<gridFor(n), 256, 0, s>>>(bl, buffers, n);
        CK(cudaGetLastError());
      });
      const std::string tag = "local_allreduce_x" + std::to_string(buffers) +
                              (elements == modelElements ? "_mlp_gradient" : (gQuick ? "_4MiB" : "_64MiB"));
      figure(tag, ms * 1e3, "us");
      figure(tag + "_traffic", 2.0 * buffers * double(elements) * 4 / (ms * 1e-3) / 1e9, "GB/s");
      for (int r = 0; r < buffers; ++r) CK(cudaFree(bl.p[r]));
    }
  }
  if (count > 1)
    ncclAllReduce(std::min(count, 8), modelElements);
  else
    std::printf("skip nccl_allreduce one GPU: NCCL refuses two ranks on one GPU, so logical GPUs use the sum above\n");

  // Host to device: 64 MiB from pageable and from pinned memory, and the MLP's input batch of 4096.
  {
    const size_t bytes = (gQuick ? 8u : 64u) << 20, batchBytes = size_t(4096) * 784 * 4;
    void* dev = nullptr;
    CK(cudaMalloc(&dev, bytes));
    std::vector<char> pageable(bytes, 1);
    void* pinned = nullptr;
    CK(cudaMallocHost(&pinned, bytes));
    std::memset(pinned, 1, bytes);
    const std::string size = gQuick ? "8MiB" : "64MiB";
    const int n = reps(10, 3);
    const double msPage = timeOnHost(n, [&] { CK(cudaMemcpy(dev, pageable.data(), bytes, cudaMemcpyHostToDevice)); });
    const double msPin = timeOnHost(n, [&] { CK(cudaMemcpy(dev, pinned, bytes, cudaMemcpyHostToDevice)); });
    figure("h2d_pageable_" + size, double(bytes) / (msPage * 1e-3) / 1e9, "GB/s");
    figure("h2d_pinned_" + size, double(bytes) / (msPin * 1e-3) / 1e9, "GB/s");
    figure("h2d_pageable_batch4096_input",
           timeOnHost(n, [&] { CK(cudaMemcpy(dev, pageable.data(), batchBytes, cudaMemcpyHostToDevice)); }), "ms");
    figure("h2d_pinned_batch4096_input", timeOnHost(n, [&] { CK(cudaMemcpy(dev, pinned, batchBytes, cudaMemcpyHostToDevice)); }),
           "ms");
    CK(cudaFreeHost(pinned));
    CK(cudaFree(dev));
  }
  CK(cudaStreamDestroy(s));
  std::printf("# gpu_bench done\n");
  return 0;
}
