// Several workers in one process for the tests: thread workers (distribute/ThreadWorkers.h)
// standing in for mpirun's processes, each running the same function.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "distribute/ThreadWorkers.h"
#include "distribute/Workers.h"

namespace mltest {

// Runs fn(rank, group) on W threads, one per worker; returns what each returned.
template <typename R>
std::vector<R> onWorkers(int W, double timeout, const std::function<R(int, ml::WorkerGroup&)>& fn) {
  auto groups = ml::makeThreadWorkers(W, timeout);
  std::vector<R> out(static_cast<size_t>(W));
  std::vector<std::string> errors(static_cast<size_t>(W));
  std::vector<std::thread> threads;
  for (int w = 0; w < W; ++w)
    threads.emplace_back([&, w] {
      try {
        out[static_cast<size_t>(w)] = fn(w, *groups[static_cast<size_t>(w)]);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(w)] = e.what();
        groups[static_cast<size_t>(w)]->interrupt(e.what());
      }
    });
  for (auto& t : threads) t.join();
  for (int w = 0; w < W; ++w) EXPECT_EQ(errors[static_cast<size_t>(w)], "") << "worker " << w;
  return out;
}

}  // namespace mltest
