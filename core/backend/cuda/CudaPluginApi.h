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

/* ---- version and devices ------------------------------------------------------------------ */

/* MLCUDA_API_VERSION of the plugin. */
MLCUDA_EXPORT int mlcuda_api_version(void);
/* "CUDA runtime 13.0 (built with 13.0), cuBLAS ..., NCCL: loaded on first use, cuDNN: loaded on first
 * convolution, ..., sm_80 sm_90": static text. */
MLCUDA_EXPORT const char* mlcuda_build_info(void);

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

/* Lists the GPUs. Fails with MLCUDA_ERR_NO_DEVICE and the reason (no driver, driver older than the
 * runtime, no GPU, ...) when none is usable; *result is filled as far as known either way. */
MLCUDA_EXPORT mlcuda_status mlcuda_probe(mlcuda_gpu_info* gpus, int capacity, mlcuda_probe_result* result);

typedef struct mlcuda_gpu_sample {
  int utilization_percent; /* kernel-busy share of the last sample period, 0..100 */
  int memory_busy_percent; /* memory-controller busy share, 0..100 */
  int64_t memory_used_bytes;
  int64_t memory_total_bytes;
  int temperature_c; /* GPU core temperature in degrees Celsius; -1 when NVML cannot tell */
} mlcuda_gpu_sample;

/* One NVML sample of the CUDA device `device` (matched by PCI bus id). NVML (libnvidia-ml.so.1) is
 * loaded on first use; MLCUDA_ERR_NVML says why when it cannot be. */
MLCUDA_EXPORT mlcuda_status mlcuda_nvml_sample(int device, mlcuda_gpu_sample* sample);

/* ---- contexts: one per replica: a device, a compute and a comm stream, a cuBLAS handle ----- */

typedef struct mlcuda_context mlcuda_context;
typedef struct mlcuda_event mlcuda_event;
typedef struct mlcuda_nccl mlcuda_nccl;

/* label names the replica in every message ("gpu:0", "gpu:0/2"). allow_tf32 = 0 keeps cuBLAS
 * and cuDNN in full FP32 (the default everywhere); 1 lets them use TF32 tensor cores for the GEMMs
 * and the float32 convolutions. */
MLCUDA_EXPORT mlcuda_status mlcuda_context_create(int device, const char* label, int allow_tf32, mlcuda_context** ctx);
MLCUDA_EXPORT void mlcuda_context_destroy(mlcuda_context* ctx);
/* Waits for both streams; reports any asynchronous error with the device. */
MLCUDA_EXPORT mlcuda_status mlcuda_synchronize(mlcuda_context* ctx);
MLCUDA_EXPORT mlcuda_status mlcuda_memory_info(mlcuda_context* ctx, size_t* free_bytes, size_t* total_bytes);

/* ---- memory ---------------------------------------------------------------------------------- */

MLCUDA_EXPORT mlcuda_status mlcuda_alloc(mlcuda_context* ctx, size_t bytes, void** ptr);
MLCUDA_EXPORT mlcuda_status mlcuda_free(mlcuda_context* ctx, void* ptr);
/* Host <-> device copies, ordered after the work already on the compute stream; they return when
 * the copy is complete (src/dst on the host side are ordinary host pointers). */
MLCUDA_EXPORT mlcuda_status mlcuda_copy_to_device(mlcuda_context* ctx, void* dst, const void* host_src, size_t bytes);
MLCUDA_EXPORT mlcuda_status mlcuda_copy_to_host(mlcuda_context* ctx, void* host_dst, const void* src, size_t bytes);
/* Asynchronous on the compute stream. */
MLCUDA_EXPORT mlcuda_status mlcuda_copy_on_device(mlcuda_context* ctx, void* dst, const void* src, size_t bytes);
MLCUDA_EXPORT mlcuda_status mlcuda_fill_zero(mlcuda_context* ctx, void* ptr, size_t bytes);

/* ---- the input pipeline: pinned host memory, asynchronous copies, a device-side gather ---------- */

