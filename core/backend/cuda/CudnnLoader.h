// cuDNN, loaded with dlopen on the first convolution: only mlcuda_conv2d_* need it, so the plugin
// loads, and Dense models train, where cuDNN is not installed. cudnn.h is included for the types and
// the prototypes the table's entries copy; the plugin does not link libcudnn (tests/gpu checks its
// NEEDED entries). The legacy convolution API (cudnn_cnn_v9.h) is all the plugin calls.
#pragma once
#include <cudnn.h>

#include <string>

namespace mlcuda {

// The cuDNN functions the plugin calls.
struct CudnnApi {
  std::string path;          // the file that was loaded
  size_t version = 0;        // cudnnGetVersion: 91900 for 9.19.0
  size_t cudartVersion = 0;  // the CUDA runtime cuDNN was built with: 13000 for 13.0
  decltype(&::cudnnGetVersion) getVersion = nullptr;
  decltype(&::cudnnGetCudartVersion) getCudartVersion = nullptr;
  decltype(&::cudnnGetErrorString) getErrorString = nullptr;
  decltype(&::cudnnGetLastErrorString) getLastErrorString = nullptr;
  decltype(&::cudnnCreate) create = nullptr;
  decltype(&::cudnnDestroy) destroy = nullptr;
  decltype(&::cudnnSetStream) setStream = nullptr;
  decltype(&::cudnnCreateTensorDescriptor) createTensorDescriptor = nullptr;
  decltype(&::cudnnSetTensor4dDescriptor) setTensor4dDescriptor = nullptr;
  decltype(&::cudnnDestroyTensorDescriptor) destroyTensorDescriptor = nullptr;
  decltype(&::cudnnCreateFilterDescriptor) createFilterDescriptor = nullptr;
  decltype(&::cudnnSetFilter4dDescriptor) setFilter4dDescriptor = nullptr;
  decltype(&::cudnnDestroyFilterDescriptor) destroyFilterDescriptor = nullptr;
  decltype(&::cudnnCreateConvolutionDescriptor) createConvolutionDescriptor = nullptr;
  decltype(&::cudnnSetConvolution2dDescriptor) setConvolution2dDescriptor = nullptr;
  decltype(&::cudnnSetConvolutionMathType) setConvolutionMathType = nullptr;
  decltype(&::cudnnGetConvolution2dForwardOutputDim) getConvolution2dForwardOutputDim = nullptr;
  decltype(&::cudnnDestroyConvolutionDescriptor) destroyConvolutionDescriptor = nullptr;
  decltype(&::cudnnGetConvolutionForwardAlgorithmMaxCount) getForwardAlgorithmMaxCount = nullptr;
  decltype(&::cudnnGetConvolutionForwardAlgorithm_v7) getForwardAlgorithm = nullptr;
  decltype(&::cudnnGetConvolutionForwardWorkspaceSize) getForwardWorkspaceSize = nullptr;
  decltype(&::cudnnConvolutionForward) convolutionForward = nullptr;
  decltype(&::cudnnGetConvolutionBackwardDataAlgorithmMaxCount) getBackwardDataAlgorithmMaxCount = nullptr;
  decltype(&::cudnnGetConvolutionBackwardDataAlgorithm_v7) getBackwardDataAlgorithm = nullptr;
  decltype(&::cudnnGetConvolutionBackwardDataWorkspaceSize) getBackwardDataWorkspaceSize = nullptr;
  decltype(&::cudnnConvolutionBackwardData) convolutionBackwardData = nullptr;
  decltype(&::cudnnGetConvolutionBackwardFilterAlgorithmMaxCount) getBackwardFilterAlgorithmMaxCount = nullptr;
  decltype(&::cudnnGetConvolutionBackwardFilterAlgorithm_v7) getBackwardFilterAlgorithm = nullptr;
  decltype(&::cudnnGetConvolutionBackwardFilterWorkspaceSize) getBackwardFilterWorkspaceSize = nullptr;
  decltype(&::cudnnConvolutionBackwardFilter) convolutionBackwardFilter = nullptr;
};

// The environment variable that names the cuDNN library to load (a full path), e.g. the one in
// PyTorch's wheel: .../site-packages/nvidia/cudnn/lib/libcudnn.so.9.
inline constexpr const char* kCudnnLibraryEnv = "MIRRORLAB_CUDNN_LIBRARY";

// Loads cuDNN on the first call (thread-safe; kept loaded to the process's end). Looks at
// $MIRRORLAB_CUDNN_LIBRARY alone when it is set; otherwise libcudnn.so.9 on the loader's path,
// beside the CUDA runtime and in the CUDA toolkit, then in Python's nvidia-cudnn wheels. Throws a
// Failure (MLCUDA_ERR_CUDNN) that says what was tried and what to do; a later call tries again.
const CudnnApi& cudnn();
// The table when cuDNN has been loaded, else null (loads nothing).
const CudnnApi* cudnnIfLoaded();
// "9.19.0" from 91900 (and 8.9.7 from 8907, the encoding before 9).
std::string cudnnVersionText(size_t version);

// Throws a Failure naming the call, file:line and device with cuDNN's own words on its last error;
// MLCUDA_ERR_OUT_OF_MEMORY when cuDNN could not allocate, else MLCUDA_ERR_CUDNN.
void checkCudnn(cudnnStatus_t s, const char* call, const char* file, int line, const std::string& device);

}  // namespace mlcuda

#define ML_CUDNN(device, call) ::mlcuda::checkCudnn((call), #call, __FILE__, __LINE__, (device))
