// Finding a stored run's newest checkpoint and its project, for an exact resume.
#include "train/Resume.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "Error.h"
#include "JsonFile.h"

namespace ml {

static std::vector<std::string> checkpointFiles(const std::string& storePath, int64_t runId) {
  std::vector<std::string> files;
  const std::string folder = checkpointFolder(storePath, runId);
  std::error_code ec;
  if (folder.empty() || !std::filesystem::is_directory(folder, ec)) return files;
  for (const auto& e : std::filesystem::directory_iterator(folder, ec))
    if (e.path().extension() == ".mlck" && e.is_regular_file(ec)) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());  // step-00000042.mlck: by step
  return files;
}

bool canResume(const std::string& storePath, const RunSummary& run) {
  if (run.status != "interrupted" && run.status != "failed" && run.status != "cancelled") return false;
  return !checkpointFiles(storePath, run.id).empty();
}

ResumeSource findResume(RunStore& store, int64_t runId) {
  const RunDetail run = store.loadRun(runId);  // UserError when there is no such run
  const std::string who = "run " + std::to_string(runId) + " ('" + run.summary.name + "')";
  const std::string& status = run.summary.status;
  if (status == "finished") throw UserError(who + " finished: there is nothing to resume; nothing was changed");
  if (status == "running")
    throw UserError(who + " is still running (process " + std::to_string(run.pid.value_or(0)) + " on " + run.host +
                    "): stop it before resuming it");
  const auto files = checkpointFiles(store.path(), runId);
  if (files.empty())
    throw UserError(who + " has no checkpoints (in " + checkpointFolder(store.path(), runId) +
                    "): it cannot be resumed; nothing was changed. Runs write a checkpoint every epoch by default "
                    "(--checkpoint-every)");
  ResumeSource src;
  src.runId = runId;
  src.runName = run.summary.name;
  src.checkpointPath = files.back();
  try {
    src.checkpoint = loadCheckpoint(src.checkpointPath);
  } catch (const UserError& e) {
    throw UserError(std::string(e.what()) + "; " + who + " was not resumed and nothing was changed", e.field());
  }
  if (src.checkpoint.runId != runId)
    throw UserError("checkpoint '" + src.checkpointPath + "' belongs to run " + std::to_string(src.checkpoint.runId) +
                    ", not to " + who + ": it was not used and nothing was changed");
  const nlohmann::json pj = parseJsonOrDiscarded(run.projectJson);
  if (pj.is_discarded()) throw UserError(who + " has no readable project in the store: it cannot be resumed");
  src.project = Project::fromJson(pj, who + "'s project");
  src.project.distribute.faults.clear();  // injected faults are not replayed: give --inject again to
  return src;
}

}  // namespace ml