/* Page-locked host memory (cudaHostAlloc): copies from it run asynchronously at full bus speed. */
MLCUDA_EXPORT mlcuda_status mlcuda_host_alloc(mlcuda_context* ctx, size_t bytes, void** ptr);
MLCUDA_EXPORT mlcuda_status mlcuda_host_free(mlcuda_context* ctx, void* ptr);
/* Enqueued on the compute stream; returns at once. host_src must stay unchanged until work after the
 * copy is known to be complete (an event recorded after it, then mlcuda_event_synchronize). */
MLCUDA_EXPORT mlcuda_status mlcuda_copy_to_device_async(mlcuda_context* ctx, void* dst, const void* host_src, size_t bytes);
/* dst (n, width) row i = src row rows[i] (rows: n device int64 indices into src, each in 0..src_rows-1,
 * which the caller has checked); on the compute stream. The data set's rows stay on the device and
 * only the batch's indices cross the bus. */
MLCUDA_EXPORT mlcuda_status mlcuda_gather_rows(mlcuda_context* ctx, const float* src, const int64_t* rows, int64_t n,
                                               int64_t width, float* dst);

/* ---- events: order the two streams and time the phases -------------------------------------- */

MLCUDA_EXPORT mlcuda_status mlcuda_event_create(mlcuda_context* ctx, mlcuda_event** event);
MLCUDA_EXPORT void mlcuda_event_destroy(mlcuda_event* event);
/* stream: MLCUDA_STREAM_COMPUTE or MLCUDA_STREAM_COMM of ctx. */
MLCUDA_EXPORT mlcuda_status mlcuda_event_record(mlcuda_context* ctx, int stream, mlcuda_event* event);
MLCUDA_EXPORT mlcuda_status mlcuda_stream_wait_event(mlcuda_context* ctx, int stream, mlcuda_event* event);
/* Blocks the calling thread until the work before the event's latest record is complete. */
MLCUDA_EXPORT mlcuda_status mlcuda_event_synchronize(mlcuda_event* event);
/* Milliseconds from start to end; waits for end to complete. */
MLCUDA_EXPORT mlcuda_status mlcuda_event_elapsed_ms(mlcuda_event* start, mlcuda_event* end, float* ms);

/* ---- layers (compute stream); formulas as in core/nn ------------------------------------------ */

/* y (n, out) = act(x (n, in) W (in, out) + b (out)); b may be NULL (no bias). */
MLCUDA_EXPORT mlcuda_status mlcuda_dense_forward(mlcuda_context* ctx, const float* x, const float* w, const float* b, float* y,
                                                 int64_t n, int64_t in, int64_t out, int act);
/* From y = the forward output and dy = dL/dy (n, out): dW (in, out) += x^T dz, db (out) += column
 * sums of dz (db may be NULL), dx (n, in) = dz W^T (dx may be NULL), where dz = dy * act'(.) taken
 * from y, or dz = dy when fused_softmax (the loss gave the gradient w.r.t. the output activation's
 * input: softmax with a categorical cross-entropy, sigmoid with the binary one).
 * dy is scratch: it may be overwritten with dz. */
MLCUDA_EXPORT mlcuda_status mlcuda_dense_backward(mlcuda_context* ctx, const float* x, const float* w, const float* y, float* dy,
                                                  float* dx, float* dw, float* db, int64_t n, int64_t in, int64_t out, int act,
                                                  int fused_softmax);
/* y = act(x) over n rows of k; y may equal x. */
MLCUDA_EXPORT mlcuda_status mlcuda_activation_forward(mlcuda_context* ctx, int act, const float* x, float* y, int64_t n,
                                                      int64_t k);
/* dx = dy * act'(.) from the output y; dx may equal dy. */
MLCUDA_EXPORT mlcuda_status mlcuda_activation_backward(mlcuda_context* ctx, int act, const float* y, const float* dy, float* dx,
                                                       int64_t n, int64_t k);
