// The C ABI of libmirrorlab_mpi.so (MpiPlugin.cpp), resolved with dlsym by MpiWorkers.cpp. Plain C
// types only: the plugin and the program share no C++ objects or exceptions. Functions that can
// fail return 0 on success, else non-zero with a message in err (1: failed or timed out, 2:
// interrupted).
#pragma once
#include <stddef.h>
#include <stdint.h>

#define MLMPI_API_VERSION 2

extern "C" {
typedef void (*mlmpi_sink)(void* ctx, int rank, const char* bytes, int len);
typedef int (*mlmpi_api_version_fn)();
typedef int (*mlmpi_init_fn)(double timeoutSeconds, char* err, size_t errLen);
typedef int (*mlmpi_rank_fn)();
typedef int (*mlmpi_size_fn)();
typedef const char* (*mlmpi_engine_fn)();
typedef const char* (*mlmpi_host_fn)(int rank);
typedef int (*mlmpi_allreduce_fn)(void* data, int64_t count, int isDouble, const char* what, char* err, size_t errLen);
typedef int (*mlmpi_bcast_fn)(float* data, int64_t count, int root, const char* what, char* err, size_t errLen);
typedef int (*mlmpi_allgather_fn)(const char* mine, int64_t len, mlmpi_sink sink, void* ctx, const char* what, char* err,
                                  size_t errLen);
typedef void (*mlmpi_set_progress_fn)(int64_t step, const char* phase);
typedef void (*mlmpi_interrupt_fn)(const char* reason);
typedef void (*mlmpi_abort_fn)(int code);
typedef void (*mlmpi_finalize_fn)();
typedef double (*mlmpi_waiting_seconds_fn)();
}
