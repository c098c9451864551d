/* The C ABI between the core and the CUDA plugin (libmirrorlab_cuda.so), which the core loads with
 * dlopen so that one set of binaries runs with or without GPU, driver and toolkit. Plain C, no CUDA
 * header: the core includes this file on machines that have no toolkit at all.
 *
 * Conventions
 * - Every fallible function returns an mlcuda_status: code 0 and an empty message on success;
 *   otherwise the message names the failed call, file:line, the device, and what to do.
 * - Matrices are row-major and batch-major, exactly as in core/nn: a batch of n samples of k values
 *   is an (n, k) matrix. A Dense kernel W is (in, out), as in Keras.
 * - Pointers named x, y, w, grads... are DEVICE pointers unless the comment says host.
 * - Kernels are enqueued on the context's compute stream and return before they finish; launch
 *   errors are reported at once, execution errors by the next call that synchronises
 *   (mlcuda_synchronize, a copy to the host, mlcuda_event_elapsed_ms).
 * - A context belongs to one thread at a time (one replica); the same GPU may carry several.
 * - The plugin never links the driver (libcuda); the CUDA runtime loads it and reports its absence.
 *
 * The types are here; the functions are listed once, with their documentation, in
 * CudaPluginEntryPoints.def, which this file expands into their declarations (and the loader and
 * the fake into what they need).
 */
#ifndef MIRRORLAB_CUDA_PLUGIN_API_H
#define MIRRORLAB_CUDA_PLUGIN_API_H

#include <stddef.h>
#include <stdint.h>

/* Bumped whenever a signature, a struct or a meaning changes; the loader accepts only its own. */
#define MLCUDA_API_VERSION 5
#define MLCUDA_PLUGIN_FILE "libmirrorlab_cuda.so"

#if defined(__GNUC__)
#define MLCUDA_EXPORT __attribute__((visibility("default")))
#else
#define MLCUDA_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status ------------------------------------------------------------------------------ */

enum {
  MLCUDA_OK = 0,
  MLCUDA_ERR_NO_DEVICE = 1,     /* no driver, driver too old, no GPU, or no such device */
  MLCUDA_ERR_OUT_OF_MEMORY = 2, /* the message names the device and the bytes asked for */
  MLCUDA_ERR_CUDA = 3,
  MLCUDA_ERR_CUBLAS = 4,
  MLCUDA_ERR_CUDNN = 5, /* cuDNN (loaded on the first convolution) is missing or failed */
  MLCUDA_ERR_NCCL = 6,
  MLCUDA_ERR_NVML = 7,
  MLCUDA_ERR_INVALID_ARGUMENT = 8,
  MLCUDA_ERR_INTERNAL = 9
};

#define MLCUDA_MESSAGE_BYTES 1024
typedef struct mlcuda_status {
  int code;                           /* MLCUDA_OK or one of MLCUDA_ERR_* */
  char message[MLCUDA_MESSAGE_BYTES]; /* "" on success, NUL-terminated, truncated if longer */
} mlcuda_status;

/* ---- enumerations (same order as ml::Act, ml::LossKind, ml::MetricKind) ------------------ */

enum { MLCUDA_ACT_LINEAR = 0, MLCUDA_ACT_RELU = 1, MLCUDA_ACT_SIGMOID = 2, MLCUDA_ACT_TANH = 3, MLCUDA_ACT_SOFTMAX = 4 };
enum {
  MLCUDA_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY = 0,
  MLCUDA_LOSS_CATEGORICAL_CROSSENTROPY = 1,
  MLCUDA_LOSS_MEAN_SQUARED_ERROR = 2,
  MLCUDA_LOSS_BINARY_CROSSENTROPY = 3 /* mean over a row's k outputs of the per-output loss, as Keras */
};
/* BINARY_ACCURACY thresholds probabilities at 0.5, BINARY_ACCURACY_LOGITS logits at 0 (2 is ml::MetricKind::None). */
enum {
  MLCUDA_METRIC_ACCURACY = 0,
  MLCUDA_METRIC_MEAN_ABSOLUTE_ERROR = 1,
  MLCUDA_METRIC_BINARY_ACCURACY = 3,
  MLCUDA_METRIC_BINARY_ACCURACY_LOGITS = 4
};
enum { MLCUDA_STREAM_COMPUTE = 0, MLCUDA_STREAM_COMM = 1 };

/* ---- types of the entry points ------------------------------------------------------------ */

typedef struct mlcuda_gpu_info {
  int index; /* CUDA device ordinal (as CUDA_VISIBLE_DEVICES presents them) */
  char name[256];
  int64_t total_memory_bytes;
  int cc_major, cc_minor;
  int multiprocessors;
  char pci_bus_id[32];
} mlcuda_gpu_info;

typedef struct mlcuda_probe_result {
  int device_count;        /* GPUs found; the first min(count, capacity) entries are filled */
  int driver_version;      /* CUDA version the driver supports, 1000*major + 10*minor; 0 = no driver */
  int runtime_version;     /* CUDA runtime version loaded, same encoding */
  char driver_release[64]; /* the NVIDIA driver's own version ("580.65.06") from NVML, or "" */
} mlcuda_probe_result;

typedef struct mlcuda_gpu_sample {
  int utilization_percent; /* kernel-busy share of the last sample period, 0..100 */
  int memory_busy_percent; /* memory-controller busy share, 0..100 */
  int64_t memory_used_bytes;
  int64_t memory_total_bytes;
  int temperature_c; /* GPU core temperature in degrees Celsius; -1 when NVML cannot tell */
} mlcuda_gpu_sample;

/* A context is one replica's: a device, a compute and a comm stream, a cuBLAS handle. */
typedef struct mlcuda_context mlcuda_context;
typedef struct mlcuda_event mlcuda_event;
typedef struct mlcuda_nccl mlcuda_nccl;

/* Geometry of Conv2D and the pooling layers as ml::Geometry and ml::Window give it: input (h, w, c),
 * output (oh, ow, filters) (pooling: filters = c), a (kh, kw) window moved by (sh, sw), and the
 * padding before the first row and column. TensorFlow's "same" padding may be one larger after
 * (bottom/right) than before: pad_bottom/pad_right say how much, so (h + pad_top + pad_bottom - kh)
 * / sh + 1 == oh. Padded positions are zeros for convolutions and are left out of pooling windows. */
typedef struct mlcuda_conv_geometry {
  int64_t h, w, c;
  int64_t oh, ow, filters;
  int64_t kh, kw, sh, sw;
  int64_t pad_top, pad_left, pad_bottom, pad_right;
} mlcuda_conv_geometry;

/* The compute format of the *_low layers (ml::Precision). */
enum { MLCUDA_PRECISION_FLOAT32 = 0, MLCUDA_PRECISION_BFLOAT16 = 1, MLCUDA_PRECISION_FLOAT16 = 2 };

/* The size of an NCCL unique id (ncclUniqueId), sent from worker 0 to the others. */
#define MLCUDA_NCCL_ID_BYTES 128

/* ---- the entry points ---------------------------------------------------------------------- */

#define MLCUDA_ENTRY(ret, name, field, params) MLCUDA_EXPORT ret mlcuda_##name params;
#include "CudaPluginEntryPoints.def" /* beside this file */
#undef MLCUDA_ENTRY

#ifdef __cplusplus
}
#endif

#endif /* MIRRORLAB_CUDA_PLUGIN_API_H */
