// The fuzz targets; see FuzzTargets.h. Readers that take a path get the bytes through a file in
// a private temporary folder (tmpfs when there is one).
#include "FuzzTargets.h"

#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <stdexcept>

#include "Error.h"
#include "JsonFile.h"
#include "data/Csv.h"
#include "data/Features.h"
#include "data/Idx.h"
#include "export/NpzFile.h"
#include "export/WeightsNpz.h"
#include "learn/Lesson.h"
#include "learn/LessonRunner.h"
#include "nn/Sequential.h"
#include "nn/Summary.h"
#include "project/Project.h"
#include "project/ScreenWords.h"
#include "project/WeightsFile.h"
#include "store/RunCompare.h"
#include "store/RunStore.h"
#include "store/Sqlite.h"
#include "telemetry/Events.h"
#include "train/Checkpoint.h"

#ifndef MIRRORLAB_SOURCE_DIR
#define MIRRORLAB_SOURCE_DIR "."
#endif

namespace mlfuzz {
namespace fs = std::filesystem;
namespace {

std::string& workDir() {
  static std::string dir;
  return dir;
}

std::string writeTemp(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = workDir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out) std::abort();  // the harness itself failed, not the code under test
  return path;
}

// Runs f; a UserError is an expected refusal and returns its message; anything else escapes.
template <class F>
std::string guarded(F&& f) {
  try {
    f();
    return "";
  } catch (const ml::UserError& e) {
    return e.what();
  }
}

std::string project(const uint8_t* data, size_t size) {
  return guarded([&] {
    const std::string text(reinterpret_cast<const char*>(data), size);
    const ml::Project p = ml::Project::fromJson(ml::parseJsonText(text, "fuzz.json", "fix it"), "fuzz.json");
    // The model as `summary` builds it: layer arguments, shapes, parameter memory.
    ml::Sequential model(p.model);
    (void)ml::formatSummary(model, p.name, p.training.batchSize, ml::optimizerSlotCount(p.training.optimizer));
    (void)p.toJson().dump();
  });
}

// First byte: where to cut the input into an images and a labels file.
std::string idx(const uint8_t* data, size_t size) {
  const size_t cut = size == 0 ? 0 : std::min<size_t>(size - 1, data[0] * size / 256 + 1);
  const std::string images = writeTemp("images.idx", data + (size ? 1 : 0), cut > 0 ? cut - 1 : 0);
  const std::string labels = writeTemp("labels.idx", data + cut, size - cut);
  std::string msg = guarded([&] { (void)ml::readIdxPair(images, labels, "fuzz"); });
  msg += guarded([&] { (void)ml::readFeatures(images); });  // predict's reader
  return msg;
}

std::string csv(const uint8_t* data, size_t size) {
  const std::string path = writeTemp("data.csv", data, size);
  std::string msg = guarded([&] {
    ml::Dataset d = ml::readCsv(path, "label", false, true);
    if (ml::looksLikeClassLabels(d.y)) ml::makeClassification(d);
  });
  msg += guarded([&] { (void)ml::readFeatures(path); });
  return msg;
}

ml::Sequential& weightsModel() {
  static ml::Sequential model([] {
    ml::ModelSpec spec;
    spec.inputShape = {2};
    spec.layers = {{"", ml::DenseSpec{.units = 4, .activation = ml::Act::Relu}},
                   {"", ml::DenseSpec{.units = 3, .activation = ml::Act::Softmax}}};
    return spec;
  }());
  return model;
}

// A fixed small model, as `evaluate --weights` loads into it.
std::string weights(const uint8_t* data, size_t size) {
  ml::Sequential& model = weightsModel();
  const std::string path = writeTemp("weights.mlw", data, size);
  return guarded([&] { ml::loadWeights(model, path); });
}

// An .npz archive as `evaluate --weights FILE.npz` loads it into the small model, and the same
// bytes as one .npy array: the archive's CRC-32 keeps mutations of an entry from reaching the
// .npy parser, so the parser is fed directly too.
std::string npz(const uint8_t* data, size_t size) {
  const std::string path = writeTemp("weights.npz", data, size);
  std::string msg = guarded([&] { ml::loadWeightsNpz(weightsModel(), path); });
  msg += guarded([&] { (void)ml::readNpy(std::string(reinterpret_cast<const char*>(data), size), "fuzz", "array 'fuzz'"); });
  return msg;
}

// A checkpoint as `train --resume` reads it (its checksum keeps most mutations from the header
// parser; the sizes it reads before the checksum are what this target exercises).
std::string checkpoint(const uint8_t* data, size_t size) {
  const std::string path = writeTemp("step.mlck", data, size);
  return guarded([&] { (void)ml::loadCheckpoint(path); });
}

std::string lesson(const uint8_t* data, size_t size) {
  return guarded([&] {
    const std::string text(reinterpret_cast<const char*>(data), size);
    const ml::Lesson l = ml::parseLesson(ml::parseJsonText(text, "fuzz-lesson.json", "fix it"), "fuzz-lesson.json",
                                         std::string(MIRRORLAB_SOURCE_DIR) + "/projects");
    (void)ml::fillPlaceholders(l.reveal, {{"params", {1.0, "1"}}});
  });
}

// The store as `runs list`, `runs show` and `runs compare` read it.
std::string store(const uint8_t* data, size_t size) {
  const std::string path = workDir() + "/store.sqlite";
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::remove((path + suffix).c_str());
  writeTemp("store.sqlite", data, size);
  try {
    return guarded([&] {
      ml::RunStore s = ml::RunStore::open(path);
      std::vector<std::string> configs;
      for (const auto& r : s.listRuns()) {
        const ml::RunDetail d = s.loadRun(r.id);
        (void)ml::flattenJson(ml::parseJsonOrDiscarded(d.configJson));
        configs.push_back(d.configJson);
        (void)ml::reachTarget(s, d, 0.5);
        if (configs.size() >= 4) break;
      }
      (void)ml::configDiff(configs);
    });
  } catch (const ml::sql::Error& e) {
    return e.what();  // a query on a damaged page: an error naming the file, not a crash
  }
}

}  // namespace