/* ml::Loss::compute on the device: *loss_sum (one device double) = the SUM of the n row losses;
 * grad (n, k) = d(sum)/d(pred), or d/d(softmax input) when fused_softmax (and not from_logits;
 * for MLCUDA_LOSS_BINARY_CROSSENTROPY: d/d(sigmoid input), (p - t) / k);
 * grad may be NULL. targets: (n, 1) class indices as floats for the sparse loss, (n, k) otherwise. */
MLCUDA_EXPORT mlcuda_status mlcuda_loss(mlcuda_context* ctx, int kind, int from_logits, int fused_softmax, const float* pred,
                                        const float* targets, int64_t n, int64_t k, float* grad, double* loss_sum);
/* ml::metricSum on the device: *sum (device double) = correct predictions (accuracy) or the sum of
 * per-row mean absolute errors. */
MLCUDA_EXPORT mlcuda_status mlcuda_metric_sum(mlcuda_context* ctx, int kind, const float* pred, const float* targets, int64_t n,
                                              int64_t k, int64_t target_dim, double* sum);
/* ml::Dropout, bit for bit: the mask of element j of a row is a pure function of
 * (seed ^ salt, step, sample id, j). sample_ids: device int64 per row (global sample index), or NULL
 * for the row number. mask (n*k bytes, 1 = kept) is written when training and rate > 0, and must be
 * passed unchanged to the backward; otherwise y = x and the mask is not touched. */
MLCUDA_EXPORT mlcuda_status mlcuda_dropout_forward(mlcuda_context* ctx, const float* x, float* y, uint8_t* mask, int64_t n,
                                                   int64_t k, double rate, uint64_t seed, uint64_t salt, uint64_t step,
                                                   const int64_t* sample_ids, int training);
MLCUDA_EXPORT mlcuda_status mlcuda_dropout_backward(mlcuda_context* ctx, const float* dy, float* dx, const uint8_t* mask,
                                                    int64_t count, double rate, int training);

/* ---- convolutional layers (compute stream); channels-last (NHWC) as in core/nn ---------------
 * Geometry of Conv2D and the pooling layers as ml::Geometry and ml::Window give it: input (h, w, c),
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

/* Conv2D (cuDNN, loaded on first use): y (n, oh, ow, filters) = act(conv(x (n, h, w, c),
 * kernel (kh, kw, c, filters) — Keras' layout) + b (filters)); b may be NULL. */
MLCUDA_EXPORT mlcuda_status mlcuda_conv2d_forward(mlcuda_context* ctx, const mlcuda_conv_geometry* g, const float* x,
                                                  const float* w, const float* b, float* y, int64_t n, int act);
/* From y = the forward output and dy (n, oh, ow, filters): dz = dy * act'(.) from y (written into
 * dy, which is scratch); dw (kh, kw, c, filters) += the kernel gradient, db (filters) += the column
 * sums of dz (db may be NULL), dx (n, h, w, c) = the input gradient (dx may be NULL). */
MLCUDA_EXPORT mlcuda_status mlcuda_conv2d_backward(mlcuda_context* ctx, const mlcuda_conv_geometry* g, const float* x,
                                                   const float* w, const float* y, float* dy, float* dx, float* dw, float* db,
                                                   int64_t n, int act);
/* MaxPooling2D (max = 1) or AveragePooling2D (max = 0) as ml::Pool2D, g->filters == g->c. Max
 * pooling writes argmax (n*oh*ow*c): the input position within the sample, (iy*w + ix)*c + ch, of
 * each output, the first one in window order on ties (as the CPU), and the backward routes the
 * gradient there; the average divides by the window positions inside the image. argmax is unused
 * (may be NULL) for the average. dx (n, h, w, c) is overwritten. */
MLCUDA_EXPORT mlcuda_status mlcuda_pool2d_forward(mlcuda_context* ctx, const mlcuda_conv_geometry* g, int max, const float* x,
                                                  float* y, int32_t* argmax, int64_t n);
