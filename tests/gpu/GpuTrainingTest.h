// The training tests' fixture (test_gpu_training*.cpp): the machine's GPUs as the probe reports
// them, and a test base that skips, with the probe's reason, where there is no usable GPU
// (MIRRORLAB_REQUIRE_GPU=1, which tests/gpu/run.sh sets, turns the skip into a failure).
#pragma once
#include <gtest/gtest.h>
#include "GpuTestUtil.h"

#include <cstdlib>
#include <string>

#include "backend/DeviceProbe.h"

namespace mlgputest {

inline const ml::DeviceReport& report() {
  static const ml::DeviceReport r = ml::probeDevices();
  return r;
}

class NeedsGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!report().gpus.empty()) return;
    const char* require = std::getenv("MIRRORLAB_REQUIRE_GPU");
    if (require && std::string(require) == "1") FAIL() << "no usable GPU (MIRRORLAB_REQUIRE_GPU=1): " << report().noGpuReason;
    GTEST_SKIP() << report().noGpuReason;
  }
};

}  // namespace mlgputest
