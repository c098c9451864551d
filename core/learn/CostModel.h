// The alpha-beta cost model of one all-reduce, link presets, a measurement of this machine's
// host-memory all-reduce, and a what-if that predicts step time and efficiency for N devices.
// Everything predicted carries modelled = true and the label "modelled", so a view can never
// show it as if it had been measured; measurements carry modelled = false.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "telemetry/Events.h"

namespace ml {

inline constexpr const char* kModelledLabel = "modelled";
inline constexpr const char* kMeasuredLabel = "measured";

// A link between devices: alpha (latency per message, seconds) and bandwidth (bytes/second).
struct Link {
  std::string id;         // nvlink | pcie4 | ib-hdr | 100gbe | 10gbe | host
  std::string name;       // "NVLink", "host memory (measured)"
  double bandwidth = 0;   // bytes per second, one direction
  double latency = 0;     // alpha, seconds per message
  bool measured = false;  // true only for the host link timed on this machine
};

// NVLink (300 GB/s, 2 us), PCIe 4.0 x16 (25 GB/s, 5 us), InfiniBand HDR (200 Gb/s: 25 GB/s,
// 1.5 us), 100 Gb/s Ethernet (12.5 GB/s, 10 us), 10 Gb/s Ethernet (1.25 GB/s, 30 us). Nominal
// figures, for the what-if only; the last three are links between machines.
const std::vector<Link>& linkPresets();
// One of linkPresets() by id; throws UserError listing the ids.
Link linkPreset(const std::string& id);

enum class CollectiveAlgo { Ring, ReduceToOne };
// "ring" | "reduce-to-one" (also "nccl", which is a ring); throws UserError otherwise.
CollectiveAlgo parseCollectiveAlgo(const std::string& name);

struct AllReduceEstimate {
  CollectiveAlgo algo = CollectiveAlgo::Ring;
  int devices = 1;
  double bytes = 0;
  double latencySeconds = 0;   // the alpha terms
  double transferSeconds = 0;  // the bytes / bandwidth terms
  double seconds = 0;          // their sum
  bool modelled = true;
  std::string label = kModelledLabel;
};

// One all-reduce of `bytes` over n devices on `link`:
//   ring:          2(n-1) alpha + 2 (n-1)/n bytes / bandwidth  (reduce-scatter + all-gather)
//   reduce-to-one: 2(n-1) (alpha + bytes / bandwidth)         (every buffer into replica 0, then
//                  back out to every replica, through replica 0's one link)
// n = 1 costs nothing.
AllReduceEstimate estimateAllReduce(CollectiveAlgo algo, int n, double bytes, const Link& link);

// A timing of ml::RingAllReduce over host memory with n threads, turned into a Link by fitting
// the same formula: alpha from a tiny buffer, bandwidth from a buffer of the gradient's size.
struct HostAllReduceMeasurement {
  Link link;  // id "host", measured = true
  int devices = 2;
  int64_t bytes = 0;
  double seconds = 0;                      // median time of one all-reduce of `bytes`, after a warm-up
  double secondsLow = 0, secondsHigh = 0;  // fastest and slowest of the timed repeats
  int repeats = 0;
  double smallSeconds = 0;  // median time of one all-reduce of n floats
  double busBandwidth = 0;  // 2 (n-1)/n bytes / seconds, as NCCL reports it
  bool modelled = false;
  std::string label = kMeasuredLabel;
};
// n >= 2 threads (n = 1 is raised to 2: one device never communicates); repeats >= 1.
HostAllReduceMeasurement measureHostAllReduce(int n, int64_t bytes, int repeats = 5);

// Compute cost of the model on one device, measured from a run's steps.
struct ComputeProfile {
  double forwardPerSample = 0;   // seconds
  double backwardPerSample = 0;  // seconds
  double optimizerPerStep = 0;   // seconds; does not shrink with more devices
  int64_t gradientBytes = 0;     // float32 parameters x 4
  int64_t stepsUsed = 0;
  std::string source;  // "run 12", "3 steps of project 'Spirals' on cpu:1"
  bool measured = true;
  double perSample() const { return forwardPerSample + backwardPerSample; }
};
// Sums the replicas' phases over the steps (the first step is skipped when there are more: it
// pays for first-touch allocations). Throws UserError when no step has per-replica timings.
ComputeProfile profileFromSteps(const std::vector<StepEvent>& steps, int64_t gradientBytes, const std::string& source);

struct WhatIfOptions {
  Link link;
  CollectiveAlgo algo = CollectiveAlgo::Ring;
  std::vector<int> devices = {1, 2, 4, 8};
  int64_t batch = 128;  // global batch, or the per-device batch when perDeviceBatch
  bool perDeviceBatch = false;
  // Share of the all-reduce hidden behind backward (buckets start while backward runs), in
  // [0, 1]; never more than the backward time itself.
  double overlap = 0.0;
  // Several workers (machines): `devices` are then per worker, every row has workers x devices
  // replicas, and the all-reduce is hierarchical: the local one over `link`, then a ring across
  // the workers over `crossLink` (the network between machines).
  int workers = 1;
  Link crossLink;
  // The buckets the gradients cross in (distribute.bucket_bytes): each pays the ring's messages.
  int crossBuckets = 1;
};

struct WhatIfRow {
  int devices = 1;
  int64_t globalBatch = 0;
  int64_t perReplicaBatch = 0;  // the largest shard
  double computeSeconds = 0;    // forward + backward of the largest shard + optimizer
  double allreduceSeconds = 0;  // one all-reduce of the gradients (with several workers: local + cross)
  double crossSeconds = 0;      // several workers: the cross-worker ring of it
  double exposedSeconds = 0;    // the part not hidden behind backward
  double stepSeconds = 0;
  double samplesPerSecond = 0;
  double speedup = 1;     // throughput against the first row with one device (or the first row)
  double efficiency = 1;  // speedup / (devices / devices of the reference row)
  double syncShare = 0;   // exposedSeconds / stepSeconds
  bool modelled = true;
};

struct WhatIfResult {
  std::vector<WhatIfRow> rows;
  Link link;
  CollectiveAlgo algo = CollectiveAlgo::Ring;
  ComputeProfile profile;
  double overlap = 0;
  bool modelled = true;
  std::string label = kModelledLabel;
  std::string assumptions;  // one sentence for the view's caption
};

// Throws UserError for an empty device list, a device count < 1, a batch < 1 or a profile with no
// compute time.
WhatIfResult predictScaling(const ComputeProfile& profile, const WhatIfOptions& options);

// "ring" / "reduce-to-one".
const char* toString(CollectiveAlgo a);

}  // namespace ml
