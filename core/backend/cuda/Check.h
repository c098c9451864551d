// Error checking inside the plugin: every CUDA, cuBLAS and NCCL call goes through a macro
// that throws a Failure naming the call, file:line and device; the C entry points turn it into an
// mlcuda_status (guarded), so no exception crosses the plugin boundary.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <exception>
#include <string>

#include "backend/cuda/CudaPluginApi.h"

namespace mlcuda {

class Failure : public std::exception {
 public:
  Failure(int code, std::string message) : code_(code), message_(std::move(message)) {}
  int code() const { return code_; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  int code_;
  std::string message_;
};

[[noreturn]] void fail(int code, const std::string& message);
// "core/backend/cuda/Layers.cpp:42" from __FILE__ and __LINE__.
std::string where(const char* file, int line);
std::string formatBytes(double bytes);

void checkCuda(cudaError_t e, const char* call, const char* file, int line, const std::string& device);
void checkCublas(cublasStatus_t s, const char* call, const char* file, int line, const std::string& device);
void checkNccl(ncclResult_t r, ncclComm_t comm, const char* call, const char* file, int line, const std::string& device);
// After a kernel launch: reports a bad configuration or an earlier asynchronous error.
void checkLaunch(const char* kernel, const char* file, int line, const std::string& device);

mlcuda_status okStatus();
mlcuda_status makeStatus(int code, const std::string& message);

// Runs f and converts whatever it throws into a status.
template <class F>
mlcuda_status guarded(F&& f) noexcept {
  try {
    f();
    return okStatus();
  } catch (const Failure& e) {
    return makeStatus(e.code(), e.what());
  } catch (const std::bad_alloc&) {
    return makeStatus(MLCUDA_ERR_OUT_OF_MEMORY, "out of host memory inside the CUDA plugin");
  } catch (const std::exception& e) {
    return makeStatus(MLCUDA_ERR_INTERNAL, std::string("CUDA plugin: ") + e.what());
  } catch (...) {
    return makeStatus(MLCUDA_ERR_INTERNAL, "CUDA plugin: unknown exception");
  }
}

}  // namespace mlcuda

#define ML_CUDA(device, call) ::mlcuda::checkCuda((call), #call, __FILE__, __LINE__, (device))
#define ML_CUBLAS(device, call) ::mlcuda::checkCublas((call), #call, __FILE__, __LINE__, (device))
#define ML_NCCL(device, comm, call) ::mlcuda::checkNccl((call), (comm), #call, __FILE__, __LINE__, (device))
#define ML_LAUNCHED(device, kernel) ::mlcuda::checkLaunch((kernel), __FILE__, __LINE__, (device))
#define ML_REQUIRE(cond, message)                                                                                           \
  do {                                                                                                                      \
    if (!(cond))                                                                                                            \
      ::mlcuda::fail(MLCUDA_ERR_INVALID_ARGUMENT, std::string(message) + " (" + ::mlcuda::where(__FILE__, __LINE__) + ")"); \
  } while (0)
