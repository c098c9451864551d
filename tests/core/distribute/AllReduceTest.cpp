// Both all-reduce algorithms against a serial reference sum, with 1..8 participants.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

#include "Error.h"
#include "distribute/AllReduce.h"
#include "nn/Precision.h"
#include "random/Rng.h"

namespace {

void checkAllReduce(const std::string& algo, int n, size_t len) {
  std::vector<std::vector<float>> bufs(static_cast<size_t>(n));
  ml::Rng rng(len * 31 + static_cast<size_t>(n));
  for (auto& b : bufs) {
    b.resize(len);
    for (auto& v : b) v = static_cast<float>(rng.uniform(-1, 1));
  }
  std::vector<double> ref(len, 0.0);
  for (const auto& b : bufs)
    for (size_t i = 0; i < len; ++i) ref[i] += b[i];
  auto ar = ml::makeAllReduce(ml::parseAllReduceAlgo(algo), n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { ar->allReduce(r, bufs[static_cast<size_t>(r)]); });
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < len; ++i)
    ASSERT_NEAR(bufs[0][i], ref[i], 1e-5 * (1 + std::fabs(ref[i]))) << algo << " n=" << n << " len=" << len << " i=" << i;
  for (int r = 1; r < n; ++r)
    ASSERT_EQ(0, std::memcmp(bufs[0].data(), bufs[static_cast<size_t>(r)].data(), len * sizeof(float)))
        << algo << ": replica " << r << " differs from replica 0 (n=" << n << ", len=" << len << ")";
}

class AllReduceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(AllReduceTest, EqualsSerialSumForAllSizesAndParticipants) {
  for (int n = 1; n <= 8; ++n)
    for (size_t len : {size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{64}, size_t{1000000}})
      checkAllReduce(GetParam(), n, len);
}

TEST_P(AllReduceTest, RepeatedCallsReuseTheBarrier) {
  const int n = 3;
  auto ar = ml::makeAllReduce(ml::parseAllReduceAlgo(GetParam()), n);
  std::vector<std::vector<float>> bufs(n, std::vector<float>(10));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      for (int k = 0; k < 50; ++k) {
        std::fill(bufs[static_cast<size_t>(r)].begin(), bufs[static_cast<size_t>(r)].end(), static_cast<float>(r + k));
        ar->allReduce(r, bufs[static_cast<size_t>(r)]);
        // sum over r of (r + k) = 3k + 3
        for (float v : bufs[static_cast<size_t>(r)]) ASSERT_EQ(v, static_cast<float>(3 * k + 3));
        ar->allReduce(r, std::span<float>());  // keeps everyone in step before the next fill
      }
    });
  for (auto& t : threads) t.join();
}

INSTANTIATE_TEST_SUITE_P(Algorithms, AllReduceTest, ::testing::Values("ring", "reduce-to-one"));

// The ring checks each participant's own values for inf/NaN as it reads them for the sum: one bad
// value anywhere in one replica's buffer (every position of a 13-value buffer, so every chunk: the
// ones the replica adds into itself and the one only its successor reads) names that replica and no
// other, over two buckets (a step's calls accumulate), and the next step starts clean.
TEST(AllReduce, TheRingNamesTheReplicaWhoseOwnValuesWereNotFinite) {
  for (const int n : {2, 3, 4}) {
    auto ar = ml::makeAllReduce(ml::AllReduceAlgo::Ring, n);
    ASSERT_TRUE(ar->checksLocalValues());
    const size_t len = 13;
    for (int bad = 0; bad < n; ++bad)
      for (size_t at = 0; at < 2 * len; ++at)
        for (const float v : {std::nanf(""), -INFINITY}) {
          std::vector<std::vector<float>> bufs(static_cast<size_t>(n), std::vector<float>(2 * len, 1.0f));
          bufs[static_cast<size_t>(bad)][at] = v;
          std::vector<std::thread> threads;
          for (int r = 0; r < n; ++r)
            threads.emplace_back([&, r] {
              ar->beginStep(r);
              ar->reduceScatter(r, std::span<float>(bufs[static_cast<size_t>(r)]).first(len));
              ar->reduceScatter(r, std::span<float>(bufs[static_cast<size_t>(r)]).last(len));
            });
          for (auto& t : threads) t.join();
          for (int r = 0; r < n; ++r)
            EXPECT_EQ(ar->localFinite(r), r != bad)
                << "n=" << n << ", replica " << bad << "'s value " << at << " = " << v << ", asked about replica " << r;
        }
    // A clean step after a bad one: everyone finite again.
    std::vector<std::vector<float>> bufs(static_cast<size_t>(n), std::vector<float>(len, 2.0f));
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        ar->beginStep(r);
        ar->reduceScatter(r, bufs[static_cast<size_t>(r)]);
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < n; ++r) EXPECT_TRUE(ar->localFinite(r)) << "n=" << n << ", replica " << r << " after a clean step";
  }
  EXPECT_FALSE(ml::makeAllReduce(ml::AllReduceAlgo::ReduceToOne, 2)->checksLocalValues());
}

TEST(AllReduce, UnknownNameIsAUserError) {
  EXPECT_THROW(ml::parseAllReduceAlgo("tree"), ml::UserError);
  for (const char* name : {"ring", "reduce-to-one", "nccl", "hierarchical", "mpi"})
    EXPECT_STREQ(ml::toString(ml::parseAllReduceAlgo(name)), name);
  // Only the host-memory algorithms are made here; the others are refused with the way out.
  EXPECT_THROW(ml::makeAllReduce(ml::AllReduceAlgo::Nccl, 2), ml::UserError);
  EXPECT_THROW(ml::makeAllReduce(ml::AllReduceAlgo::Mpi, 2), ml::UserError);
}

