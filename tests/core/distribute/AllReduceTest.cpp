// Both all-reduce algorithms against a serial reference sum, with 1..8 participants.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <thread>

#include "distribute/AllReduce.h"
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
  auto ar = ml::makeAllReduce(algo, n);
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
  auto ar = ml::makeAllReduce(GetParam(), n);
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

TEST(AllReduce, UnknownNameIsAUserError) { EXPECT_ANY_THROW(ml::makeAllReduce("tree", 2)); }

}  // namespace
