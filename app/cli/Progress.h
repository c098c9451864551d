// Keras-style terminal progress: a live bar per epoch on a terminal (redrawn at most 10 times a
// second), one line per epoch otherwise, plus the mirrored-training figures (sync overhead).
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "telemetry/Events.h"

namespace mlcli {

class Progress {
 public:
  Progress(FILE* out, bool quiet, std::string metricName);
  void onEvent(const ml::Event& e);
  int replicas() const { return replicas_; }

 private:
  void drawBar(const ml::StepEvent& s, bool final);
  FILE* out_;
  bool quiet_, tty_;
  std::string metric_;
  int replicas_ = 1;
  int epochs_ = 0;
  double epochStartWall_ = 0, lastDraw_ = -1;
  double lossSum_ = 0, metricSum_ = 0;
  int64_t samples_ = 0;
  int64_t skipped_ = 0;  // loss-scaled steps skipped this epoch
  ml::StepEvent last_;
  bool barOpen_ = false;
};

}  // namespace mlcli
