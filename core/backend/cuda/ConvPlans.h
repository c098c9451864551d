// A context's cuDNN state for Conv2D: the handle (bound to the compute stream), one workspace, and a
// plan per geometry and batch size: the descriptors cuDNN is called with and the algorithm chosen for
// each pass. Created on the context's first convolution, destroyed with the context.
//
// Layout: NHWC tensors (Keras' channels-last, no copy) and a KRSC filter (filters, kh, kw, c), which
// is the transpose of Keras' HWIO kernel (kh, kw, c, filters) viewed as a (kh*kw*c, filters) matrix;
// cuDNN takes no HWIO filter, so the kernel is transposed into scratch (PluginConv.cpp).
//
// Padding: cuDNN pads symmetrically. Where TensorFlow's "same" padding puts one more row or column at
// the bottom or right, the plan describes the input as explicitly padded, (hp, wp) = (h + top +
// bottom, w + left + right), with no cuDNN padding; PluginConv.cpp pads it into scratch and crops
// the input gradient out of a padded one.
//
// Algorithms: cudnnGetConvolution*Algorithm_v7 (heuristics, no trial runs), the first result, in
// cuDNN's order of expected speed, that succeeded, has an allowed math type, is deterministic for the
// two backward passes (reproducible runs), and fits the workspace cap; else the allowed one that
// needs the least workspace. Math: with allow_tf32 off, CUDNN_FMA_MATH only (float32 stays float32,
// as cuBLAS does: CUBLAS_DEFAULT_MATH); with it on, the descriptor starts at CUDNN_DEFAULT_MATH, which
// lets cuDNN offer TF32 tensor-core algorithms, and each pass runs with the math type its result
// names (never CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, which may go below TF32). The choice depends on
// the geometry, the batch and the GPU model only (the cap comes from the GPU's total memory, not its
// free memory), so a run gives the same bits each time.
//
// Workspace: one buffer per context, grown to the largest need. Growing waits for the compute stream
// before freeing the old buffer (work in flight may still use it), as the scratch does: it grows in the
// first steps only (each new geometry once), and a plain cudaMalloc'd buffer keeps the plugin's memory
// reports and out-of-memory messages whole, where a stream-ordered pool (cudaMallocAsync) would hold
// memory the device's free figure does not show.
#pragma once
#include <cudnn.h>

#include <array>
#include <cstddef>
#include <map>
#include <memory>
#include <string>

#include "backend/cuda/Context.h"
#include "backend/cuda/CudnnLoader.h"

namespace mlcuda {

enum class ConvPass { Forward, BackwardData, BackwardFilter };

// One pass's algorithm, chosen on its first use.
struct ConvAlgo {
  bool chosen = false;
  int algo = 0;  // cudnnConvolutionFwdAlgo_t, cudnnConvolutionBwdDataAlgo_t or cudnnConvolutionBwdFilterAlgo_t
  cudnnMathType_t math = CUDNN_FMA_MATH;
  size_t workspaceBytes = 0;
};

struct ConvPlan {
  ConvPlan() = default;
  ConvPlan(const ConvPlan&) = delete;
  ConvPlan& operator=(const ConvPlan&) = delete;
  ~ConvPlan();             // destroys the descriptors
  bool padded = false;     // asymmetric padding: cuDNN sees the input padded into scratch, (n, hp, wp, c)
  int64_t hp = 0, wp = 0;  // the input's height and width as cuDNN sees it
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  ConvAlgo forward, backwardData, backwardFilter;
  std::string what;  // "batch 64, input 28x28x3, 3x3 kernel, 16 filters, ...": for messages
};

struct CudnnState {
  CudnnState() = default;
  CudnnState(const CudnnState&) = delete;
  CudnnState& operator=(const CudnnState&) = delete;
  ~CudnnState();  // the plans, the handle, the workspace (the streams must be idle)
  cudnnHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspaceBytes = 0;
  size_t workspaceCap = 0;  // the largest workspace an algorithm is chosen for (GPU memory / 64, 64 MiB..1 GiB)
  // Key: the geometry's 14 fields, then the batch.
  std::map<std::array<int64_t, 15>, std::unique_ptr<ConvPlan>> plans;
};

// The context's state, made on first use: loads cuDNN (MLCUDA_ERR_CUDNN with what to do when it
// cannot), creates the handle on the context's device and binds it to the compute stream.
CudnnState& cudnnState(mlcuda_context* ctx);
// The plan of this (checked) geometry and batch, made on first use.
ConvPlan& convPlan(mlcuda_context* ctx, const mlcuda_conv_geometry& g, int64_t n);
// Makes the pass ready to run: its algorithm (chosen on first use), the convolution descriptor's math
// type set to the algorithm's, and *workspace at least algo.workspaceBytes long (null when 0). Valid
// until the next call that grows the workspace.
const ConvAlgo& preparePass(mlcuda_context* ctx, ConvPlan& plan, ConvPass pass, void** workspace);

}  // namespace mlcuda