MLCUDA_EXPORT mlcuda_status mlcuda_pool2d_backward(mlcuda_context* ctx, const mlcuda_conv_geometry* g, int max, const float* dy,
                                                   const int32_t* argmax, float* dx, int64_t n);
/* GlobalAveragePooling2D: x (n, hw, c) -> y (n, c), the mean over the hw positions; the backward
 * spreads dy / hw over them (dx overwritten). */
MLCUDA_EXPORT mlcuda_status mlcuda_global_avg_pool_forward(mlcuda_context* ctx, const float* x, float* y, int64_t n, int64_t hw,
                                                           int64_t c);
MLCUDA_EXPORT mlcuda_status mlcuda_global_avg_pool_backward(mlcuda_context* ctx, const float* dy, float* dx, int64_t n,
                                                            int64_t hw, int64_t c);

/* ---- BatchNormalization over the last axis (ml::BatchNorm): rows = n * (values per sample) / C.
 * The statistics are the host's business between these calls (the cross-replica sums go through
 * the strategy), so each is a small kernel over device buffers: */
/* sums (2C device doubles, overwritten): [sum x (C), sum x^2 (C)] over the rows, in double; zeros
 * for no rows (an empty shard still joins the cross-replica sum). The same for the backward sums. */
MLCUDA_EXPORT mlcuda_status mlcuda_batchnorm_moments(mlcuda_context* ctx, const float* x, int64_t rows, int64_t c, double* sums);
/* y = gamma (x - mean) invstd + beta per channel; stats (2C device floats): [mean (C), invstd (C)];
 * gamma and beta may be NULL (1 and 0). y may equal x. */
MLCUDA_EXPORT mlcuda_status mlcuda_batchnorm_forward(mlcuda_context* ctx, const float* x, float* y, int64_t rows, int64_t c,
                                                     const float* stats, const float* gamma, const float* beta);
/* Evaluation statistics from the moving ones: stats = [moving_mean, 1/sqrt(moving_var + epsilon)]. */
MLCUDA_EXPORT mlcuda_status mlcuda_batchnorm_eval_stats(mlcuda_context* ctx, const float* moving_mean, const float* moving_var,
                                                        int64_t c, double epsilon, float* stats);
/* The moving statistics from the global batch's: global (2C device doubles) = [mean (C), variance (C)];
 * moving = float(moving * momentum + global * (1 - momentum)), computed in double as the CPU does. */
MLCUDA_EXPORT mlcuda_status mlcuda_batchnorm_update_moving(mlcuda_context* ctx, float* moving_mean, float* moving_var,
                                                           const double* global, int64_t c, double momentum);
/* Backward sums (2C device doubles, overwritten): [sum dy (C), sum dy xhat (C)], xhat = (x - mean) invstd;
 * then dgamma (C) += float(sum dy xhat) and dbeta (C) += float(sum dy) (either may be NULL). */
MLCUDA_EXPORT mlcuda_status mlcuda_batchnorm_backward_sums(mlcuda_context* ctx, const float* x, const float* dy, int64_t rows,
                                                           int64_t c, const float* stats, double* sums, float* dgamma,
                                                           float* dbeta);
/* dx = gamma invstd (dy - a - xhat b) with a = sums[c] / count and b = sums[C + c] / count when
 * training (sums: this replica's, or all-reduced when the statistics are synchronized; count: the
 * rows per channel the statistics came from), a = b = 0 otherwise (sums unused, may be NULL). gamma may be NULL. */
MLCUDA_EXPORT mlcuda_status mlcuda_batchnorm_backward_data(mlcuda_context* ctx, const float* x, const float* dy, float* dx,
                                                           int64_t rows, int64_t c, const float* stats, const float* gamma,
                                                           const double* sums, double count, int training);

