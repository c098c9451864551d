// The cross-worker all-reduce against the in-process ring, run by bench/workers/compare.sh as
//   mpirun -np 2 bench_workers_allreduce [REPEATS]
// Each worker sums buffers of 8 B (latency), 64 KiB and the large MLP's gradient (784-512-512-10:
// 669,706 floats, 2.7 MB) through WorkerGroup::allReduce, the call the strategy makes (the MPI
// plugin's MPI_Iallreduce polled against its deadline), REPEATS times after a warm-up; worker 1
// then times the in-process ring (2 threads, learn/CostModel) on the same sizes. Prints one line
// per size with medians and the bus bandwidth, 2(n-1)/n bytes / time, as NCCL reports it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "distribute/MpiWorkers.h"
#include "learn/CostModel.h"

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(3, std::atoi(argv[1])) : 50;
  if (!ml::launchedByMpi()) {
    std::fprintf(stderr, "run me under mpirun: mpirun -np 2 %s [REPEATS]\n", argv[0]);
    return 2;
  }
  try {
    auto group = ml::startMpiWorkers(60);
    const int n = group->size();
    const int64_t sizes[] = {2, 16384, 669706};  // floats
    if (group->rank() == 0)
      std::printf("%-12s %8s %14s %12s %14s %12s %9s\n", "buffer", "workers", "MPI median", "MPI bus", "ring median", "ring bus",
                  "MPI/ring");
    for (int64_t count : sizes) {
      std::vector<float> buf(static_cast<size_t>(count), 1.0f);
      std::vector<double> t;
      for (int i = 0; i < repeats + 3; ++i) {
        const auto a = std::chrono::steady_clock::now();
        group->allReduce(std::span<float>(buf), "the benchmark's all-reduce");
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
        if (i >= 3) t.push_back(s);
      }
      std::sort(t.begin(), t.end());
      const double mpi = t[t.size() / 2];
      const double bytes = static_cast<double>(count) * 4;
      const double moved = 2.0 * (n - 1) / n * bytes;
      if (group->rank() == 0) {
        const auto ring = ml::measureHostAllReduce(n, static_cast<int64_t>(bytes), repeats);
        const double rmoved = 2.0 * (ring.devices - 1) / ring.devices * bytes;
        std::printf("%-12.0f %8d %11.1f us %8.2f GB/s %11.1f us %8.2f GB/s %8.2fx\n", bytes, n, mpi * 1e6, moved / mpi / 1e9,
                    ring.seconds * 1e6, rmoved / ring.seconds / 1e9, mpi / ring.seconds);
        std::fflush(stdout);
      }
      double one = 1;  // the others wait here while worker 1 times the ring
      group->allReduce(std::span<double>(&one, 1), "the benchmark's barrier");
    }
    group->finish();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
