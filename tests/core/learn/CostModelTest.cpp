// The alpha-beta model against hand-computed values, the what-if's monotonicity, and the host
// all-reduce measurement.
#include <gtest/gtest.h>

#include <cmath>

#include "Error.h"
#include "learn/CostModel.h"

using namespace ml;

namespace {
// 0.1 ms forward + 0.2 ms backward per sample, 1 ms optimizer, 4 MB of gradients: easy by hand.
ComputeProfile handProfile() {
  ComputeProfile prof;
  prof.forwardPerSample = 1e-4;
  prof.backwardPerSample = 2e-4;
  prof.optimizerPerStep = 1e-3;
  prof.gradientBytes = 4'000'000;
  prof.source = "test";
  return prof;
}
}  // namespace

TEST(CostModel, RingAllReduceMatchesHandComputedValue) {
  // 4 devices, 100 MB over PCIe 4.0 (25 GB/s, 5 us):
  // 2*3*5 us = 30 us; 2*3/4 * 1e8 B / 2.5e10 B/s = 1.5 * 4 ms = 6 ms.
  const AllReduceEstimate e = estimateAllReduce(CollectiveAlgo::Ring, 4, 1e8, linkPreset("pcie4"));
  EXPECT_NEAR(e.latencySeconds, 30e-6, 1e-12);
  EXPECT_NEAR(e.transferSeconds, 6e-3, 1e-12);
  EXPECT_NEAR(e.seconds, 6.03e-3, 1e-12);
  EXPECT_TRUE(e.modelled);
  EXPECT_EQ(e.label, "modelled");
}

TEST(CostModel, ReduceToOneMatchesHandComputedValue) {
  // 8 devices, 1 MB over 10 GbE (1.25 GB/s, 30 us): 2*7*(30 us + 0.8 ms) = 14 * 830 us = 11.62 ms.
  const AllReduceEstimate e = estimateAllReduce(CollectiveAlgo::ReduceToOne, 8, 1e6, linkPreset("10gbe"));
  EXPECT_NEAR(e.seconds, 11.62e-3, 1e-12);
  // The ring moves 2*7/8 = 1.75 buffers instead of 14: 420 us + 1.4 ms = 1.82 ms.
  EXPECT_NEAR(estimateAllReduce(CollectiveAlgo::Ring, 8, 1e6, linkPreset("10gbe")).seconds, 1.82e-3, 1e-12);
}

TEST(CostModel, OneDeviceNeverCommunicates) {
  EXPECT_EQ(estimateAllReduce(CollectiveAlgo::Ring, 1, 1e9, linkPreset("10gbe")).seconds, 0.0);
  EXPECT_EQ(estimateAllReduce(CollectiveAlgo::ReduceToOne, 1, 1e9, linkPreset("nvlink")).seconds, 0.0);
}

TEST(CostModel, LinkPresets) {
  ASSERT_EQ(linkPresets().size(), 5u);
  EXPECT_DOUBLE_EQ(linkPreset("ib-hdr").bandwidth, 25e9);
  EXPECT_DOUBLE_EQ(linkPreset("ib-hdr").latency, 1.5e-6);
  EXPECT_DOUBLE_EQ(linkPreset("nvlink").bandwidth, 300e9);
  EXPECT_DOUBLE_EQ(linkPreset("nvlink").latency, 2e-6);
  EXPECT_DOUBLE_EQ(linkPreset("100gbe").bandwidth, 12.5e9);
  EXPECT_DOUBLE_EQ(linkPreset("10gbe").bandwidth, 1.25e9);
  EXPECT_THROW(linkPreset("infiniband"), UserError);
  EXPECT_EQ(parseCollectiveAlgo("nccl"), CollectiveAlgo::Ring);
  EXPECT_THROW(parseCollectiveAlgo("tree"), UserError);
}

