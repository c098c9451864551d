// Alpha-beta estimates, the host all-reduce measurement and the scaling what-if.
// The what-if keeps to the mirrored step's own structure: the largest shard sets the compute
// time, the optimizer runs on every replica at full size, and only the all-reduce time that is
// not hidden behind backward adds to the step.
#include "learn/CostModel.h"

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cmath>
#include <sstream>
#include <thread>

#include "Error.h"
#include "backend/DeviceList.h"
#include "distribute/AllReduce.h"

namespace ml {

const std::vector<Link>& linkPresets() {
  static const std::vector<Link> links = {
      {"nvlink", "NVLink", 300e9, 2e-6, false},
      {"pcie4", "PCIe 4.0 x16", 25e9, 5e-6, false},
      {"ib-hdr", "InfiniBand HDR", 25e9, 1.5e-6, false},
      {"100gbe", "100 Gb/s Ethernet", 12.5e9, 10e-6, false},
      {"10gbe", "10 Gb/s Ethernet", 1.25e9, 30e-6, false},
  };
  return links;
}

Link linkPreset(const std::string& id) {
  std::string ids;
  for (const auto& l : linkPresets()) {
    if (l.id == id) return l;
    ids += (ids.empty() ? "" : ", ") + l.id;
  }
  throw UserError("unknown link '" + id + "' (allowed: " + ids + ")");
}

CollectiveAlgo parseCollectiveAlgo(const std::string& name) {
  if (name == "ring" || name == "nccl") return CollectiveAlgo::Ring;
  if (name == "reduce-to-one") return CollectiveAlgo::ReduceToOne;
  throw UserError("unknown all-reduce algorithm '" + name + "' (allowed: ring, reduce-to-one)");
}

const char* toString(CollectiveAlgo a) { return a == CollectiveAlgo::Ring ? "ring" : "reduce-to-one"; }

AllReduceEstimate estimateAllReduce(CollectiveAlgo algo, int n, double bytes, const Link& link) {
  AllReduceEstimate e;
  e.algo = algo;
  e.devices = n;
  e.bytes = bytes;
  if (n <= 1 || bytes <= 0) return e;
  const double messages = 2.0 * (n - 1);
  e.latencySeconds = messages * link.latency;
  e.transferSeconds = algo == CollectiveAlgo::Ring ? messages / n * bytes / link.bandwidth : messages * bytes / link.bandwidth;
  e.seconds = e.latencySeconds + e.transferSeconds;
  return e;
}

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// Median wall time of `repeats` ring all-reduces of `floats` floats over n threads (one warm-up
// call first). The buffers are refilled outside the timed part so the sums never overflow.
struct RingTimes {
  double median = 0, low = 0, high = 0;
};

// Warms up first (threads, caches, page faults: the first collectives are several times slower
// than the rest), then times `repeats` collectives and keeps their median and spread.
RingTimes timeRing(int n, size_t floats, int repeats) {
  RingAllReduce ring(n);
  std::barrier<> sync(n);
  std::vector<std::vector<float>> buffers(static_cast<size_t>(n), std::vector<float>(floats));
  std::vector<double> times;
  auto worker = [&](int rank) {
    auto& buf = buffers[static_cast<size_t>(rank)];
    const int warmup = std::max(3, repeats / 2);
    for (int it = 0; it < warmup + repeats; ++it) {
      std::fill(buf.begin(), buf.end(), 0.001f * static_cast<float>(rank + 1));
      sync.arrive_and_wait();
      const auto t0 = std::chrono::steady_clock::now();
      ring.allReduce(rank, buf);
      sync.arrive_and_wait();  // the slowest participant ends the collective
      if (rank == 0 && it >= warmup)
        times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  };
  std::vector<std::thread> threads;
  for (int r = 1; r < n; ++r) threads.emplace_back(worker, r);
  worker(0);
  for (auto& t : threads) t.join();
  std::sort(times.begin(), times.end());
  return {median(times), times.front(), times.back()};
}

}  // namespace

HostAllReduceMeasurement measureHostAllReduce(int n, int64_t bytes, int repeats) {
  if (bytes < 4) throw UserError("the all-reduce measurement needs at least one float (4 bytes), got " + std::to_string(bytes));
  if (bytes > (int64_t{1} << 32)) throw UserError("the all-reduce measurement is limited to 4 GiB per replica");
  n = std::clamp(n, 2, kMaxReplicas);
  repeats = std::max(1, repeats);
  HostAllReduceMeasurement m;
  m.devices = n;
  m.bytes = bytes;
  m.smallSeconds = timeRing(n, static_cast<size_t>(n), repeats).median;
  const RingTimes big = timeRing(n, static_cast<size_t>(bytes / 4), repeats);
  m.seconds = big.median;
  m.secondsLow = big.low;
  m.secondsHigh = big.high;
  m.repeats = repeats;
  const double messages = 2.0 * (n - 1);
  const double moved = messages / n * static_cast<double>(bytes);
  // alpha from the tiny buffer; the rest of the large one is transfer. When the gradient is so
  // small that latency dominates, the whole time is charged to transfer (a lower bound).
  double transfer = m.seconds - m.smallSeconds;
  if (transfer < 0.1 * m.seconds) transfer = m.seconds;
  m.link.id = "host";
  m.link.name = "host memory (measured)";
  m.link.latency = m.smallSeconds / messages;
  m.link.bandwidth = moved / std::max(transfer, 1e-9);
  m.link.measured = true;
  m.busBandwidth = moved / std::max(m.seconds, 1e-9);
  return m;
}

ComputeProfile profileFromSteps(const std::vector<StepEvent>& steps, int64_t gradientBytes, const std::string& source) {
  ComputeProfile p;
  p.gradientBytes = gradientBytes;
  p.source = source;
  double fwd = 0, bwd = 0, opt = 0;
  int64_t samples = 0, replicaSteps = 0;
  const size_t first = steps.size() > 1 ? 1 : 0;
  for (size_t i = first; i < steps.size(); ++i) {
    if (steps[i].replicas.empty()) continue;
    ++p.stepsUsed;
    for (const auto& r : steps[i].replicas) {
      fwd += r.phases.input + r.phases.forward;  // the input scales with the samples, as forward does
      bwd += r.phases.backward;
      opt += r.phases.optimizer;
      samples += r.samples;
      ++replicaSteps;
    }
  }
  if (samples == 0 || replicaSteps == 0)
    throw UserError(source + ": no step with per-replica timings to measure the compute time from (run a few steps first)");
  p.forwardPerSample = fwd / static_cast<double>(samples);
  p.backwardPerSample = bwd / static_cast<double>(samples);
  p.optimizerPerStep = opt / static_cast<double>(replicaSteps);
  return p;
}

WhatIfResult predictScaling(const ComputeProfile& profile, const WhatIfOptions& o) {
  if (o.devices.empty()) throw UserError("what-if: give at least one device count, e.g. 1,2,4,8");
  if (o.batch < 1) throw UserError("what-if: the batch must be at least 1, got " + std::to_string(o.batch));
  if (!(profile.perSample() > 0)) throw UserError("what-if: " + profile.source + " has no measured compute time per sample");
  if (!(o.link.bandwidth > 0)) throw UserError("what-if: the link '" + o.link.name + "' has no bandwidth");
  WhatIfResult res;
  res.link = o.link;
  res.algo = o.algo;
  res.profile = profile;
  res.overlap = std::clamp(o.overlap, 0.0, 1.0);
  const int W = o.workers;
  if (W < 1 || W > 4096) throw UserError("what-if: the number of workers must be 1..4096, got " + std::to_string(W));
  if (W > 1 && !(o.crossLink.bandwidth > 0)) throw UserError("what-if: several workers need a link between them");
  for (int local : o.devices) {
    if (local < 1 || local > 4096) throw UserError("what-if: a device count must be 1..4096, got " + std::to_string(local));
    const int n = local * W;
    WhatIfRow r;
    r.devices = n;
    r.globalBatch = o.perDeviceBatch ? o.batch * n : o.batch;
    r.perReplicaBatch = (r.globalBatch + n - 1) / n;
    const double shard = static_cast<double>(r.perReplicaBatch);
    r.computeSeconds = shard * profile.perSample() + profile.optimizerPerStep;
    const double bytes = static_cast<double>(profile.gradientBytes);
    r.allreduceSeconds = estimateAllReduce(o.algo, local, bytes, o.link).seconds;
    if (W > 1) {
      const auto cross = estimateAllReduce(CollectiveAlgo::Ring, W, bytes, o.crossLink);
      r.crossSeconds = cross.transferSeconds + cross.latencySeconds * std::max(1, o.crossBuckets);
      r.allreduceSeconds += r.crossSeconds;
    }
    const double hidden = std::min(res.overlap * r.allreduceSeconds, shard * profile.backwardPerSample);
    r.exposedSeconds = r.allreduceSeconds - hidden;
    r.stepSeconds = r.computeSeconds + r.exposedSeconds;
    r.samplesPerSecond = static_cast<double>(r.globalBatch) / r.stepSeconds;
    r.syncShare = r.exposedSeconds / r.stepSeconds;
    res.rows.push_back(r);
  }
  const auto ref = std::find_if(res.rows.begin(), res.rows.end(), [](const WhatIfRow& r) { return r.devices == 1; });
  const WhatIfRow base = ref != res.rows.end() ? *ref : res.rows.front();
  for (auto& r : res.rows) {
    r.speedup = r.samplesPerSecond / base.samplesPerSecond;
    r.efficiency = r.speedup / (static_cast<double>(r.devices) / base.devices);
  }
  std::ostringstream s;
  s << "Modelled, not measured: compute per sample from " << profile.source << ", " << toString(o.algo) << " all-reduce of "
    << profile.gradientBytes << " bytes over " << o.link.name;
  if (W > 1)
    s << " on each of " << W << " workers, then a ring across the workers over " << o.crossLink.name << " in "
      << std::max(1, o.crossBuckets) << " bucket(s) (hierarchical; device counts are per worker)";
  s << " (alpha-beta model), " << (o.perDeviceBatch ? "per-device batch " : "global batch ") << o.batch << ", "
    << static_cast<int>(std::lround(res.overlap * 100)) << "% of the all-reduce hidden behind backward.";
  res.assumptions = s.str();
  return res;
}

}  // namespace ml
