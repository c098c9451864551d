// The calibrated cross-host link: the fit recovers known figures, its prediction is the what-if's
// alpha-beta ring over the calibrated link, the ring bound by hand, link rates parsed or refused.
#include <gtest/gtest.h>

#include <cmath>

#include "Error.h"
#include "learn/LinkCalibration.h"

using namespace ml;

namespace {
// The wide MLP (2.68 MB in 3 buckets) and the CNN (0.9 MB, 1 bucket) on 2 and 4 hosts at `rates`.
std::vector<LinkSample> grid(const std::vector<double>& rates, const LinkCalibration& truth, bool noise) {
  std::vector<LinkSample> out;
  int i = 0;
  for (int hosts : {2, 4})
    for (auto [bytes, buckets] : {std::pair{2'678'824.0, 3}, std::pair{900'136.0, 1}})
      for (double rate : rates) {
        LinkSample s{hosts, bytes, buckets, rate, 0};
        // A deterministic +-4% wobble, as measurements scatter.
        s.seconds = predictCrossAllReduce(s, truth) * (noise ? 1.0 + 0.04 * ((i++ % 3) - 1) : 1.0);
        out.push_back(s);
      }
  return out;
}
}  // namespace

TEST(LinkCalibration, FitRecoversTheFiguresThatMadeTheMeasurements) {
  const LinkCalibration truth{80e-6, 0.92, 0.6e9, "", ""};
  const auto c = fitLinkCalibration(grid({0.5e9, 2e9, 10e9, 0}, truth, false), "synthetic", "2026-12-07");
  EXPECT_NEAR(c.messageSeconds, 80e-6, 1e-9);
  EXPECT_NEAR(c.linkFraction, 0.92, 1e-9);
  EXPECT_NEAR(c.hostBytesPerSecond, 0.6e9, 1.0);
  EXPECT_EQ(c.source, "synthetic");
  EXPECT_EQ(c.date, "2026-12-07");
}

TEST(LinkCalibration, NoisyFitPredictsHeldOutRatesWithinAFewPercent) {
  const LinkCalibration truth{50e-6, 0.95, 0.45e9, "", ""};
  const auto c = fitLinkCalibration(grid({0.5e9, 2e9, 10e9, 0}, truth, true), "noisy", "");
  for (const auto& s : grid({1e9, 5e9, 25e9}, truth, false)) {
    const double p = predictCrossAllReduce(s, c);
    EXPECT_NEAR(p / s.seconds, 1.0, 0.05) << s.hosts << " hosts, " << s.bytes << " bytes at " << s.bitsPerSecond;
  }
}

TEST(LinkCalibration, FitWithoutAHostCeilingKeepsTheFiguresNonNegative) {
  // Pure link: no ceiling in the truth; the fit must not invent a negative one.
  const LinkCalibration truth{20e-6, 0.9, 0, "", ""};
  const auto c = fitLinkCalibration(grid({0.5e9, 1e9, 2e9}, truth, false), "", "");
  EXPECT_GE(c.messageSeconds, 0.0);
  EXPECT_GE(c.hostBytesPerSecond, 0.0);
  EXPECT_NEAR(c.linkFraction, 0.9, 1e-6);
}

TEST(LinkCalibration, ALinkThatSeemsFasterThanItsRateIsFittedAtItsRate) {
  // Measurements 20% faster than the rate allows (as behind tc's tbf, whose bucket lets a burst
  // through at once): the fit keeps the link at its rate and the other figures non-negative.
  const LinkCalibration truth{60e-6, 1.2, 0.8e9, "", ""};
  const auto samples = grid({0.5e9, 2e9, 10e9, 0}, truth, false);
  const auto c = fitLinkCalibration(samples, "", "");
  EXPECT_EQ(c.linkFraction, 1.0);
  EXPECT_GE(c.messageSeconds, 0.0);
  EXPECT_GE(c.hostBytesPerSecond, 0.0);
  // The free fit would have been exact; the capped one is the best fit with the link at its rate,
  // so it predicts every measurement slower, never faster, than measured on the slowest link.
  for (const auto& s : samples)
    if (s.bitsPerSecond == 0.5e9) {
      EXPECT_GT(predictCrossAllReduce(s, c), s.seconds);
    }
}

TEST(LinkCalibration, PredictionIsTheWhatIfsRingOverTheCalibratedLink) {
  const LinkCalibration c{40e-6, 0.9, 0.5e9, "", ""};
  for (double rate : {1e9, 10e9, 0.0}) {
    const Link l = calibratedLink(rate, c);
    const LinkSample s{4, 3e6, 1, rate, 0};
    EXPECT_NEAR(estimateAllReduce(CollectiveAlgo::Ring, 4, 3e6, l).seconds, predictCrossAllReduce(s, c), 1e-12);
  }
  // By hand: 4 hosts, 3 MB in 2 buckets at 1 Gbit/s: 2*3*2 messages of 40 us, 1.5*3 MB = 4.5 MB
  // at 0.9 Gbit/s (0.04 s) and through the 0.5 GB/s ceiling (0.009 s).
  EXPECT_NEAR(predictCrossAllReduce({4, 3e6, 2, 1e9, 0}, c), 12 * 40e-6 + 4.5e6 * 8 / 0.9e9 + 4.5e6 / 0.5e9, 1e-12);
  EXPECT_EQ(predictCrossAllReduce({1, 3e6, 2, 1e9, 0}, c), 0.0);
}

TEST(LinkCalibration, RingBoundIsTheLinkRateAndTheMeasuredLatency) {
  // 2 hosts, 2 MB, 1 bucket at 8 Gbit/s: 2 messages of 50 us + 2 MB * 8 / 8e9 = 2 ms.
  EXPECT_NEAR(ringBound({2, 2e6, 1, 8e9, 0}, 50e-6), 100e-6 + 2e-3, 1e-12);
  EXPECT_NEAR(ringBound({4, 2e6, 3, 8e9, 0}, 10e-6), 18 * 10e-6 + 1.5 * 2e-3, 1e-12);
}

TEST(LinkCalibration, RatesParseOrAreRefusedByName) {
  EXPECT_EQ(parseLinkRate("10gbit"), 10e9);
  EXPECT_EQ(parseLinkRate("2.5Gbit"), 2.5e9);
  EXPECT_EQ(parseLinkRate("500mbit"), 500e6);
  EXPECT_EQ(parseLinkRate("25gbe"), 25e9);
  for (const char* bad : {"", "10", "fast", "-1gbit", "0gbit", "10 gbit", "1e400gbit"}) {
    try {
      parseLinkRate(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("10gbit"), std::string::npos) << e.what();
    }
  }
}

TEST(LinkCalibration, TheShippedCalibrationSaysWhereAndWhen) {
  const auto& c = shippedLinkCalibration();
  EXPECT_GT(c.messageSeconds, 0.0);
  EXPECT_GT(c.linkFraction, 0.3);
  EXPECT_LE(c.linkFraction, 1.05);
  EXPECT_NE(c.source.find("bench/workers/cluster.sh"), std::string::npos);
  EXPECT_EQ(c.date.size(), 10u);
  EXPECT_THROW(fitLinkCalibration({}, "", ""), UserError);
}