TEST(CostModel, WhatIfMatchesHandComputedStep) {
  ComputeProfile prof = handProfile();
  WhatIfOptions o;
  o.link = linkPreset("10gbe");
  o.devices = {1, 4};
  o.batch = 256;
  const WhatIfResult r = predictScaling(prof, o);
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_TRUE(r.modelled);
  EXPECT_EQ(r.label, "modelled");
  // 1 device: 256 * 0.3 ms + 1 ms = 77.8 ms, no all-reduce.
  EXPECT_NEAR(r.rows[0].stepSeconds, 0.0778, 1e-12);
  EXPECT_DOUBLE_EQ(r.rows[0].speedup, 1.0);
  // 4 devices: 64 * 0.3 ms + 1 ms = 20.2 ms; ring 6*30 us + 1.5 * 4e6 / 1.25e9 = 0.18 + 4.8 ms = 4.98 ms.
  const WhatIfRow& four = r.rows[1];
  EXPECT_EQ(four.perReplicaBatch, 64);
  EXPECT_NEAR(four.computeSeconds, 0.0202, 1e-12);
  EXPECT_NEAR(four.allreduceSeconds, 0.00498, 1e-12);
  EXPECT_NEAR(four.stepSeconds, 0.02518, 1e-12);
  EXPECT_NEAR(four.speedup, 0.0778 / 0.02518, 1e-9);
  EXPECT_NEAR(four.efficiency, 0.0778 / 0.02518 / 4, 1e-9);
  EXPECT_NEAR(four.syncShare, 0.00498 / 0.02518, 1e-9);
  EXPECT_TRUE(four.modelled);
  EXPECT_NE(r.assumptions.find("Modelled"), std::string::npos);

  // Half the all-reduce hidden behind backward (64 * 0.2 ms = 12.8 ms of it is available).
  o.overlap = 0.5;
  const WhatIfResult h = predictScaling(prof, o);
  EXPECT_NEAR(h.rows[1].exposedSeconds, 0.00249, 1e-12);
  // ... but never more than backward itself: with a tiny backward, little can hide.
  prof.backwardPerSample = 1e-6;
  prof.forwardPerSample = 2.99e-4;
  o.overlap = 1.0;
  const WhatIfResult t = predictScaling(prof, o);
  EXPECT_NEAR(t.rows[1].exposedSeconds, 0.00498 - 64e-6, 1e-12);
}

// Several workers: device counts are per worker, the all-reduce is the local one plus a ring
// across the workers over the network link.
TEST(CostModel, WhatIfAcrossWorkersAddsTheCrossWorkerRing) {
  const ComputeProfile prof = handProfile();
  WhatIfOptions o;
  o.link = linkPreset("nvlink");
  o.devices = {1, 4};
  o.batch = 256;
  o.workers = 2;
  o.crossLink = linkPreset("10gbe");
  const WhatIfResult r = predictScaling(prof, o);
  ASSERT_EQ(r.rows.size(), 2u);
  // 2 workers x 1 device: no local sum; the cross ring: 2 * 30 us + 4e6 / 1.25e9 = 3.26 ms.
  EXPECT_EQ(r.rows[0].devices, 2);
  EXPECT_EQ(r.rows[0].perReplicaBatch, 128);
  EXPECT_NEAR(r.rows[0].crossSeconds, 0.00326, 1e-12);
  EXPECT_NEAR(r.rows[0].allreduceSeconds, 0.00326, 1e-12);
  // 2 workers x 4 devices: local ring on NVLink 6 * 2 us + 1.5 * 4e6 / 300e9 = 12 us + 20 us, plus the cross ring.
  EXPECT_EQ(r.rows[1].devices, 8);
  EXPECT_EQ(r.rows[1].perReplicaBatch, 32);
  EXPECT_NEAR(r.rows[1].allreduceSeconds, 0.00326 + 32e-6, 1e-12);
  EXPECT_NEAR(r.rows[1].computeSeconds, 32 * 3e-4 + 1e-3, 1e-12);
  EXPECT_NE(r.assumptions.find("across the workers over 10 Gb/s Ethernet"), std::string::npos) << r.assumptions;
  // The gradients cross in 3 buckets: each pays the ring's 2 messages, the bytes are the same.
  o.crossBuckets = 3;
  EXPECT_NEAR(predictScaling(prof, o).rows[0].crossSeconds, 0.00326 + 2 * 2 * 30e-6, 1e-12);
  o.crossBuckets = 1;
  // InfiniBand HDR between the machines makes the same step faster.
  o.crossLink = linkPreset("ib-hdr");
  EXPECT_LT(predictScaling(prof, o).rows[1].stepSeconds, r.rows[1].stepSeconds);
  o.crossLink = Link{};
  EXPECT_THROW(predictScaling(prof, o), UserError);
}