const std::vector<NamedTarget>& targets() {
  static const std::vector<NamedTarget> all = {{"project", project}, {"idx", idx},    {"csv", csv},
                                               {"weights", weights}, {"npz", npz},    {"checkpoint", checkpoint},
                                               {"lesson", lesson},   {"store", store}};
  return all;
}

const NamedTarget* findTarget(const std::string& name) {
  for (const auto& t : targets())
    if (name == t.name) return &t;
  return nullptr;
}

namespace {

std::string readBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void writeBytes(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string be32(uint32_t v) {
  return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

std::string gzipped(const std::string& bytes) {
  const std::string path = workDir() + "/seed.gz";
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
  return readBytes(path);
}

// The idx target's framing: one byte saying where the images end, images, labels.
std::string idxInput(const std::string& images, const std::string& labels) {
  const size_t size = 1 + images.size() + labels.size();
  for (int b = 0; b < 256; ++b)
    if (std::min<size_t>(size - 1, static_cast<size_t>(b) * size / 256 + 1) == images.size() + 1)
      return std::string(1, static_cast<char>(b)) + images + labels;
  return std::string(1, '\x80') + images + labels;
}

// A store with one short recorded run, in 512-byte pages so that the seed stays small.
std::string storeSeed() {
  const std::string path = workDir() + "/seed.sqlite";
  std::remove(path.c_str());
  {
    ml::sql::Db db = ml::sql::Db::open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    db.exec("PRAGMA page_size=512; CREATE TABLE t(x); DROP TABLE t;");
  }
  {
    ml::RunStore s = ml::RunStore::open(path);
    ml::RunStarted st;
    st.runName = "seed";
    st.projectJson = R"({"name": "seed"})";
    st.configJson = R"({"devices": "cpu:2", "loss": "sparse_categorical_crossentropy", "lr": 0.01})";
    st.devices = {"cpu:0 (simulated)", "cpu:1 (simulated)"};
    st.replicas = 2;
    st.epochs = 1;
    st.stepsPerEpoch = st.totalSteps = 3;
    const int64_t id = s.createRun(st, nlohmann::json{{"host", "seed"}});
    std::vector<ml::StepEvent> steps(3);
    for (int i = 0; i < 3; ++i) {
      steps[i].step = i + 1;
      steps[i].epoch = 1;
      steps[i].loss = 1.0 / (i + 1);
      steps[i].replicas = {{0, 4, {}, 0.1 * i}, {1, 4, {}, 0.1 * i}};
    }
    s.appendSteps(id, steps);
    ml::EpochEvent ep;
    ep.epoch = 1;
    ep.valMetric = 0.6;
    ep.checksums = {1, 1};
    s.appendEpochs(id, std::span<const ml::EpochEvent>(&ep, 1));
    ml::RunFinished f;
    f.status = ml::RunStatus::Finished;
    f.steps = 3;
    s.finishRun(id, f);
  }
  return readBytes(path);
}

}  // namespace

void writeSeeds(const std::string& dirName) {
  initialize();
  const fs::path dir(dirName);
  writeBytes(dir / "project" / "minimal.json",
             R"({"model": {"input_shape": [2], "layers": [{"type": "Dense", "units": 3, "activation": "softmax"}]}})");
  const std::string images =
      be32(0x803) + be32(3) + be32(2) + be32(2) + std::string("\x00\x40\x80\xff\x01\x02\x03\x04\x10\x20\x30\x40", 12);
  const std::string labels = be32(0x801) + be32(3) + std::string("\x00\x01\x02", 3);
  writeBytes(dir / "idx" / "raw.bin", idxInput(images, labels));
  writeBytes(dir / "idx" / "gzip.bin", idxInput(gzipped(images), gzipped(labels)));
  writeBytes(dir / "csv" / "classes.csv", "label,a,b\n0,0.5,1\n1,-2,3e2\n2,\"4\",5\n");
  writeBytes(dir / "csv" / "features.csv", "0.1,0.2\n-0.5,0.3\n");
  const std::string w = workDir() + "/seed.mlw";
  ml::saveWeights(weightsModel(), w);
  writeBytes(dir / "weights" / "model.mlw", readBytes(w));
  const std::string z = workDir() + "/seed.npz";
  ml::saveWeightsNpz(weightsModel(), z);
  writeBytes(dir / "npz" / "deflated.npz", readBytes(z));
  ml::writeNpz(z, ml::weightArrays(weightsModel()), ml::NpzCompression::Stored);
  writeBytes(dir / "npz" / "stored.npz", readBytes(z));
  const std::vector<float> values = {0.5f, -1.0f, 2.0f, 0.0f, 1e-3f, 3.0f};
  writeBytes(dir / "npz" / "array.npy", ml::npyBytes({2, 3}, values));
  ml::Checkpoint c;
  c.runId = 1;
  c.architecture = ml::architectureJson(weightsModel());
  c.optimizer = "adam";
  c.globalBatch = 8;
  c.replicas = 2;
  c.devices = "cpu:2";
  c.params.assign(weightsModel().params().begin(), weightsModel().params().end());
  c.optimizerSlots = {c.params, c.params};
  const std::string ck = workDir() + "/seed.mlck";
  ml::saveCheckpoint(c, ck);
  writeBytes(dir / "checkpoint" / "step.mlck", readBytes(ck));
  writeBytes(dir / "lesson" / "minimal.json",
             R"({"id": "seed", "title": "Seed", "idea": "An idea.", "project": "spirals.json",
                 "experiments": [{"label": "one", "devices": "cpu:1", "steps": 5}],
                 "question": {"text": "Q?", "choices": ["a", "b"], "correct": 0}, "reveal": "{final_acc_one}"})");
  writeBytes(dir / "store" / "one-run.sqlite", storeSeed());
}

void initialize() {
  if (!workDir().empty()) return;
  // Plans above this are refused with a message before anything is allocated; libFuzzer's own
  // limit (2 GiB) would otherwise report them as out-of-memory crashes.
  ::setenv("MIRRORLAB_MEMORY_LIMIT_MB", "512", 0);
  // The refusals read as the CLI prints them (the corpus' .expect files hold those words).
  ml::setFieldWords(&ml::screenWords());
  const std::string base = fs::is_directory("/dev/shm") ? "/dev/shm" : fs::temp_directory_path().string();
  std::string templ = base + "/mirrorlab-fuzz-XXXXXX";
  if (!::mkdtemp(templ.data())) std::abort();
  workDir() = templ;
  std::atexit([] {
    std::error_code ec;
    fs::remove_all(workDir(), ec);
  });
}

}  // namespace mlfuzz
