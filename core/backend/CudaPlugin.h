// The CUDA plugin as the core sees it: the C entry points of libmirrorlab_cuda.so, found and loaded
// at run time (never linked), so that the program starts on machines without CUDA. No CUDA header.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/CudaPluginApi.h"

namespace ml {

struct CudaPlugin {
  std::string path;       // the file that was loaded
  std::string buildInfo;  // mlcuda_build_info()

  // decltype of the declarations only: nothing here refers to the plugin's symbols at link time.
  decltype(&mlcuda_api_version) apiVersion = nullptr;
  decltype(&mlcuda_build_info) buildInfoText = nullptr;
  decltype(&mlcuda_probe) probe = nullptr;
  decltype(&mlcuda_nvml_sample) nvmlSample = nullptr;
  decltype(&mlcuda_context_create) contextCreate = nullptr;
  decltype(&mlcuda_context_destroy) contextDestroy = nullptr;
  decltype(&mlcuda_synchronize) synchronize = nullptr;
  decltype(&mlcuda_memory_info) memoryInfo = nullptr;
  decltype(&mlcuda_alloc) allocate = nullptr;
  decltype(&mlcuda_free) release = nullptr;
  decltype(&mlcuda_copy_to_device) copyToDevice = nullptr;
  decltype(&mlcuda_copy_to_host) copyToHost = nullptr;
  decltype(&mlcuda_copy_on_device) copyOnDevice = nullptr;
  decltype(&mlcuda_fill_zero) fillZero = nullptr;
  decltype(&mlcuda_event_create) eventCreate = nullptr;
  decltype(&mlcuda_event_destroy) eventDestroy = nullptr;
  decltype(&mlcuda_event_record) eventRecord = nullptr;
  decltype(&mlcuda_stream_wait_event) streamWaitEvent = nullptr;
  decltype(&mlcuda_event_elapsed_ms) eventElapsedMs = nullptr;
  decltype(&mlcuda_event_synchronize) eventSynchronize = nullptr;
  decltype(&mlcuda_host_alloc) hostAlloc = nullptr;
  decltype(&mlcuda_host_free) hostFree = nullptr;
  decltype(&mlcuda_copy_to_device_async) copyToDeviceAsync = nullptr;
  decltype(&mlcuda_gather_rows) gatherRows = nullptr;
  decltype(&mlcuda_dense_forward) denseForward = nullptr;
  decltype(&mlcuda_dense_backward) denseBackward = nullptr;
  decltype(&mlcuda_activation_forward) activationForward = nullptr;
  decltype(&mlcuda_activation_backward) activationBackward = nullptr;
  decltype(&mlcuda_loss) loss = nullptr;
  decltype(&mlcuda_metric_sum) metricSum = nullptr;
  decltype(&mlcuda_dropout_forward) dropoutForward = nullptr;
  decltype(&mlcuda_dropout_backward) dropoutBackward = nullptr;
  decltype(&mlcuda_sgd_step) sgdStep = nullptr;
  decltype(&mlcuda_adam_step) adamStep = nullptr;
  decltype(&mlcuda_rmsprop_step) rmspropStep = nullptr;
  decltype(&mlcuda_conv2d_forward) conv2dForward = nullptr;
  decltype(&mlcuda_conv2d_backward) conv2dBackward = nullptr;
  decltype(&mlcuda_pool2d_forward) pool2dForward = nullptr;
  decltype(&mlcuda_pool2d_backward) pool2dBackward = nullptr;
  decltype(&mlcuda_global_avg_pool_forward) globalAvgPoolForward = nullptr;
  decltype(&mlcuda_global_avg_pool_backward) globalAvgPoolBackward = nullptr;
  decltype(&mlcuda_batchnorm_moments) batchnormMoments = nullptr;
  decltype(&mlcuda_batchnorm_forward) batchnormForward = nullptr;
  decltype(&mlcuda_batchnorm_eval_stats) batchnormEvalStats = nullptr;
  decltype(&mlcuda_batchnorm_update_moving) batchnormUpdateMoving = nullptr;
  decltype(&mlcuda_batchnorm_backward_sums) batchnormBackwardSums = nullptr;
  decltype(&mlcuda_batchnorm_backward_data) batchnormBackwardData = nullptr;
  decltype(&mlcuda_dense_forward_low) denseForwardLow = nullptr;
  decltype(&mlcuda_dense_backward_low) denseBackwardLow = nullptr;
  decltype(&mlcuda_conv2d_forward_low) conv2dForwardLow = nullptr;
  decltype(&mlcuda_conv2d_backward_low) conv2dBackwardLow = nullptr;
  decltype(&mlcuda_scale) scale = nullptr;
  decltype(&mlcuda_count_nonfinite) countNonfinite = nullptr;
  decltype(&mlcuda_local_allreduce) localAllReduce = nullptr;
  decltype(&mlcuda_nccl_create) ncclCreate = nullptr;
  decltype(&mlcuda_nccl_destroy) ncclDestroy = nullptr;
  decltype(&mlcuda_nccl_allreduce) ncclAllReduce = nullptr;
  decltype(&mlcuda_local_allreduce_bf16) localAllReduceBf16 = nullptr;
  decltype(&mlcuda_nccl_allreduce_bf16) ncclAllReduceBf16 = nullptr;
  decltype(&mlcuda_nccl_unique_id) ncclUniqueId = nullptr;
  decltype(&mlcuda_nccl_create_ranks) ncclCreateRanks = nullptr;
};

// Where the plugin is looked for, in order: $MIRRORLAB_CUDA_PLUGIN when set (then only there), the
// executable's folder (the build tree), its ../lib/mirrorlab (an installed prefix), ../lib, and last the plain file name
// (LD_LIBRARY_PATH, RUNPATH, ld.so.cache).
std::vector<std::string> cudaPluginCandidates();

// Loads the plugin from one file (or a plain name) and checks that it speaks this API version.
// Returns null and sets *why when it cannot. The library is never unloaded.
std::unique_ptr<CudaPlugin> loadCudaPlugin(const std::string& path, std::string* why);

// The process's plugin, looked for once along cudaPluginCandidates(); null with the reason (which
// locations were searched, or why the file found cannot be loaded) when there is none.
const CudaPlugin* cudaPlugin(std::string* why = nullptr);

// Throws ml::UserError with the status's message (which names the call, place and device) on failure.
void throwIfFailed(const mlcuda_status& status);

// 13000 -> "13.0"
std::string cudaVersionText(int version);

}  // namespace ml
