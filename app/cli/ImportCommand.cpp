// `import`: a Keras 3 Sequential model (.keras) as a Mirrorlab project and weights file, which
// train, evaluate, predict and export then take like any other.
#include <cstdio>
#include <memory>

#include "Commands.h"
#include "Error.h"
#include "export/KerasImport.h"

namespace mlcli {

namespace {

struct ImportArgs {
  ml::ImportRequest request;
};

int runImportCommand(const ImportArgs& a) {
  const ml::ImportResult r = ml::runImport(a.request);
  const ml::Project& p = r.imported.project;
  std::printf("imported %s (Keras %s, %zu layers, input %s) as project %s and weights %s\n", a.request.model.c_str(),
              r.imported.kerasVersion.c_str(), p.model.layers.size(), ml::shapeToString(p.model.inputShape).c_str(),
              r.projectPath.c_str(), r.weightsPath.c_str());
  for (const auto& note : r.imported.notes) std::printf("note: %s\n", note.c_str());
  std::printf("next: mirrorlab-cli evaluate %s --weights %s\n", r.projectPath.c_str(), r.weightsPath.c_str());
  return 0;
}

}  // namespace

void addImportCommand(CLI::App& app, int& exitCode) {
  auto a = std::make_shared<ImportArgs>();
  auto* c = app.add_subcommand("import", "Open a Keras 3 Sequential model (.keras) as a Mirrorlab project and weights file");
  c->add_option("model", a->request.model, "The .keras file (keras.Sequential saved with model.save)")->required();
  c->add_option("--output-project", a->request.project, "Project file to write (default: beside the model, MODEL.json)");
  c->add_option("--output-weights", a->request.weights,
                "Weights file to write: .mlw, or .npz for NumPy arrays (default: beside the model, MODEL.mlw)");
  c->callback([a, &exitCode] { exitCode = guarded([&] { return runImportCommand(*a); }); });
}

}  // namespace mlcli