/* ---- mixed precision (ml::Precision: Keras' mixed_bfloat16 and mixed_float16) -----------------
 * Master weights, gradients and activations stay float32 buffers; the layer computes as a GPU does
 * in the low format, exactly where core/nn's Dense and Conv2D round (nn/Precision.h): the input and
 * the kernel rounded to the format (round to nearest even; float16 with its subnormals, inf from
 * 65520), products accumulated in float32 (tensor cores: cublasGemmEx with CUBLAS_COMPUTE_32F),
 * the output plus bias rounded, the activation in float32 and rounded again (not softmax's). In the
 * backward pass dz = act'(dy) is rounded (where float16 loses what loss scaling must lift), the
 * micro-batch's kernel and bias gradients come out rounded and are added to the float32 ones, and
 * dx is rounded. The rounded input and kernel are formed again from x and w in the backward pass
 * (neither has changed since the forward). */
enum { MLCUDA_PRECISION_FLOAT32 = 0, MLCUDA_PRECISION_BFLOAT16 = 1, MLCUDA_PRECISION_FLOAT16 = 2 };
/* As mlcuda_dense_forward / mlcuda_dense_backward, in `precision` (FLOAT32: the same as those). */
MLCUDA_EXPORT mlcuda_status mlcuda_dense_forward_low(mlcuda_context* ctx, int precision, const float* x, const float* w,
                                                     const float* b, float* y, int64_t n, int64_t in, int64_t out, int act);
MLCUDA_EXPORT mlcuda_status mlcuda_dense_backward_low(mlcuda_context* ctx, int precision, const float* x, const float* w,
                                                      const float* y, float* dy, float* dx, float* dw, float* db, int64_t n,
                                                      int64_t in, int64_t out, int act, int fused_softmax);
/* As mlcuda_conv2d_forward / mlcuda_conv2d_backward, in `precision`. */
MLCUDA_EXPORT mlcuda_status mlcuda_conv2d_forward_low(mlcuda_context* ctx, int precision, const mlcuda_conv_geometry* g,
                                                      const float* x, const float* w, const float* b, float* y, int64_t n,
                                                      int act);
MLCUDA_EXPORT mlcuda_status mlcuda_conv2d_backward_low(mlcuda_context* ctx, int precision, const mlcuda_conv_geometry* g,
                                                       const float* x, const float* w, const float* y, float* dy, float* dx,
                                                       float* dw, float* db, int64_t n, int act);
/* x (count floats) *= factor, in float32: dynamic loss scaling multiplies the loss gradient. */
MLCUDA_EXPORT mlcuda_status mlcuda_scale(mlcuda_context* ctx, float* x, int64_t count, float factor);

/* Adds the number of elements of x (count floats) that are inf or NaN to *counter (one device
 * unsigned 64-bit integer, not reset here): the training loop's finiteness check of a layer's
 * gradients before its bucket is all-reduced, so the replica where a NaN appeared can be named. */
MLCUDA_EXPORT mlcuda_status mlcuda_count_nonfinite(mlcuda_context* ctx, const float* x, int64_t count,
                                                   unsigned long long* counter);

/* ---- optimizers (compute stream): ml::Sgd, ml::Adam, ml::RmsProp over one flat buffer ---------
 * grads are sums over the global batch; grad_scale (1/B) makes them means inside the update. */

/* velocity may be NULL when momentum == 0. */
MLCUDA_EXPORT mlcuda_status mlcuda_sgd_step(mlcuda_context* ctx, float* params, const float* grads, float* velocity,
                                            int64_t count, float grad_scale, float lr, float momentum, int nesterov);
/* iteration: this update's number, 1 for the first (Keras' t after the increment). beta1, beta2 (and
 * rmsprop's rho) as the user set them: Keras takes 1 - beta in double (nn/OptimizerConstants.h). */
MLCUDA_EXPORT mlcuda_status mlcuda_adam_step(mlcuda_context* ctx, float* params, const float* grads, float* m, float* v,
                                             int64_t count, float grad_scale, float lr, double beta1, double beta2, float epsilon,
                                             int64_t iteration);
