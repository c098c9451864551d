// NCCL, loaded with dlopen on first use: only mlcuda_nccl_create (a run over several physical GPUs)
// needs it, so the plugin loads, and one-GPU and logical-GPU runs work, where NCCL is not installed.
// nccl.h is included for the types and the prototypes the table's entries copy; the plugin does not
// link libnccl (tests/gpu checks its NEEDED entries).
#pragma once
#include <nccl.h>

#include <string>

namespace mlcuda {

// The NCCL functions the plugin calls.
struct NcclApi {
  std::string path;  // the file that was loaded
  int version = 0;   // ncclGetVersion: 22809 for 2.28.9
  decltype(&::ncclGetVersion) getVersion = nullptr;
  decltype(&::ncclGetErrorString) getErrorString = nullptr;
  decltype(&::ncclGetLastError) getLastError = nullptr;
  decltype(&::ncclCommInitAll) commInitAll = nullptr;
  decltype(&::ncclGetUniqueId) getUniqueId = nullptr;
  decltype(&::ncclCommInitRank) commInitRank = nullptr;
  decltype(&::ncclCommFinalize) commFinalize = nullptr;
  decltype(&::ncclCommDestroy) commDestroy = nullptr;
  decltype(&::ncclCommAbort) commAbort = nullptr;
  decltype(&::ncclCommGetAsyncError) commGetAsyncError = nullptr;
  decltype(&::ncclGroupStart) groupStart = nullptr;
  decltype(&::ncclGroupEnd) groupEnd = nullptr;
  decltype(&::ncclAllReduce) allReduce = nullptr;
};

// The environment variable that names the NCCL library to load (a full path), e.g. the one in
// PyTorch's wheel: .../site-packages/nvidia/nccl/lib/libnccl.so.2.
inline constexpr const char* kNcclLibraryEnv = "MIRRORLAB_NCCL_LIBRARY";

// Loads NCCL on the first call (thread-safe; kept loaded to the process's end). Looks at
// $MIRRORLAB_NCCL_LIBRARY alone when it is set; otherwise libnccl.so.2 on the loader's path, beside
// the CUDA runtime and in the CUDA toolkit, then in Python's nvidia-nccl wheels. Throws a Failure
// (MLCUDA_ERR_NCCL) that says what was tried and what to do; a later call tries again.
const NcclApi& nccl();
// The table when NCCL has been loaded, else null (loads nothing).
const NcclApi* ncclIfLoaded();
// "2.28.9" from 22809 (and 2.8.4 from 2804, the encoding before 2.9).
std::string ncclVersionText(int version);

}  // namespace mlcuda
