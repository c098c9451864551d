#include <gtest/gtest.h>

#include "Error.h"
#include "backend/DeviceList.h"

TEST(DeviceList, ParsesCpuGpuAndLogical) {
  auto c = ml::parseDevices("cpu:4");
  EXPECT_EQ(c.size(), 4);
  EXPECT_EQ(c.describe(), "4 replicas on cpu:0..3, simulated");
  auto g = ml::parseDevices("gpu:0,1");
  EXPECT_EQ(g.size(), 2);
  EXPECT_EQ(g.devices[1].index, 1);
  auto l = ml::parseDevices("gpu:0x4");
  EXPECT_EQ(l.size(), 4);
  EXPECT_TRUE(l.logical);
  EXPECT_EQ(l.devices[3].physical, 0);
  // Logical GPUs are named physical/logical, every one of them; a single GPU by its own number.
  EXPECT_EQ(l.devices[0].label(), "gpu:0/0");
  EXPECT_EQ(l.devices[3].label(), "gpu:0/3");
  EXPECT_EQ(l.describe(), "4 replicas on gpu:0/0,gpu:0/1,gpu:0/2,gpu:0/3 (logical GPUs sharing GPU 0)");
  EXPECT_EQ(ml::parseDevices("gpu:1x2").devices[1].label(), "gpu:1/1");
  EXPECT_EQ(ml::parseDevices("gpu:1x1").devices[0].label(), "gpu:1");
  EXPECT_EQ(g.devices[1].label(), "gpu:1");
  auto s = ml::parseDeviceSweep("cpu:1,2,4");
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[2].size(), 4);
}

TEST(DeviceList, RejectsBadSpecsWithTheSyntax) {
  for (const char* bad : {"cpu", "cpu:0", "cpu:x", "tpu:1", "gpu:0,0", "cpu:65"}) {
    try {
      ml::parseDevices(bad);
      FAIL() << bad << " was accepted";
    } catch (const ml::UserError& e) {
      EXPECT_NE(std::string(e.what()).find("cpu:N"), std::string::npos) << e.what();
    }
  }
}