/* mom may be NULL when momentum == 0. */
MLCUDA_EXPORT mlcuda_status mlcuda_rmsprop_step(mlcuda_context* ctx, float* params, const float* grads, float* v, float* mom,
                                                int64_t count, float grad_scale, float lr, double rho, float momentum,
                                                float epsilon);

/* ---- all-reduce -------------------------------------------------------------------------------- */

/* Logical GPUs (several replicas on one GPU, where NCCL refuses two ranks): on ctx's COMM stream,
 * after every event in ready[] has completed, each element of the `count` device buffers becomes
 * the sum buffers[0] + buffers[1] + ... (in that order, computed once), written to all of them, so
 * every replica gets the same bits; then `done` (may be NULL) is recorded. All buffers must live
 * on ctx's device. count <= 64. */
MLCUDA_EXPORT mlcuda_status mlcuda_local_allreduce(mlcuda_context* ctx, float* const* buffers, int count, int64_t elements,
                                                   mlcuda_event* const* ready, int ready_count, mlcuda_event* done);

/* As mlcuda_local_allreduce with bfloat16 on the wire (--allreduce-dtype bfloat16): each buffer's
 * values are rounded to bfloat16 (to nearest even) before they join the sum, and the running sum is
 * rounded again after each addition, as the host ring and reduce-to-one round what they forward;
 * the additions are float32, the result (rounded) goes to every buffer. */
MLCUDA_EXPORT mlcuda_status mlcuda_local_allreduce_bf16(mlcuda_context* ctx, float* const* buffers, int count, int64_t elements,
                                                        mlcuda_event* const* ready, int ready_count, mlcuda_event* done);

/* One NCCL communicator over distinct physical GPUs (ncclCommInitAll); rank r is devices[r]. */
MLCUDA_EXPORT mlcuda_status mlcuda_nccl_create(const int* devices, int count, mlcuda_nccl** comm);
MLCUDA_EXPORT void mlcuda_nccl_destroy(mlcuda_nccl* comm);
/* Grouped in-place sum over all ranks, each enqueued on contexts[r]'s COMM stream (contexts[r] must
 * be on devices[r]). Order it after the gradients with an event recorded on the compute stream. */
MLCUDA_EXPORT mlcuda_status mlcuda_nccl_allreduce(mlcuda_nccl* comm, mlcuda_context* const* contexts, float* const* buffers,
                                                  int64_t elements);

/* As mlcuda_nccl_allreduce with bfloat16 on the wire: each rank's buffer is packed to bfloat16 on
 * its comm stream, NCCL sums the bfloat16 values (ncclBfloat16: half the bytes), and the result is
 * unpacked into the float32 buffer. */
MLCUDA_EXPORT mlcuda_status mlcuda_nccl_allreduce_bf16(mlcuda_nccl* comm, mlcuda_context* const* contexts, float* const* buffers,
                                                       int64_t elements);

/* ---- NCCL across processes (workers under mpirun), bootstrapped as Horovod does ---------------
 * Worker 0 makes the unique id, the strategy sends it to every worker over MPI, and each worker
 * creates its own ranks of one communicator from it. mlcuda_nccl_allreduce then sums across every
 * worker's ranks, each worker passing its own contexts and buffers (its count ranks, in order). */
#define MLCUDA_NCCL_ID_BYTES 128
MLCUDA_EXPORT mlcuda_status mlcuda_nccl_unique_id(unsigned char id[MLCUDA_NCCL_ID_BYTES]);
/* This process's count ranks of an nranks communicator made from id: rank ranks[i] on CUDA device
 * devices[i] (ncclCommInitRank, grouped). Blocks until every rank of every process has joined (or
 * NCCL fails). */
MLCUDA_EXPORT mlcuda_status mlcuda_nccl_create_ranks(const unsigned char* id, int nranks, const int* ranks, const int* devices,
                                                     int count, mlcuda_nccl** comm);

#ifdef __cplusplus
}
#endif

#endif /* MIRRORLAB_CUDA_PLUGIN_API_H */
