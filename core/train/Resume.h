// What `train --resume RUN_ID` and the studio's Resume button continue from: the stored run's
// project and its newest checkpoint, checked before anything changes. Every refusal (no such run,
// finished, still running, no checkpoints, a damaged or foreign checkpoint) is a UserError that
// names the reason, and the store and the files are left as they were.
#pragma once
#include <cstdint>
#include <string>

#include "project/Project.h"
#include "store/RunStore.h"
#include "train/Checkpoint.h"

namespace ml {

struct ResumeSource {
  int64_t runId = 0;
  std::string runName;
  Project project;        // as the run was started, without its injected faults
  Checkpoint checkpoint;  // the newest one
  std::string checkpointPath;
};

ResumeSource findResume(RunStore& store, int64_t runId);
// True when the studio should offer Resume: interrupted, failed or cancelled, with a checkpoint file.
bool canResume(const std::string& storePath, const RunSummary& run);

}  // namespace ml
