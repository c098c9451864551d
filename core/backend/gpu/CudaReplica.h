// CudaBackend's per-layer and per-replica state, shared by its files (CudaBackend.cpp,
// GpuCollective.cpp); not for anyone else.
#pragma once
#include <vector>

#include "backend/gpu/CudaBackend.h"

namespace ml {

// One layer as the GPU runs it (translated once from the host model).
struct CudaBackend::Layer {
  // Reshape: Flatten and Reshape, whose output is their input.
  enum class Kind { Dense, Activation, Reshape, Dropout, Conv2D, Pool2D, GlobalAvgPool, BatchNorm } kind = Kind::Reshape;
  int64_t in = 0, out = 0;
  int act = MLCUDA_ACT_LINEAR;
  bool bias = false;
  bool fusedSoftmax = false;  // the loss gives d/d(the output activation's input) (Sequential::configureLoss decides)
  double rate = 0;
  uint64_t salt = 0;
  int64_t offset = 0, count = 0;  // parameters in the flat buffers
  bool needsInputGrad = false;    // a layer below has parameters
  // Conv2D and pooling: the geometry (pooling: filters = channels); max or average pooling.
  mlcuda_conv_geometry geo{};
  bool max = false;
  // BatchNormalization: channels, its arguments, and where gamma, beta and the moving statistics
  // sit in the layer's slice (-1: absent).
  int64_t channels = 0;
  double momentum = 0, epsilon = 0;
  bool synchronized = false;
  int64_t gamma = -1, beta = -1, movingMean = 0, movingVar = 0;
};

// A BatchNormalization layer's per-replica state: [mean, invstd] (2C device floats) of the last
// forward, 2C device doubles for the sums, and the count the statistics came from.
struct CudaBackend::NormState {
  DeviceBuffer<float> stats;
  DeviceBuffer<double> sums;
  double count = 0;
  // Host copies reused every pass: the sums (with the count last) and their cross-replica sum, the
  // statistics uploaded, the global batch's mean and variance.
  std::vector<double> local, global, moving;
  std::vector<float> hostStats;
};

// A data set's samples and targets in one GPU's memory (rows gathered there by index), or, when it
// would not fit (x and y null), the note that it is staged through pinned host memory instead.
struct CudaBackend::ResidentData {
  int device = 0;
  const float* hostX = nullptr;  // identity of the data set: its storage, size and shape
  int64_t size = 0, features = 0, targetDim = 0;
  DeviceBuffer<float> x, y;
  GpuEvent uploaded;  // recorded behind the upload; the other replicas on the GPU wait for it once
};

struct CudaBackend::Replica {
  int rank = 0, device = 0;
  std::string label;
  GpuContext ctx;  // first: destroyed last, after every buffer and event of the replica
  DeviceBuffer<float> params, grads;
  DeviceBuffer<float> slot1;  // Adam m, SGD velocity, RMSprop v
  DeviceBuffer<float> slot2;  // Adam v, RMSprop momentum
  int64_t iterations = 0;
  float lr = 0;
  // Batch buffers, grown on demand.
  int64_t capRows = 0, capTargets = 0;
  int64_t targetDim = 1;  // of the data set being staged
  DeviceBuffer<float> x, y;
  DeviceBuffer<int64_t> ids;
  std::vector<DeviceBuffer<float>> acts, dacts;
  std::vector<DeviceBuffer<uint8_t>> masks;
  std::vector<DeviceBuffer<int32_t>> argmax;  // max pooling: each output's input position
  std::vector<NormState> norms;               // BatchNormalization layers (by layer index)
  std::vector<const float*> out;              // each layer's output in the last forward
  // Per step: [loss_0, metric_0, ..., loss_{K-1}, metric_{K-1}, non-finite count] as 8-byte words.
  DeviceBuffer<double> words;
  int64_t capWords = 0;
  unsigned long long* nonfinite = nullptr;  // the last word, while a step runs
  DeviceBuffer<unsigned long long> check;   // reducedFinite's count
  float lossScale = 1.0f;                   // the loss gradient's factor (dynamic loss scaling)
  std::vector<double> hostWords;
  // Events: the step's start, four per micro-batch (start, input on the device, forward end, backward
  // end), one per bucket, the all-reduce done (comm stream), the compute stream past it, the
  // optimizer's end.
  GpuEvent start, commDone, commEnd, optEnd;
  std::vector<GpuEvent> micro, bucket;
  std::vector<float> hostSlot1, hostSlot2;
  // The input's two pinned host slots, used in turn: a slot is written again only after the event
  // recorded behind its last copy has passed, so the copy of one micro-batch overlaps the host's
  // work on the next.
  struct Slot {
    PinnedBuffer host;
    size_t bytes = 0;
    GpuEvent copied;
    bool inFlight = false;
  };
  Slot slots[2];
  int nextSlot = 0;
  std::vector<const ResidentData*> waited;  // resident data sets this replica's compute stream waited for

  ~Replica() {
    if (ctx) ctx.get_deleter().plugin->synchronize(ctx.get());  // before the buffers go
  }
};

}  // namespace ml
