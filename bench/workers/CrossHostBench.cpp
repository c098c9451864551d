// The cross-host all-reduce of one step's gradients, measured and fitted (bench/workers/cluster.sh):
//   mpirun ... bench_workers_crosshost measure PROJECT [REPEATS]
//     every worker sums the project's float32 gradient through WorkerGroup::allReduce (the MPI
//     plugin's call, as the strategy makes it) in the training's buckets (distribute.bucket_bytes),
//     after a barrier so that no worker's lateness is counted, REPEATS times after a warm-up; and an
//     8-byte all-reduce (the latency of the path). Worker 1 prints one line:
//     hosts workers bytes buckets median_s p10_s high_s small_median_s small_p10_s
//     (p10: the 10th percentile. The hosts share this machine's cores with whatever else runs:
//     interference only adds time, so the low percentile is the link's own time.)
//   bench_workers_crosshost fit SAMPLES HELDOUT_RATES
//     SAMPLES: lines "model hosts bytes buckets rate_bits median_s p10_s small_median_s small_p10_s"
//     (rate 0: unshaped); the fit and the table use the p10 figures, the medians stand beside them;
//     fits the calibration (learn/LinkCalibration.h) on the rates not held out and prints the
//     table of measured, bound, uncalibrated and calibrated predictions with their ratios.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "distribute/MpiWorkers.h"
#include "learn/LinkCalibration.h"
#include "nn/Sequential.h"
#include "project/Project.h"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double p10(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 10];
}

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

int measure(const std::string& projectPath, int repeats) {
  const ml::Project p = ml::Project::load(projectPath);
  const int64_t floats = ml::Sequential(p.model).paramCount();
  const int64_t cap = std::max<int64_t>(1, p.distribute.bucketBytes / 4);
  auto group = ml::startMpiWorkers(120);
  std::vector<float> grad(static_cast<size_t>(floats));
  double one = 1, tiny[1] = {1};
  auto barrier = [&] { group->allReduce(std::span<double>(&one, 1), "the benchmark's barrier"); };
  std::vector<double> big, small;
  for (int i = 0; i < repeats + 3; ++i) {
    std::fill(grad.begin(), grad.end(), 1e-3f);  // sums never overflow
    barrier();
    const auto t0 = std::chrono::steady_clock::now();
    // The buckets in the strategy's order: from the end of the flat gradient, cap floats each.
    for (int64_t hi = floats; hi > 0; hi -= cap) {
      const int64_t lo = std::max<int64_t>(0, hi - cap);
      group->allReduce(std::span<float>(grad.data() + lo, static_cast<size_t>(hi - lo)), "the benchmark's all-reduce");
    }
    if (i >= 3) big.push_back(since(t0));
    barrier();
    const auto t1 = std::chrono::steady_clock::now();
    group->allReduce(std::span<double>(tiny, 1), "the benchmark's small all-reduce");
    if (i >= 3) small.push_back(since(t1));
  }
  if (group->rank() == 0 && std::getenv("BENCH_DUMP")) {  // every repeat, sorted, to see the spread
    std::sort(big.begin(), big.end());
    for (double t : big) std::fprintf(stderr, "%.2f ", t * 1e3);
    std::fprintf(stderr, "ms\n");
  }
  const auto hosts = group->hosts();
  const int distinct = static_cast<int>(std::set<std::string>(hosts.begin(), hosts.end()).size());
  if (group->rank() == 0)
    std::printf("%d %d %lld %lld %.9f %.9f %.9f %.9f %.9f\n", distinct, group->size(), static_cast<long long>(floats * 4),
                static_cast<long long>((floats + cap - 1) / cap), median(big), p10(big),
                *std::max_element(big.begin(), big.end()), median(small), p10(small));
  group->finish();
  return 0;
}

struct Row {
  std::string model;
  ml::LinkSample s;   // seconds: the 10th percentile
  double median = 0;  // of the same repeats
  double small = 0;   // the 8-byte all-reduce, 10th percentile
};

std::string rateText(double bits) {
  char b[32];
  if (bits <= 0) return "unshaped";
  std::snprintf(b, sizeof b, "%g Gbit/s", bits / 1e9);
  return b;
}

