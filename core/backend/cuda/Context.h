// What a replica holds on its GPU: the device, a compute and a comm stream, a cuBLAS handle bound to
// the compute stream, a scratch buffer that grows on demand, and, from its first convolution on, its
// cuDNN state (ConvPlans.h).
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "backend/cuda/Check.h"
#include "backend/cuda/Wait.h"

namespace mlcuda {
struct CudnnState;  // ConvPlans.h: a cuDNN handle, its workspace and the convolution plans
}

struct mlcuda_context {
  int device = 0;
  std::string label;       // "gpu:0", or "gpu:0/2" for logical replica 2 on GPU 0
  std::string deviceName;  // "NVIDIA H200"
  cudaStream_t compute = nullptr;
  cudaStream_t comm = nullptr;
  cublasHandle_t cublas = nullptr;
  bool allowTf32 = false;  // mlcuda_context_create's allow_tf32: cuBLAS and cuDNN may use TF32
  void* scratch = nullptr;
  size_t scratchBytes = 0;
  // Mixed precision's second scratch (PluginMixed.cpp): its rounded operands stay valid across the
  // float32 convolution entry points it calls, which use the first.
  void* lowScratch = nullptr;
  size_t lowScratchBytes = 0;
  // The comm stream's own scratch: the bfloat16 wire format of an all-reduce (PluginUpdates.cpp).
  void* commScratch = nullptr;
  size_t commScratchBytes = 0;
  // The NCCL communicator whose all-reduces ran on the comm stream, once one has (Wait.h): the
  // context's waits then poll, see NCCL's errors and time out instead of blocking for ever.
  std::shared_ptr<mlcuda::NcclLink> nccl = std::make_shared<mlcuda::NcclLink>();
  // Created by the first convolution (which loads cuDNN); destroyed with the context.
  mlcuda::CudnnState* cudnn = nullptr;
};

struct mlcuda_event {
  int device = 0;
  std::string label;
  cudaEvent_t event = nullptr;
  std::shared_ptr<mlcuda::NcclLink> nccl;  // the context's: waiting for the event is waiting for its streams
};

namespace mlcuda {

// Checks ctx and makes its device current on the calling thread (every entry point calls it:
// replica threads may have switched devices in between).
void use(mlcuda_context* ctx);
cudaStream_t streamOf(mlcuda_context* ctx, int which);
// cudaMalloc with a message that names the device, the size and the free memory.
void* deviceAlloc(int device, const std::string& label, const std::string& deviceName, size_t bytes, const char* file, int line);
// Regions of one scratch allocation, each 256-byte aligned (cuBLAS and cuDNN like aligned operands).
struct Carve {
  size_t total = 0;
  size_t add(size_t bytes) {
    const size_t at = total;
    total += (bytes + 255) / 256 * 256;
    return at;
  }
};
// The context's scratch, at least `bytes` long; valid until the next call that uses scratch.
// Growing waits for the compute stream (work in flight may still read the old buffer).
void* scratch(mlcuda_context* ctx, size_t bytes);
// The same for the context's second scratch (lowScratch).
void* lowScratch(mlcuda_context* ctx, size_t bytes);
// The comm stream's scratch; growing waits for the comm stream.
void* commScratch(mlcuda_context* ctx, size_t bytes);
// The calling C entry point's check that an int64 size fits the int that cuBLAS takes.
int toInt(int64_t v, const char* what);
// Checks a Conv2D or pooling geometry (PluginConv.cpp): sizes positive, paddings that give (oh, ow);
// pooling: filters == c, paddings smaller than the window, argmax positions that fit an int32.
// Throws MLCUDA_ERR_INVALID_ARGUMENT naming `who` and the field.
void requireGeometry(const mlcuda_conv_geometry* g, const char* who, bool pooling);
// Frees the context's cuDNN state, if any (ConvPlans.cpp); its streams must be idle.
void destroyCudnnState(mlcuda_context* ctx);

}  // namespace mlcuda
