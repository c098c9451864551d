// Turns CUDA, cuBLAS and NCCL failures into messages a user can act on.
#include "backend/cuda/Check.h"

#include <cstdio>
#include <cstring>

#include "backend/cuda/NcclLoader.h"

namespace mlcuda {

void fail(int code, const std::string& message) { throw Failure(code, message); }

std::string where(const char* file, int line) {
  std::string f = file ? file : "?";
  // Keep the path from core/ on: short, and the same on every machine.
  const auto p = f.rfind("core/backend/cuda/");
  if (p != std::string::npos) f = f.substr(p);
  return f + ":" + std::to_string(line);
}

std::string formatBytes(double bytes) {
  char buf[64];
  if (bytes >= 1024.0 * 1024 * 1024)
    std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
  else if (bytes >= 1024.0 * 1024)
    std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1024.0 * 1024));
  else if (bytes >= 1024.0)
    std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%.0f bytes", bytes);
  return buf;
}

static std::string on(const std::string& device) { return device.empty() ? std::string() : " on " + device; }

static const char* kSmallerBatch = ": use a smaller batch per replica (or fewer logical replicas on this GPU)";

void checkCuda(cudaError_t e, const char* call, const char* file, int line, const std::string& device) {
  if (e == cudaSuccess) return;
  // Clear the thread's last error, so that a non-sticky failure (a refused allocation, a bad
  // argument) is not reported again by the next launch check.
  (void)cudaGetLastError();
  std::string msg = std::string(call) + " failed: " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ", " +
                    std::to_string(static_cast<int>(e)) + ") at " + where(file, line) + on(device);
  int code = MLCUDA_ERR_CUDA;
  if (e == cudaErrorMemoryAllocation) {
    code = MLCUDA_ERR_OUT_OF_MEMORY;
    msg += kSmallerBatch;
  } else if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice || e == cudaErrorInvalidDevice) {
    code = MLCUDA_ERR_NO_DEVICE;
  }
  fail(code, msg);
}

void checkCublas(cublasStatus_t s, const char* call, const char* file, int line, const std::string& device) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  std::string msg = std::string(call) + " failed: " + cublasGetStatusString(s) + " (" + cublasGetStatusName(s) + ") at " +
                    where(file, line) + on(device);
  int code = MLCUDA_ERR_CUBLAS;
  if (s == CUBLAS_STATUS_ALLOC_FAILED) {
    code = MLCUDA_ERR_OUT_OF_MEMORY;
    msg += kSmallerBatch;
  }
  fail(code, msg);
}

void checkNccl(ncclResult_t r, ncclComm_t comm, const char* call, const char* file, int line, const std::string& device) {
  if (r == ncclSuccess) return;
  // An NCCL result comes from a loaded NCCL (NcclLoader.h); the fallbacks are for safety only.
  const NcclApi* api = ncclIfLoaded();
  const char* text = api ? api->getErrorString(r) : "NCCL error";
  const char* last = api ? api->getLastError(comm) : nullptr;
  fail(MLCUDA_ERR_NCCL, std::string(call) + " failed: " + (text ? text : "NCCL error") + " (" +
                            std::to_string(static_cast<int>(r)) + ")" +
                            (last && *last ? std::string(": ") + last : std::string()) + " at " + where(file, line) + on(device));
}

void checkLaunch(const char* kernel, const char* file, int line, const std::string& device) {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return;
  checkCuda(e, (std::string("launch of ") + kernel).c_str(), file, line, device);
}

mlcuda_status okStatus() {
  mlcuda_status s;
  s.code = MLCUDA_OK;
  s.message[0] = '\0';
  return s;
}

mlcuda_status makeStatus(int code, const std::string& message) {
  mlcuda_status s;
  s.code = code;
  const size_t n = std::min(message.size(), sizeof s.message - 1);
  std::memcpy(s.message, message.data(), n);
  s.message[n] = '\0';
  return s;
}

}  // namespace mlcuda