int fit(const std::string& path, const std::string& heldOut) {
  std::ifstream in(path);
  std::vector<Row> rows;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream l(line);
    Row r;
    double smallMedian = 0;
    if (l >> r.model >> r.s.hosts >> r.s.bytes >> r.s.buckets >> r.s.bitsPerSecond >> r.median >> r.s.seconds >> smallMedian >>
        r.small)
      rows.push_back(r);
  }
  std::set<double> held;
  std::istringstream h(heldOut);
  for (std::string t; std::getline(h, t, ',');)
    if (!t.empty()) held.insert(ml::parseLinkRate(t));
  // Rounds of the same setting: their medians, as the table's "measured".
  std::map<std::tuple<std::string, int, double>, std::vector<Row>> bySetting;
  for (const auto& r : rows) bySetting[{r.model, r.s.hosts, r.s.bitsPerSecond}].push_back(r);
  std::vector<Row> med;
  for (auto& [key, rs] : bySetting) {
    Row m = rs.front();
    std::vector<double> t, md, sm;
    for (const auto& r : rs) t.push_back(r.s.seconds), md.push_back(r.median), sm.push_back(r.small);
    m.s.seconds = median(t);
    m.median = median(md);
    m.small = median(sm);
    med.push_back(m);
  }
  std::vector<ml::LinkSample> train;
  for (const auto& r : med)
    if (!held.count(r.s.bitsPerSecond)) train.push_back(r.s);
  const auto c = ml::fitLinkCalibration(train, "fit", "");
  std::printf("calibration: message %.1f us, %.1f%% of the link rate, hosts' ceiling %.3f GB/s (%zu settings fitted)\n",
              c.messageSeconds * 1e6, c.linkFraction * 100, c.hostBytesPerSecond / 1e9, train.size());
  std::printf(
      "| model | hosts | link | measured ms (median) | ring bound ms | meas./bound | what-if (uncal.) ms | meas./uncal. | "
      "what-if (cal.) ms | meas./cal. | error | |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  double worstHeld = 0;
  for (const auto& r : med) {
    // The per-message latency of the path: the 8-byte all-reduce's time over its 2(n-1) messages.
    const double latency = r.small / (2.0 * (r.s.hosts - 1));
    const double bound = ml::ringBound(r.s, latency);
    // Uncalibrated: the nominal rate and the 10 GbE preset's 30 us per message.
    const ml::LinkCalibration nominal{ml::linkPreset("10gbe").latency, 1.0, 0, "", ""};
    const double uncal = ml::predictCrossAllReduce(r.s, nominal), cal = ml::predictCrossAllReduce(r.s, c);
    const bool isHeld = held.count(r.s.bitsPerSecond) > 0;
    // The error is the prediction's distance from the measurement, as a share of the measurement.
    const double error = cal / r.s.seconds - 1;
    if (isHeld) worstHeld = std::max(worstHeld, std::abs(error));
    std::printf("| %s | %d | %s | %.2f (%.2f) | %s | %s | %s | %s | %.2f | %.2f | %+.0f%% | %s |\n", r.model.c_str(), r.s.hosts,
                rateText(r.s.bitsPerSecond).c_str(), r.s.seconds * 1e3, r.median * 1e3,
                r.s.bitsPerSecond > 0 ? std::to_string(bound * 1e3).substr(0, 6).c_str() : "-",
                r.s.bitsPerSecond > 0 ? std::to_string(r.s.seconds / bound).substr(0, 4).c_str() : "-",
                r.s.bitsPerSecond > 0 ? std::to_string(uncal * 1e3).substr(0, 6).c_str() : "-",
                r.s.bitsPerSecond > 0 ? std::to_string(r.s.seconds / uncal).substr(0, 4).c_str() : "-", cal * 1e3,
                r.s.seconds / cal, error * 100, isHeld ? "held out" : "fitted");
  }
  std::printf("worst held-out error of the calibrated model: %.1f%%\n", worstHeld * 100);
  std::printf("per-message latency of the path (8-byte all-reduce / 2(n-1), 10th percentile):");
  for (const auto& r : med)
    if (r.model == med.front().model && r.s.bitsPerSecond == 0)
      std::printf(" %d hosts %.1f us;", r.s.hosts, r.small / (2.0 * (r.s.hosts - 1)) * 1e6);
  std::printf("\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "measure" && argc >= 3) return measure(argv[2], argc > 3 ? std::max(3, std::atoi(argv[3])) : 20);
    if (mode == "fit" && argc >= 3) return fit(argv[2], argc > 3 ? argv[3] : "");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: %s measure PROJECT [REPEATS] (under mpirun) | fit SAMPLES [HELD_OUT_RATES]\n", argv[0]);
  return 2;
}
