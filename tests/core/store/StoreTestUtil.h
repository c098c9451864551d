// Helpers for the run store tests: a temporary folder, file bytes, and realistic events.
#pragma once
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "telemetry/Events.h"

namespace storetest {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "mlstore-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline std::string readBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

inline void writeBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string configJson(const std::string& devices, int replicas, double lr) {
  nlohmann::json c = {{"devices", devices},
                      {"device_names", std::vector<std::string>(replicas, "cpu (simulated)")},
                      {"replicas", replicas},
                      {"global_batch", 256},
                      {"per_replica_batch", 256 / replicas},
                      {"base_lr", 0.001},
                      {"lr", lr},
                      {"lr_scaling", "linear"},
                      {"warmup_epochs", 0.5},
                      {"optimizer", {{"name", "adam"}, {"beta1", 0.9}, {"beta2", 0.999}}},
                      {"accumulate", 1},
                      {"allreduce", "ring"},
                      {"bucket_bytes", 1048576},
                      {"seed", 42},
                      {"epochs", 3},
                      {"threads_per_device", 1},
                      {"loss", "sparse_categorical_crossentropy"},
                      {"dataset", "spirals"}};
  return c.dump();
}

inline ml::RunStarted makeStarted(const std::string& name, int replicas = 4) {
  ml::RunStarted s;
  s.runName = name;
  s.projectJson = R"({"name":")" + name + R"(","model":{"layers":[{"type":"Dense","units":16}]}})";
  s.configJson = configJson("cpu:" + std::to_string(replicas), replicas, 0.001 * replicas);
  for (int r = 0; r < replicas; ++r) s.devices.push_back("cpu:" + std::to_string(r) + " (simulated)");
  s.replicas = replicas;
  s.globalBatch = 256;
  s.perReplicaBatch = (256 + replicas - 1) / replicas;
  s.baseLr = 0.001;
  s.lr = 0.001 * replicas;
  s.epochs = 3;
  s.stepsPerEpoch = 10;
  s.totalSteps = 30;
  s.description = "4 replicas x 64 = 256 per step";
  return s;
}

// Values that differ per field so that a swapped column shows up.
inline ml::StepEvent makeStep(int64_t step, int replicas, int64_t stepsPerEpoch = 10) {
  ml::StepEvent e;
  e.step = step;
  e.epoch = static_cast<int>((step - 1) / stepsPerEpoch + 1);
  e.stepInEpoch = (step - 1) % stepsPerEpoch + 1;
  e.stepsPerEpoch = stepsPerEpoch;
  e.loss = 2.3 / (1.0 + 0.01 * step) + 1e-9 * step;
  e.metric = 0.1 + 0.8 * step / (step + 50.0);
  e.lr = 0.004 * std::min(1.0, step / 5.0);
  e.samples = 256;
  e.stepTime = 0.0123 + 1e-5 * step;
  e.wallTime = 0.5 + 0.0125 * step;
  for (int r = 0; r < replicas; ++r) {
    ml::ReplicaStep rs;
    rs.replica = r;
    rs.samples = 64 + (r == 0 ? 1 : 0);
    rs.start = e.wallTime - e.stepTime + 1e-6 * r;
    rs.phases = {0.002 + 1e-6 * r, 0.004 + 2e-6 * r, 0.0011 + 3e-6 * static_cast<double>(step % 7),
                 0.0005 * r,       0.0003,           0.0002 * static_cast<double>(step % 2)};
    rs.phases.input = 0.00015 + 1e-6 * r;
    e.replicas.push_back(rs);
  }
  return e;
}

inline ml::EpochEvent makeEpoch(int epoch, int replicas, bool withVal = true) {
  ml::EpochEvent e;
  e.epoch = epoch;
  e.trainLoss = 1.5 / epoch;
  e.trainMetric = 0.5 + 0.1 * epoch;
  if (withVal) {
    e.valLoss = 1.6 / epoch;
    e.valMetric = 0.45 + 0.15 * epoch;
  }
  e.seconds = 1.25 + 0.01 * epoch;
  e.samplesPerSec = 2048.5 + epoch;
  e.allreduceShare = 0.12;
  e.waitShare = 0.034;
  for (int r = 0; r < replicas; ++r) e.checksums.push_back(0xfedcba9876543210ull + epoch);
  e.inSync = epoch != 2;
  e.wallTime = 1.4 * epoch;
  return e;
}

}  // namespace storetest
