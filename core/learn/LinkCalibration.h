// The cross-host all-reduce as measured, not as the datasheet says: the alpha-beta ring of
// CostModel.h corrected by three figures fitted to measurements (bench/workers/cluster.sh): the
// overhead of one message, the share of a link's rate a transfer achieves, and the hosts' own
// ceiling (CPU, network stack) that no faster link lifts. The shipped calibration names where and
// when it was measured; its message overhead stands in for the latency term, which the links it
// was measured on (veth pairs, no delay) cannot add: on a real network it is a parameter.
#pragma once
#include <string>
#include <vector>

#include "learn/CostModel.h"

namespace ml {

struct LinkCalibration {
  double messageSeconds = 30e-6;  // alpha: one message's fixed cost
  double linkFraction = 1.0;      // achieved share of the link's rate, (0, 1]
  double hostBytesPerSecond = 0;  // the hosts' ceiling per direction; 0: none
  std::string source;             // what was measured, on what, with which command
  std::string date;               // "2026-12-07"
};

// One measurement: the all-reduce of `bytes` in `buckets` calls across `hosts` (one worker each).
struct LinkSample {
  int hosts = 2;
  double bytes = 0;
  int buckets = 1;
  double bitsPerSecond = 0;  // the link's rate; 0: unshaped (only the hosts' ceiling)
  double seconds = 0;        // measured
};

// The calibration Mirrorlab ships, measured with bench/workers/cluster.sh (bench/RESULTS.md).
const LinkCalibration& shippedLinkCalibration();

// A cross-host link of `bitsPerSecond` (0: unshaped) as the calibration sees it: its latency the
// message overhead, its bandwidth the achieved share of the rate in series with the hosts' ceiling.
Link calibratedLink(double bitsPerSecond, const LinkCalibration& c);

// "10gbit", "2.5gbit", "500mbit", "25gbe" -> bits per second; throws UserError otherwise.
double parseLinkRate(const std::string& text);

// The modelled time of one sample's all-reduce: a ring per bucket, 2(n-1) messages each, and
// 2(n-1)/n of the bytes through the calibrated link.
double predictCrossAllReduce(const LinkSample& s, const LinkCalibration& c);
// The ring's bound with a measured message latency: 2(n-1) k latency + 2(n-1)/n bytes / rate.
double ringBound(const LinkSample& s, double latencySeconds);

// Least squares in relative error, every figure non-negative (the model is linear in alpha,
// 1 / fraction and 1 / ceiling). Throws UserError with fewer than three samples or none shaped.
LinkCalibration fitLinkCalibration(const std::vector<LinkSample>& samples, const std::string& source, const std::string& date);

}  // namespace ml
