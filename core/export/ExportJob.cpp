// The export job shared by `mirrorlab-cli export` and the studio's export actions.
#include "export/ExportJob.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "Error.h"
#include "data/Dataset.h"
#include "export/WeightsNpz.h"
#include "project/WeightsFile.h"
#include "store/RunStore.h"

namespace fs = std::filesystem;

namespace ml {

namespace {

// What a user of the exported model must feed it: the preparation Mirrorlab applied in training.
std::string inputNote(const DataSpec& d, ExportFormat f) {
  if (d.kind == DataKind::FashionMnist || d.kind == DataKind::Idx)
    return "float32 image pixels divided by 255 (values in [0, 1])";
  if (d.kind == DataKind::Csv && d.standardize && f == ExportFormat::Onnx)
    return "float32 CSV feature columns as they are in the file: the model standardizes them itself (its first two nodes, "
           "the training set's mean and standard deviation)";
  if (d.kind == DataKind::Csv)
    return d.standardize ? "float32 CSV feature columns, standardized with the training set's mean and standard deviation"
                         : "float32 CSV feature columns, as they are in the file";
  return std::string("float32 features as the ") + toString(d.kind) + " generator makes them";
}

}  // namespace

void loadAnyWeights(Sequential& model, const std::string& path) {
  // .npz: the arrays `train --save-weights FILE.npz` writes (and evaluate reads); else .mlw.
  if (path.size() > 4 && path.compare(path.size() - 4, 4, ".npz") == 0)
    loadWeightsNpz(model, path);
  else
    loadWeights(model, path);
}

ExportResult runExport(const ExportRequest& r) {
  checkExportPath(r.format, r.output);  // before any work: a typo in the folder costs nothing
  Sequential model(r.project.model);
  loadAnyWeights(model, r.weights);
  ExportInfo info;
  info.training = r.project.training;
  info.projectName = r.project.name;
  info.runId = r.runId;
  info.weightsFile = fs::path(r.weights).filename().string();
  info.inputNote = inputNote(r.project.data, r.format);
  if (r.format == ExportFormat::Onnx && r.project.data.kind == DataKind::Csv && r.project.data.standardize) {
    // The statistics are the training part's, as loadData computed them for the run: read again.
    std::optional<FeatureStats> stats;
    try {
      stats = loadData(r.project.data).standardization;
    } catch (const UserError& e) {
      throw UserError("the model was trained on standardized columns of '" + r.project.data.path +
                      "', and the ONNX file must hold that standardization to take raw rows, but the file cannot be "
                      "read now: " +
                      e.what() +
                      ". Put it back where it was, or export PyTorch or Keras weights (their "
                      "programs standardize the data themselves)");
    }
    if (stats)
      for (size_t j = 0; j < stats->mean.size(); ++j) {
        info.inputMean.push_back(static_cast<float>(stats->mean[j]));
        info.inputScale.push_back(stats->stddev[j] > 0 ? static_cast<float>(1.0 / stats->stddev[j]) : 0.0f);
      }
  }
  return exportModel(model, r.format, r.output, info);
}

StoredWeights storedWeights(RunStore& store, int64_t run) {
  const RunDetail d = store.loadRun(run);
  const Artifact* newest = nullptr;
  for (const auto& a : d.artifacts)
    if (a.kind == "weights" && (!newest || a.id > newest->id)) newest = &a;
  if (!newest)
    throw UserError("run " + std::to_string(run) +
                    " kept no weights: train with --save-weights FILE (the studio keeps "
                    "every finished run's weights), then export that run");
  std::error_code ec;
  if (!fs::is_regular_file(newest->path, ec))
    throw UserError("run " + std::to_string(run) + "'s weights file '" + newest->path +
                    "' is gone: export from the weights file where it now is (mirrorlab-cli export PROJECT --weights FILE)");
  StoredWeights s;
  s.project = Project::fromJson(nlohmann::json::parse(d.projectJson), "run " + std::to_string(run) + "'s project");
  s.weights = newest->path;
  return s;
}

std::optional<int64_t> runOfWeights(RunStore& store, const std::string& weightsPath) {
  // The same file, however its path was spelled when it was recorded ("./w.mlw", a link...).
  auto q = store.db().prepare("SELECT run_id, path FROM artifacts WHERE kind='weights' ORDER BY id DESC");
  while (q.step()) {
    std::error_code ec;
    if (fs::equivalent(q.getText(1), weightsPath, ec) && !ec) return q.getInt(0);
  }
  return std::nullopt;
}

std::string keptWeightsPath(const std::string& storePath, int64_t run) {
  return (fs::absolute(storePath).parent_path() / "weights" / ("run-" + std::to_string(run) + ".mlw")).string();
}

std::string keepRunWeights(const std::string& storePath, int64_t run, const Sequential& model) {
  const std::string path = keptWeightsPath(storePath, run);
  const fs::path dir = fs::path(path).parent_path();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw UserError("cannot keep run " + std::to_string(run) + "'s weights in '" + dir.string() + "': " + ec.message());
  const uint64_t sum = saveWeights(model, path);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(sum));
  auto store = RunStore::open(storePath);
  store.addArtifact(run, path, "weights", hex, static_cast<int64_t>(fs::file_size(path, ec)));
  return path;
}

void recordExport(RunStore& store, int64_t run, const ExportResult& result, ExportFormat format) {
  std::ifstream in(result.path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(bytes.data(), bytes.size())));
  std::error_code ec;
  const fs::path abs = fs::absolute(result.path, ec);
  store.addArtifact(run, ec ? result.path : abs.lexically_normal().string(), std::string("export:") + toString(format), hex,
                    static_cast<int64_t>(bytes.size()));
}

}  // namespace ml
