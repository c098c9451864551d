// One export as the CLI and the studio run it: a project and a weights file (or a stored run's),
// the output path checked before any work, the weights loaded into the model, the file written,
// and the export recorded as an artifact of the run it came from.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "export/ModelExport.h"
#include "project/Project.h"

namespace ml {

class RunStore;

struct ExportRequest {
  Project project;
  std::string weights;  // .mlw or .npz saved by train --save-weights (or .mlw by the studio for its runs)
  ExportFormat format = ExportFormat::Onnx;
  std::string output;
  std::optional<int64_t> runId;  // written into the file's metadata when known
};

// Throws UserError: bad output path (before reading anything), missing or foreign weights,
// a layer the format cannot express.
ExportResult runExport(const ExportRequest& request);

// Weights from an .npz (NumPy arrays named per layer) or an .mlw, by the file's ending.
void loadAnyWeights(Sequential& model, const std::string& path);

// A stored run's project and the newest weights file it recorded. Throws UserError when the run
// has no weights artifact or the file has gone, saying how to get one.
struct StoredWeights {
  Project project;
  std::string weights;
};
StoredWeights storedWeights(RunStore& store, int64_t run);

// The run that recorded this weights file as its artifact (same absolute path), if any.
std::optional<int64_t> runOfWeights(RunStore& store, const std::string& weightsPath);

// Keeps a finished run's final weights beside the store (<store folder>/weights/run-<id>.mlw) and
// records them as the run's "weights" artifact, so the run can be exported later (the studio).
std::string keepRunWeights(const std::string& storePath, int64_t run, const Sequential& model);
// Where keepRunWeights puts a run's weights (whether or not they are there).
std::string keptWeightsPath(const std::string& storePath, int64_t run);

// Adds the exported file to the run's artifacts (kind "export:onnx", ...), with its checksum.
void recordExport(RunStore& store, int64_t run, const ExportResult& result, ExportFormat format);

}  // namespace ml
