// Writing and reading checkpoint files; see Checkpoint.h for the format.
#include "train/Checkpoint.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "AtomicFile.h"
#include "Error.h"
#include "JsonFile.h"
#include "Limits.h"
#include "nn/Sequential.h"
#include "nn/WeightsFile.h"

namespace ml {

static constexpr char kMagic[8] = {'M', 'L', 'C', 'H', 'K', 'P', 'T', '1'};

static nlohmann::json optional(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }
static std::optional<double> optional(const nlohmann::json& v) {
  return v.is_number() ? std::optional<double>(v.get<double>()) : std::nullopt;
}

static nlohmann::json header(const Checkpoint& c) {
  const TrainPosition& a = c.at;
  nlohmann::json j = {{"run_id", c.runId},
                      {"architecture", c.architecture},
                      {"optimizer", c.optimizer},
                      {"optimizer_iterations", c.optimizerIterations},
                      {"rng", {{"seed", c.seed}, {"shuffle_key", c.shuffleKey}}},
                      {"global_batch", c.globalBatch},
                      {"replicas", c.replicas},
                      {"devices", c.devices},
                      {"position",
                       {{"step", a.step},
                        {"epoch", a.epoch},
                        {"step_in_epoch", a.stepInEpoch},
                        {"wall", a.wall},
                        {"epoch_start", a.epochStart},
                        {"loss_sum", a.lossSum},
                        {"metric_sum", a.metricSum},
                        {"allreduce_seconds", a.arTime},
                        {"wait_seconds", a.waitTime},
                        {"all_seconds", a.allTime},
                        {"samples", a.samples},
                        {"last_val_loss", optional(a.lastValLoss)},
                        {"last_val_metric", optional(a.lastValMetric)},
                        {"best_loss", a.bestLoss},
                        {"since_best", a.sinceBest}}}};
  if (c.lossScale) j["loss_scale"] = {{"scale", *c.lossScale}, {"good_steps", c.lossScaleGoodSteps}};
  return j;
}

// Streams the bytes to the file and into the running checksum.
struct HashedWriter {
  AtomicFile& out;
  uint64_t h = kFnvOffsetBasis;
  void put(const void* p, size_t n) {
    out.write(p, n);
    h = fnv1a(p, n, h);
  }
};

uint64_t saveCheckpoint(const Checkpoint& c, const std::string& path) {
  // A checkpoint of NaN weights could only resume into NaN: refuse it here, naming the layer.
  if (const auto where = nonFiniteParameter(c.architecture, c.params))
    throw UserError("checkpoint '" + path + "' was not written: the weights hold " + *where +
                    " (the run diverged; lower the learning rate)");
  const std::string head = header(c).dump();
  AtomicFile out(path, "checkpoint");
  out.write(kMagic, 8);
  HashedWriter w{out};
  const uint32_t version = kCheckpointVersion, len = static_cast<uint32_t>(head.size());
  w.put(&version, 4);
  w.put(&len, 4);
  w.put(head.data(), head.size());
  const uint64_t count = c.params.size();
  w.put(&count, 8);
  w.put(c.params.data(), count * sizeof(float));
  const uint32_t slots = static_cast<uint32_t>(c.optimizerSlots.size());
  w.put(&slots, 4);
  for (const auto& s : c.optimizerSlots) {
    const uint64_t n = s.size();
    w.put(&n, 8);
    w.put(s.data(), n * sizeof(float));
  }
  const uint64_t sum = w.h;
  out.write(&sum, 8);
  out.commit();
  return sum;
}

namespace {

// Reads and checksums; every size is checked against the bytes the file still has before a
// buffer is allocated for it.
struct HashedReader {
  std::ifstream& in;
  const std::string& path;
  uint64_t left;  // bytes of the file not read yet
  uint64_t h = kFnvOffsetBasis;
  [[noreturn]] void truncated() const {
    throw UserError("checkpoint '" + path + "' is truncated: it cannot be used; an older checkpoint of the run may be");
  }
  void get(void* p, size_t n) {
    if (n > left) truncated();
    in.read(static_cast<char*>(p), static_cast<std::streamsize>(n));
    if (!in) truncated();
    left -= n;
    h = fnv1a(p, n, h);
  }
  std::vector<float> floats(uint64_t n, uint64_t limit) {
    if (n > limit) throw UserError("checkpoint '" + path + "' is damaged (a buffer of " + std::to_string(n) + " values)");
    if (n > left / sizeof(float)) truncated();
    std::vector<float> v(static_cast<size_t>(n));
    get(v.data(), v.size() * sizeof(float));
    return v;
  }
};

void readHeader(Checkpoint& c, const nlohmann::json& j) {
  c.runId = j.at("run_id").get<int64_t>();
  c.architecture = j.at("architecture");
  c.optimizer = j.at("optimizer").get<std::string>();
  c.optimizerIterations = j.at("optimizer_iterations").get<int64_t>();
  c.seed = j.at("rng").at("seed").get<uint64_t>();
  c.shuffleKey = j.at("rng").at("shuffle_key").get<uint64_t>();
  c.globalBatch = j.at("global_batch").get<int64_t>();
  c.replicas = j.at("replicas").get<int>();
  c.devices = j.at("devices").get<std::string>();
  if (const auto ls = j.find("loss_scale"); ls != j.end()) {  // absent in checkpoints of runs without loss scaling
    c.lossScale = ls->at("scale").get<double>();
    c.lossScaleGoodSteps = ls->at("good_steps").get<int64_t>();
    if (!(*c.lossScale >= 1.0) || !std::isfinite(*c.lossScale) || c.lossScaleGoodSteps < 0)
      throw std::invalid_argument("loss scale out of range");
  }
  const auto& p = j.at("position");
  TrainPosition& a = c.at;
  a.step = p.at("step").get<int64_t>();
  a.epoch = p.at("epoch").get<int>();
  a.stepInEpoch = p.at("step_in_epoch").get<int64_t>();
  a.wall = p.at("wall").get<double>();
  a.epochStart = p.at("epoch_start").get<double>();
  a.lossSum = p.at("loss_sum").get<double>();
  a.metricSum = p.at("metric_sum").get<double>();
  a.arTime = p.at("allreduce_seconds").get<double>();
  a.waitTime = p.at("wait_seconds").get<double>();
  a.allTime = p.at("all_seconds").get<double>();
  a.samples = p.at("samples").get<int64_t>();
  a.lastValLoss = optional(p.at("last_val_loss"));
  a.lastValMetric = optional(p.at("last_val_metric"));
  a.bestLoss = p.at("best_loss").get<double>();
  a.sinceBest = p.at("since_best").get<int>();
}

// The header's values against what a run can hold: a file with a valid checksum may still have
// been written by a foreign or broken program, and the trainer must never see a negative batch.
void checkHeaderRanges(const Checkpoint& c, const std::string& path) {
  auto refuse = [&](const std::string& field, const std::string& value, const char* allowed) {
    throw UserError("checkpoint '" + path + "' is damaged (its header says " + field + " " + value + "; " + allowed +
                    "): it cannot be used; an older checkpoint of the run may be");
  };
  const TrainPosition& a = c.at;
  if (c.runId < 1) refuse("run_id", std::to_string(c.runId), "a run id is at least 1");
  if (c.globalBatch < 1 || c.globalBatch > kMaxBatch)
    refuse("global_batch", std::to_string(c.globalBatch), "a global batch is from 1 to 2^31");
  if (c.replicas < 1 || c.replicas > 65536) refuse("replicas", std::to_string(c.replicas), "a run has 1 to 65536 replicas");
  if (c.optimizerIterations < 0) refuse("optimizer_iterations", std::to_string(c.optimizerIterations), "a count is at least 0");
  if (a.step < 0) refuse("position.step", std::to_string(a.step), "a step count is at least 0");
  if (a.epoch < 1) refuse("position.epoch", std::to_string(a.epoch), "epochs count from 1");
  if (a.stepInEpoch < 0 || a.stepInEpoch > a.step)
    refuse("position.step_in_epoch", std::to_string(a.stepInEpoch), "it lies between 0 and the step");
  if (a.samples < 0) refuse("position.samples", std::to_string(a.samples), "a count is at least 0");
  if (a.sinceBest < 0) refuse("position.since_best", std::to_string(a.sinceBest), "a count is at least 0");
  for (double v : {a.wall, a.epochStart, a.arTime, a.waitTime, a.allTime})
    if (!(v >= 0 && std::isfinite(v))) refuse("a time", std::to_string(v), "times are finite and not negative");
  if (!c.architecture.is_object() || !c.architecture.contains("layers"))
    refuse("architecture", "of another shape", "it is the model's architecture as weights files hold it");
}

}  // namespace

Checkpoint loadCheckpoint(const std::string& path) {
  requireRegularFile(path, "checkpoint", "its run's checkpoints are listed by `mirrorlab-cli runs show ID`");
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  std::ifstream in(path, std::ios::binary);
  if (ec || !in) throw UserError("cannot open checkpoint '" + path + "'");
  char magic[8] = {};
  in.read(magic, 8);
  if (!in || std::memcmp(magic, kMagic, 8) != 0) throw UserError("'" + path + "' is not a Mirrorlab checkpoint (bad magic)");
  // The checksum covers everything up to itself: the last 8 bytes are not read through r.
  HashedReader r{in, path, size >= 16 ? size - 16 : 0};
  uint32_t version = 0, len = 0;
  r.get(&version, 4);
  if (version < 1 || version > kCheckpointVersion)
    throw UserError("checkpoint '" + path + "' has format version " + std::to_string(version) +
                    "; this Mirrorlab reads versions 1 to " + std::to_string(kCheckpointVersion));
  if (version == 1) r.h = fnv1a(&version, 4, kFnvLegacyBasis);  // version 1 used the short basis
  r.get(&len, 4);
  if (len > (64u << 20) || len > r.left)
    throw UserError("checkpoint '" + path + "' is damaged (header length " + std::to_string(len) + ")");
  std::string head(len, '\0');
  r.get(head.data(), len);
  Checkpoint c;
  uint64_t count = 0;
  r.get(&count, 8);
  c.params = r.floats(count, uint64_t{1} << 34);
  uint32_t slots = 0;
  r.get(&slots, 4);
  if (slots > 8) throw UserError("checkpoint '" + path + "' is damaged (" + std::to_string(slots) + " optimizer slots)");
  for (uint32_t i = 0; i < slots; ++i) {
    uint64_t n = 0;
    r.get(&n, 8);
    c.optimizerSlots.push_back(r.floats(n, count));
  }
  uint64_t sum = 0;
  in.read(reinterpret_cast<char*>(&sum), 8);
  if (!in || r.left != 0)
    throw UserError("checkpoint '" + path + "' is " + (in ? "damaged (bytes after its checksum)" : "truncated") +
                    ": it cannot be used; an older checkpoint of the run may be");
  if (sum != r.h) throw UserError("checkpoint '" + path + "' is damaged (checksum mismatch): it cannot be used");
  const nlohmann::json j = parseJsonOrDiscarded(head);
  try {
    if (j.is_discarded()) throw std::runtime_error("not JSON");
    readHeader(c, j);
  } catch (const std::exception&) {
    throw UserError("checkpoint '" + path + "' is damaged (its header is not the JSON Mirrorlab writes)");
  }
  checkHeaderRanges(c, path);
  if (const auto where = nonFiniteParameter(c.architecture, c.params))
    throw UserError("checkpoint '" + path + "' holds " + *where +
                    ": its run had diverged when it was written, and resuming would only give NaN; resume from an older "
                    "checkpoint or train again with a lower learning rate");
  for (size_t i = 0; i < c.optimizerSlots.size(); ++i)
    if (const auto where = nonFiniteParameter(c.architecture, c.optimizerSlots[i]))
      throw UserError("checkpoint '" + path + "' holds, in the optimizer's state (slot " + std::to_string(i + 1) + "), " +
                      *where + ": resuming would only give NaN; resume from an older checkpoint or train again");
  return c;
}

std::string checkpointFile(const std::string& folder, int64_t step) {
  char name[40];
  std::snprintf(name, sizeof name, "step-%08lld.mlck", static_cast<long long>(step));
  return folder + "/" + name;
}

}  // namespace ml