TEST(CostModel, MoreDevicesMeanLessComputeAndMoreCommunication) {
  ComputeProfile prof;
  prof.forwardPerSample = 5e-5;
  prof.backwardPerSample = 1e-4;
  prof.optimizerPerStep = 2e-4;
  prof.gradientBytes = 10'000'000;
  prof.source = "test";
  for (const auto& link : linkPresets()) {
    for (CollectiveAlgo algo : {CollectiveAlgo::Ring, CollectiveAlgo::ReduceToOne}) {
      SCOPED_TRACE(link.id + " " + toString(algo));
      WhatIfOptions o;
      o.link = link;
      o.algo = algo;
      o.devices = {1, 2, 4, 8, 16, 32};
      o.batch = 512;
      const WhatIfResult r = predictScaling(prof, o);
      for (size_t i = 1; i < r.rows.size(); ++i) {
        EXPECT_LT(r.rows[i].computeSeconds, r.rows[i - 1].computeSeconds);
        EXPECT_GT(r.rows[i].allreduceSeconds, r.rows[i - 1].allreduceSeconds);
        EXPECT_GE(r.rows[i].syncShare, r.rows[i - 1].syncShare);
        EXPECT_LT(r.rows[i].efficiency, r.rows[i - 1].efficiency + 1e-12);
        EXPECT_LT(r.rows[i].speedup, r.rows[i].devices);  // never linear once communication costs anything
      }
    }
  }
  // Keeping the per-device batch: the global batch grows, the shard does not.
  WhatIfOptions o;
  o.link = linkPreset("nvlink");
  o.perDeviceBatch = true;
  o.batch = 64;
  o.devices = {1, 8};
  const WhatIfResult r = predictScaling(prof, o);
  EXPECT_EQ(r.rows[1].globalBatch, 512);
  EXPECT_EQ(r.rows[1].perReplicaBatch, 64);
  EXPECT_DOUBLE_EQ(r.rows[1].computeSeconds, r.rows[0].computeSeconds);
}

TEST(CostModel, ProfileFromStepsSkipsTheFirstStep) {
  std::vector<StepEvent> steps(3);
  for (int s = 0; s < 3; ++s) {
    for (int r = 0; r < 2; ++r) {
      ReplicaStep rs;
      rs.replica = r;
      rs.samples = 32;
      rs.phases.forward = s == 0 ? 1.0 : 0.032;  // the first step is slow (allocation)
      rs.phases.backward = s == 0 ? 1.0 : 0.064;
      rs.phases.optimizer = 0.005;
      steps[static_cast<size_t>(s)].replicas.push_back(rs);
    }
  }
  const ComputeProfile p = profileFromSteps(steps, 1000, "synthetic");
  EXPECT_EQ(p.stepsUsed, 2);
  EXPECT_NEAR(p.forwardPerSample, 0.001, 1e-12);
  EXPECT_NEAR(p.backwardPerSample, 0.002, 1e-12);
  EXPECT_NEAR(p.optimizerPerStep, 0.005, 1e-12);
  EXPECT_THROW(profileFromSteps({}, 1000, "empty"), UserError);
}

TEST(CostModel, MeasuredHostBandwidthIsPositiveAndFinite) {
  const HostAllReduceMeasurement m = measureHostAllReduce(2, 4 << 20, 3);
  EXPECT_FALSE(m.modelled);
  EXPECT_EQ(m.label, "measured");
  EXPECT_TRUE(m.link.measured);
  EXPECT_EQ(m.link.id, "host");
  EXPECT_EQ(m.devices, 2);
  EXPECT_GT(m.seconds, 0.0);
  // After the warm-up, the median of the timed repeats and their spread around it.
  EXPECT_EQ(m.repeats, 3);
  EXPECT_LE(m.secondsLow, m.seconds);
  EXPECT_GE(m.secondsHigh, m.seconds);
  EXPECT_GT(m.secondsLow, 0.0);
  EXPECT_TRUE(std::isfinite(m.link.bandwidth));
  EXPECT_GT(m.link.bandwidth, 1e6);  // more than 1 MB/s through host memory, on any machine
  EXPECT_GT(m.busBandwidth, 0.0);
  EXPECT_LE(m.busBandwidth, m.link.bandwidth * 1.0000001);
  EXPECT_GE(m.link.latency, 0.0);
  EXPECT_TRUE(std::isfinite(m.link.latency));
  // The measured link drives the model like a preset: the estimate for the measured size is the
  // measured time when transfer dominates (the fit reproduces it), else the measured time plus the
  // measured latency term (a loaded machine can make the tiny all-reduce nearly as slow).
  const double est = estimateAllReduce(CollectiveAlgo::Ring, 2, static_cast<double>(m.bytes), m.link).seconds;
  EXPECT_GT(est, 0.0);
  const bool transferDominates = m.seconds - m.smallSeconds >= 0.1 * m.seconds;
  EXPECT_NEAR(est, transferDominates ? m.seconds : m.seconds + m.smallSeconds, 1e-9 + 1e-6 * m.seconds);
}
