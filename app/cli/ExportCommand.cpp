// `export`: a trained model in another program's format (ONNX, PyTorch .npz, Keras .keras or
// .weights.h5), from a project and its weights file (.mlw or .npz), or from a stored run's weights
// (--run ID). The format is --format's, else the output's ending's.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "Commands.h"
#include "Error.h"
#include "Format.h"
#include "export/ExportJob.h"
#include "store/RunStore.h"

namespace mlcli {

namespace {

struct ExportArgs {
  std::string project, weights, format, output, db;
  int64_t run = 0;
};

std::string storePath(const ExportArgs& a) { return a.db.empty() ? ml::defaultStorePath() : a.db; }

ml::ExportFormat chooseFormat(const ExportArgs& a) {
  if (!a.format.empty()) return ml::resolveFormat(ml::parseExportFormat(a.format), a.output);
  if (const auto f = ml::formatOfPath(a.output)) return *f;
  throw ml::UserError(
      "export: pass --format onnx|torch|keras|keras-weights, or name the output '*.onnx', '*.npz', "
      "'*.keras' or '*.weights.h5' (got '" +
      a.output + "')");
}

int runExportCommand(const ExportArgs& a) {
  const ml::ExportFormat format = chooseFormat(a);
  ml::checkExportPath(format, a.output);  // before anything is read
  ml::ExportRequest r;
  r.format = format;
  r.output = a.output;
  std::optional<ml::RunStore> store;
  if (a.project.empty()) {
    if (a.run <= 0) throw ml::UserError("export needs a project and --weights FILE, or --run ID of a stored run");
    store.emplace(ml::RunStore::open(storePath(a)));
    ml::StoredWeights s = ml::storedWeights(*store, a.run);
    r.project = std::move(s.project);
    r.weights = s.weights;
    r.runId = a.run;
  } else {
    if (a.weights.empty()) throw ml::UserError("export " + a.project + ": pass --weights FILE (saved by train --save-weights)");
    r.project = ml::Project::load(a.project);
    r.weights = a.weights;
    if (a.run > 0) r.runId = a.run;
    // Which run made these weights, when the store knows (never creates a store just to ask).
    std::error_code ec;
    if (std::filesystem::exists(storePath(a), ec)) {
      try {
        store.emplace(ml::RunStore::open(storePath(a)));
        if (!r.runId) r.runId = ml::runOfWeights(*store, a.weights);
      } catch (const ml::UserError& e) {
        std::fprintf(stderr, "note: the run store was not read (%s); the export names no run\n", e.what());
      }
    }
  }
  const ml::ExportResult res = ml::runExport(r);
  std::printf("exported %s (project \"%s\") to %s: %s, %s bytes\n",
              r.runId ? ("run " + std::to_string(*r.runId) + "'s weights").c_str() : ("weights " + r.weights).c_str(),
              r.project.name.c_str(), res.path.c_str(), res.description.c_str(), std::to_string(res.bytes).c_str());
  if (r.runId && store) {
    try {
      ml::recordExport(*store, *r.runId, res, format);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "warning: the export was not recorded with run %lld: %s\n", static_cast<long long>(*r.runId),
                   e.what());
    }
  }
  return 0;
}

}  // namespace

void addExportCommand(CLI::App& app, int& exitCode) {
  auto a = std::make_shared<ExportArgs>();
  auto* c = app.add_subcommand(
      "export",
      "Export a trained model as ONNX, PyTorch weights (.npz), a Keras 3 model (.keras) or Keras weights (.weights.h5)");
  c->add_option("project", a->project, "Project file (JSON); leave out with --run to use the run's own project");
  c->add_option("--weights", a->weights, "Weights file saved by train --save-weights (.mlw or .npz)");
  c->add_option("--format", a->format,
                "onnx | torch | keras | keras-weights (default: by the output's ending; keras to a .weights.h5 file writes "
                "the weights alone)");
  c->add_option("--output", a->output, "File to write (.onnx, .npz, .keras, .weights.h5)")->required();
  c->add_option("--run", a->run, "A stored run: its weights and project (alone), or the run id to write into the file");
  c->add_option("--db", a->db, "Run store (default: $MIRRORLAB_DB, else ~/.local/share/mirrorlab/runs.sqlite)");
  c->callback([a, &exitCode] { exitCode = guarded([&] { return runExportCommand(*a); }); });
}

}  // namespace mlcli