// bfloat16 on the wire: every value sent is rounded to bfloat16, the additions are float32. The
// exact sums the algorithms must form, computed here serially (R: round to bfloat16):
//   ring, chunk c:  R(..R(R(x_c) + R(x_c+1)).. + R(x_c+n-1))   (indices mod n: the ring's order)
//   reduce-to-one:  R(..(R(x_0) + R(x_1)).. + R(x_n-1))        (replica 0 adds them all, then sends)
std::vector<std::vector<float>> randomBuffers(int n, size_t len, uint64_t seed) {
  std::vector<std::vector<float>> bufs(static_cast<size_t>(n));
  ml::Rng rng(seed);
  for (auto& b : bufs) {
    b.resize(len);
    for (auto& v : b) v = static_cast<float>(rng.uniform(-1, 1) * std::exp(rng.uniform(-8, 8)));
  }
  return bufs;
}

void runAll(ml::AllReduce& ar, std::vector<std::vector<float>>& bufs) {
  std::vector<std::thread> threads;
  for (int r = 0; r < ar.participants(); ++r) threads.emplace_back([&, r] { ar.allReduce(r, bufs[static_cast<size_t>(r)]); });
  for (auto& t : threads) t.join();
}

TEST(AllReduceBfloat16, TheRingSendsBfloat16AndAddsInFloat32) {
  for (int n : {2, 3, 4, 5})
    for (size_t len : {size_t{1}, size_t{9}, size_t{1000}}) {
      auto bufs = randomBuffers(n, len, 7 * len + static_cast<size_t>(n));
      const auto in = bufs;
      auto ar = ml::makeAllReduce(ml::AllReduceAlgo::Ring, n);
      ar->setDtype(ml::AllReduceDtype::Bfloat16);
      runAll(*ar, bufs);
      double worst = 0;
      for (int c = 0; c < n; ++c)
        for (size_t i = ml::AllReduce::chunkBegin(len, c, n); i < ml::AllReduce::chunkBegin(len, c + 1, n); ++i) {
          float acc = ml::roundToBfloat16(in[static_cast<size_t>(c)][i]);
          double exact = in[static_cast<size_t>(c)][i];
          for (int k = 1; k < n; ++k) {
            const float x = in[static_cast<size_t>((c + k) % n)][i];
            acc = ml::roundToBfloat16(acc + ml::roundToBfloat16(x));
            exact += x;
          }
          for (int r = 0; r < n; ++r)
            ASSERT_EQ(bufs[static_cast<size_t>(r)][i], acc) << "n=" << n << " len=" << len << " i=" << i << " replica " << r;
          double mag = 0;
          for (int r = 0; r < n; ++r) mag += std::fabs(in[static_cast<size_t>(r)][i]);
          worst = std::max(worst, std::fabs(acc - exact) / mag);
        }
      // Each of the 2n-1 roundings is at most half a bfloat16 ulp (2^-8 relative) of what it rounds.
      EXPECT_LE(worst, (2 * n - 1) * std::ldexp(1.0, -8)) << "n=" << n;
      if (len == 1000) {
        EXPECT_GT(worst, 1e-5) << "a float32 sum would be this close; bfloat16's is not (n=" << n << ")";
      }
    }
}

TEST(AllReduceBfloat16, ReduceToOneRoundsWhatItReceivesAndWhatItSends) {
  for (int n : {2, 3, 6}) {
    const size_t len = 777;
    auto bufs = randomBuffers(n, len, 99 + static_cast<size_t>(n));
    const auto in = bufs;
    auto ar = ml::makeAllReduce(ml::AllReduceAlgo::ReduceToOne, n);
    ar->setDtype(ml::AllReduceDtype::Bfloat16);
    runAll(*ar, bufs);
    for (size_t i = 0; i < len; ++i) {
      float acc = ml::roundToBfloat16(in[0][i]);
      for (int r = 1; r < n; ++r) acc += ml::roundToBfloat16(in[static_cast<size_t>(r)][i]);
      acc = ml::roundToBfloat16(acc);
      for (int r = 0; r < n; ++r) ASSERT_EQ(bufs[static_cast<size_t>(r)][i], acc) << "n=" << n << " i=" << i;
    }
  }
}

TEST(AllReduceBfloat16, Float32IsTheDefaultAndTheNameIsChecked) {
  auto ar = ml::makeAllReduce(ml::AllReduceAlgo::Ring, 2);
  EXPECT_EQ(ar->dtype(), ml::AllReduceDtype::Float32);
  EXPECT_EQ(ar->describe(), "ring over host memory");
  ar->setDtype(ml::AllReduceDtype::Bfloat16);
  EXPECT_EQ(ar->describe(), "ring over host memory, bfloat16 on the wire");
  EXPECT_EQ(ml::parseAllReduceDtype("bfloat16"), ml::AllReduceDtype::Bfloat16);
  EXPECT_EQ(ml::bytesPerValue(ml::AllReduceDtype::Bfloat16) * 2, ml::bytesPerValue(ml::AllReduceDtype::Float32));
  try {
    ml::parseAllReduceDtype("float16");
    FAIL() << "float16 accepted";
  } catch (const ml::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("allowed: float32"), std::string::npos) << e.what();
  }
}

}  // namespace
