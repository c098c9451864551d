// How many threads one replica's step is worth: a team (nn/ThreadTeam.h) hands work to its other
// threads and waits for them several times a step, which costs more than it saves when the step is
// small (a wine-like MLP: 9.8 us a step on a 2-thread team against 8.3 us on one, and it once took 3-5 ms).
#pragma once
#include <cstdint>
#include <string>

#include "nn/Specs.h"

namespace ml {

class Sequential;

// Multiply-adds of one sample's forward pass: Dense in x units (+ its bias), Conv2D its window
// over the output, every other layer one per output value.
double forwardMacsPerSample(const Sequential& model);

// Below this many forward multiply-adds per step (forwardMacsPerSample x the replica's rows) a
// team is slower than one thread: measured with bench_step's BM_TeamCrossover (bench/RESULTS.md).
inline constexpr double kTeamCrossoverMacs = 1.6e7;

// True when a replica's step of `rows` samples is too small to split across threads.
bool stepTooSmallToSplit(const Sequential& model, int64_t rows);

// The threads of a single CPU replica whose project leaves them to Mirrorlab (threads_per_device
// 0): 0 (every core, the strategy's default) or 1 for a step too small to split; why says so in
// words for the run's description (empty for 0). A model that does not build gets 0: the
// strategy names its error.
struct TeamChoice {
  int threads = 0;
  std::string why;
};
TeamChoice chooseTeam(const ModelSpec& model, int64_t rows);

}  // namespace ml
