// Checkpoints with a valid checksum but contents no run can have: NaN or infinite weights and
// optimizer state (refused when written and when read, naming the layer), header values such as
// global_batch -7, a buffer size past the end of the file (refused before allocating). The
// checksum is standard FNV-1a 64 from version 2 on; version 1 files (the old basis) still load.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "Error.h"
#include "nn/Sequential.h"
#include "train/Checkpoint.h"

namespace {

namespace fs = std::filesystem;

uint64_t referenceFnv1a(const std::string& bytes, uint64_t h = 0xcbf29ce484222325ull) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

class CheckpointChecks : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mirrorlab_ckchecks_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    c_.runId = 4;
    c_.architecture = {{"input_shape", {2}},
                       {"layers",
                        {{{"type", "Dense"}, {"name", "dense"}, {"output_shape", {3}}, {"params", 9}},
                         {{"type", "Dense"}, {"name", "out"}, {"output_shape", {2}}, {"params", 8}}}}};
    c_.optimizer = "adam";
    c_.globalBatch = 32;
    c_.replicas = 2;
    c_.devices = "cpu:2";
    c_.at.step = 12;
    c_.at.epoch = 2;
    c_.at.stepInEpoch = 2;
    c_.params.assign(17, 0.5f);
    c_.optimizerSlots = {std::vector<float>(17, 0.0f), std::vector<float>(17, 1e-3f)};
    c_.optimizerIterations = 12;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  static std::string readAll(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  // Rewrites the checksum over bytes [8, size - 8) as a program that means it would.
  static void writeSigned(const std::string& p, std::string bytes, uint64_t basis = 0xcbf29ce484222325ull) {
    const uint64_t sum = referenceFnv1a(bytes.substr(8, bytes.size() - 16), basis);
    std::memcpy(bytes.data() + bytes.size() - 8, &sum, 8);
    std::ofstream(p, std::ios::binary) << bytes;
  }
  static std::string loadError(const std::string& p) {
    try {
      (void)ml::loadCheckpoint(p);
    } catch (const ml::UserError& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
  ml::Checkpoint c_;
};

TEST_F(CheckpointChecks, TheChecksumIsStandardAndVersionOneStillLoads) {
  const uint64_t sum = ml::saveCheckpoint(c_, path("a.mlck"));
  std::string bytes = readAll(path("a.mlck"));
  EXPECT_EQ(sum, referenceFnv1a(bytes.substr(8, bytes.size() - 16)));
  uint32_t version = 0;
  std::memcpy(&version, bytes.data() + 8, 4);
  EXPECT_EQ(version, ml::kCheckpointVersion);
  // The same file as version 1 wrote it: its version field and the old basis.
  const uint32_t one = 1;
  std::memcpy(bytes.data() + 8, &one, 4);
  writeSigned(path("v1.mlck"), bytes, 1469598103934665603ull);
  const ml::Checkpoint back = ml::loadCheckpoint(path("v1.mlck"));
  EXPECT_EQ(back.params, c_.params);
  EXPECT_EQ(back.optimizerSlots, c_.optimizerSlots);
  writeSigned(path("v1-new-basis.mlck"), bytes);
  EXPECT_NE(loadError(path("v1-new-basis.mlck")).find("checksum mismatch"), std::string::npos);
}

TEST_F(CheckpointChecks, ImpossibleHeaderValuesAreRefusedDespiteAValidChecksum) {
  struct Case {
    const char* field;
    std::function<void(ml::Checkpoint&)> set;
    const char* words;
  };
  const std::vector<Case> cases = {
      {"global_batch", [](ml::Checkpoint& c) { c.globalBatch = -7; }, "its header says global_batch -7"},
      {"global_batch 0", [](ml::Checkpoint& c) { c.globalBatch = 0; }, "its header says global_batch 0"},
      {"replicas", [](ml::Checkpoint& c) { c.replicas = -1; }, "its header says replicas -1"},
      {"run_id", [](ml::Checkpoint& c) { c.runId = 0; }, "its header says run_id 0"},
      {"step", [](ml::Checkpoint& c) { c.at.step = -3; }, "its header says position.step -3"},
      {"epoch", [](ml::Checkpoint& c) { c.at.epoch = 0; }, "its header says position.epoch 0"},
      {"step_in_epoch", [](ml::Checkpoint& c) { c.at.stepInEpoch = 40; }, "position.step_in_epoch 40"},
      {"wall", [](ml::Checkpoint& c) { c.at.wall = -1; }, "times are finite and not negative"},
  };
  for (const auto& k : cases) {
    ml::Checkpoint c = c_;
    k.set(c);
    ml::saveCheckpoint(c, path("h.mlck"));  // the writer does not judge positions; the reader must
    const std::string msg = loadError(path("h.mlck"));
    EXPECT_NE(msg.find(k.words), std::string::npos) << k.field << ": " << msg;
    EXPECT_NE(msg.find("is damaged"), std::string::npos) << msg;
  }
}

TEST_F(CheckpointChecks, NanWeightsOrStateAreRefusedNamingTheLayer) {
  // Written: refused, nothing left at the path.
  ml::Checkpoint c = c_;
  c.params[11] = std::numeric_limits<float>::quiet_NaN();
  try {
    ml::saveCheckpoint(c, path("nan.mlck"));
    FAIL() << "a NaN checkpoint was written";
  } catch (const ml::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("was not written: the weights hold NaN in layer 2 'out' (Dense), value 3 of its 8"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(path("nan.mlck")));
  // Read: a file another program wrote with NaN and a valid checksum.
  ml::saveCheckpoint(c_, path("good.mlck"));
  const std::string good = readAll(path("good.mlck"));
  uint32_t len = 0;
  std::memcpy(&len, good.data() + 12, 4);
  const size_t params = 8 + 4 + 4 + len + 8;
  std::string bytes = good;
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::memcpy(bytes.data() + params + 4 * 2, &nan, 4);
  writeSigned(path("nan.mlck"), bytes);
  std::string msg = loadError(path("nan.mlck"));
  EXPECT_NE(msg.find("checkpoint '" + path("nan.mlck") + "' holds NaN in layer 1 'dense' (Dense), value 3 of its 9"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("resuming would only give NaN"), std::string::npos) << msg;
  // The optimizer's second slot: after the parameters, the slot count, the first slot and its size.
  bytes = good;
  const size_t slot2 = params + 17 * 4 + 4 + 8 + 17 * 4 + 8;
  std::memcpy(bytes.data() + slot2 + 4 * 16, &inf, 4);
  writeSigned(path("slot.mlck"), bytes);
  msg = loadError(path("slot.mlck"));
  EXPECT_NE(msg.find("in the optimizer's state (slot 2), +inf in layer 2 'out' (Dense), value 8 of its 8"), std::string::npos)
      << msg;
}

TEST_F(CheckpointChecks, SizesPastTheEndAreRefusedBeforeAllocating) {
  ml::saveCheckpoint(c_, path("good.mlck"));
  const std::string good = readAll(path("good.mlck"));
  uint32_t len = 0;
  std::memcpy(&len, good.data() + 12, 4);
  // 2^33 parameters (32 GiB) claimed by a small file: "truncated", and nothing of that size allocated.
  std::string bytes = good;
  const uint64_t huge = uint64_t{1} << 33;
  std::memcpy(bytes.data() + 16 + len, &huge, 8);
  writeSigned(path("count.mlck"), bytes);
  EXPECT_NE(loadError(path("count.mlck")).find("is truncated"), std::string::npos) << loadError(path("count.mlck"));
  // A header length past the end.
  bytes = good;
  const uint32_t long_ = 1u << 25;
  std::memcpy(bytes.data() + 12, &long_, 4);
  writeSigned(path("len.mlck"), bytes);
  EXPECT_NE(loadError(path("len.mlck")).find("damaged (header length 33554432)"), std::string::npos);
  // Bytes after the checksum.
  std::ofstream(path("long.mlck"), std::ios::binary) << good << "x";
  EXPECT_NE(loadError(path("long.mlck")).find("is damaged"), std::string::npos);
}

}  // namespace
