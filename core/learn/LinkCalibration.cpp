// The calibrated cross-host link: prediction, the ring bound, and the fit that produces the
// shipped figures from bench/workers/cluster.sh's measurements.
#include "learn/LinkCalibration.h"

#include <array>
#include <cctype>
#include <cmath>
#include <limits>

#include "Error.h"

namespace ml {

namespace {
// The fit bench/workers/cluster.sh printed (bench/RESULTS.md, "Across hosts"); to recalibrate, run
// it and copy its three figures here with the date.
constexpr double kShippedMessageSeconds = 545.4e-6;
constexpr double kShippedLinkFraction = 1.0;
constexpr double kShippedHostBytesPerSecond = 0;  // the fit found none
}  // namespace

const LinkCalibration& shippedLinkCalibration() {
  // Fitted by `bench/workers/cluster.sh` to the wide MLP's and the CNN's gradients on 2 and 4
  // hosts at 0.5, 2 and 10 Gbit/s and unshaped; held out: 1, 5 and 25 Gbit/s (bench/RESULTS.md).
  static const LinkCalibration c{
      kShippedMessageSeconds, kShippedLinkFraction, kShippedHostBytesPerSecond,
      "veth links between network namespaces on a 2-vCPU VM (Open MPI over TCP), bench/workers/cluster.sh", "2026-12-07"};
  return c;
}

Link calibratedLink(double bitsPerSecond, const LinkCalibration& c) {
  Link l;
  const bool shaped = bitsPerSecond > 0;
  l.id = shaped ? std::to_string(static_cast<long long>(std::llround(bitsPerSecond / 1e6))) + "mbit" : "unshaped";
  char name[96];
  if (shaped)
    std::snprintf(name, sizeof name, "%.3g Gbit/s Ethernet (calibrated)", bitsPerSecond / 1e9);
  else
    std::snprintf(name, sizeof name, "unshaped links (calibrated)");
  l.name = name;
  // Seconds per byte add up in series: the link's achieved rate, then the hosts' ceiling.
  const double perByte =
      (shaped ? 8.0 / (c.linkFraction * bitsPerSecond) : 0.0) + (c.hostBytesPerSecond > 0 ? 1.0 / c.hostBytesPerSecond : 0.0);
  l.bandwidth = perByte > 0 ? 1.0 / perByte : std::numeric_limits<double>::infinity();
  l.latency = c.messageSeconds;
  return l;
}

double parseLinkRate(const std::string& text) {
  std::string t;
  for (char ch : text) t += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(t, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = t.substr(used);
  const double scale = unit == "gbit" || unit == "gbe" ? 1e9 : unit == "mbit" ? 1e6 : 0;
  if (used == 0 || scale == 0 || !(v > 0) || !std::isfinite(v))
    throw UserError("a link rate is a number with gbit or mbit, e.g. 10gbit or 500mbit, got '" + text + "'");
  return v * scale;
}

namespace {
// x1 = messages, x2 = bytes on a link's wire in bits / rate, x3 = bytes through the hosts.
std::array<double, 3> terms(const LinkSample& s) {
  const double n = s.hosts, moved = 2.0 * (n - 1) / n * s.bytes;
  return {2.0 * (n - 1) * s.buckets, s.bitsPerSecond > 0 ? moved * 8.0 / s.bitsPerSecond : 0.0, moved};
}
}  // namespace

double predictCrossAllReduce(const LinkSample& s, const LinkCalibration& c) {
  if (s.hosts <= 1 || s.bytes <= 0) return 0;
  const auto x = terms(s);
  return x[0] * c.messageSeconds + x[1] / c.linkFraction + (c.hostBytesPerSecond > 0 ? x[2] / c.hostBytesPerSecond : 0.0);
}

double ringBound(const LinkSample& s, double latencySeconds) {
  if (s.hosts <= 1) return 0;
  const auto x = terms(s);
  return x[0] * latencySeconds + x[1];
}

namespace {
// Solves the normal equations restricted to `use` (a bit per term); false if singular. A row's
// target is 1 less what the fixed figures in `p` (the terms not in `use`) already explain.
bool solve(const std::vector<std::array<double, 3>>& rows, unsigned use, std::array<double, 3>& p) {
  const std::array<double, 3> fixed = p;
  std::vector<int> idx;
  for (int j = 0; j < 3; ++j)
    if (use & (1u << j)) idx.push_back(j);
  const size_t m = idx.size();
  double a[3][4] = {};
  for (const auto& r : rows) {
    double target = 1;
    for (size_t j = 0; j < 3; ++j)
      if (!(use & (1u << j))) target -= r[j] * fixed[j];
    for (size_t i = 0; i < m; ++i) {
      for (size_t j = 0; j < m; ++j) a[i][j] += r[static_cast<size_t>(idx[i])] * r[static_cast<size_t>(idx[j])];
      a[i][3] += r[static_cast<size_t>(idx[i])] * target;
    }
  }
  for (size_t c = 0; c < m; ++c) {  // Gauss-Jordan with partial pivoting
    size_t piv = c;
    for (size_t r = c + 1; r < m; ++r)
      if (std::abs(a[r][c]) > std::abs(a[piv][c])) piv = r;
    if (std::abs(a[piv][c]) < 1e-300) return false;
    for (size_t k = 0; k < 4; ++k) std::swap(a[c][k], a[piv][k]);
    for (size_t r = 0; r < m; ++r) {
      if (r == c) continue;
      const double f = a[r][c] / a[c][c];
      for (size_t k = c; k < 4; ++k) a[r][k] -= f * a[c][k];
    }
  }
  for (size_t i = 0; i < m; ++i) p[static_cast<size_t>(idx[i])] = a[i][3] / a[i][i];
  return true;
}
}  // namespace

LinkCalibration fitLinkCalibration(const std::vector<LinkSample>& samples, const std::string& source, const std::string& date) {
  std::vector<std::array<double, 3>> rows;  // each term over the measured time: relative error
  bool shaped = false;
  for (const auto& s : samples) {
    if (s.hosts < 2 || !(s.seconds > 0) || !(s.bytes > 0)) continue;
    auto x = terms(s);
    for (auto& v : x) v /= s.seconds;
    rows.push_back(x);
    shaped = shaped || s.bitsPerSecond > 0;
  }
  if (rows.size() < 3 || !shaped)
    throw UserError("the link calibration needs at least three measurements on two or more hosts, some on shaped links");
  // Non-negative least squares over the few subsets of terms. The link's term is free, or fixed at
  // the full rate: no link carries more than its rate, and a shaper that seems to (tc's tbf lets
  // a burst through at once after a pause) would otherwise teach the model a link faster than it is.
  double best = std::numeric_limits<double>::infinity();
  std::array<double, 3> fit{};
  for (unsigned use : {7u, 6u, 3u, 2u, 5u, 4u, 1u}) {
    std::array<double, 3> p{0, (use & 2u) ? 0.0 : 1.0, 0};
    if (!solve(rows, use, p) || p[0] < 0 || p[1] < 1 || p[2] < 0) continue;
    double err = 0;
    for (const auto& r : rows) err += std::pow(r[0] * p[0] + r[1] * p[1] + r[2] * p[2] - 1.0, 2);
    if (err < best) best = err, fit = p;
  }
  if (!std::isfinite(best)) throw UserError("the link calibration found no fit with non-negative figures");
  LinkCalibration c;
  c.messageSeconds = fit[0];
  c.linkFraction = 1.0 / fit[1];
  c.hostBytesPerSecond = fit[2] > 0 ? 1.0 / fit[2] : 0.0;
  c.source = source;
  c.date = date;
  return c;
}

}  // namespace ml
