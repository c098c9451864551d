// A project of several workers (distribute.workers > 1) from the studio: mirrorlab-cli trains it
// as local MPI workers (it starts mpirun itself), and the run it records is followed in the run
// store as it grows, its steps and epochs published as telemetry, so the dashboard shows the
// multi-worker run live like any other. No Qt here: it runs on the training session's thread.
#pragma once
#include <atomic>
#include <optional>
#include <string>

#include "project/Project.h"
#include "store/RunStore.h"
#include "telemetry/Channel.h"

namespace mlui {

struct WorkersRun {
  ml::RunFinished finished;
  std::optional<int64_t> runId;
};

// The RunStarted a stored run began with, as the dashboard needs it (its devices named by host and
// worker, its hosts, its plan), read back from the store.
ml::RunStarted startedFromStore(const ml::RunDetail& d);

// Runs `cli` (the mirrorlab-cli beside the studio) on the project, recording into `store`, and
// publishes RunStarted, every StepEvent and EpochEvent, then RunFinished on `hub` as worker 1
// commits them. `cancel` stops the workers (mpirun gets SIGTERM; the run is stored failed with
// that reason). Throws ml::UserError with the CLI's own message when it records no run.
WorkersRun runWorkersFollowingStore(const std::string& cli, const ml::Project& project, const std::string& store,
                                    int64_t maxSteps, ml::TelemetryHub& hub, const std::atomic<bool>& cancel);

}  // namespace mlui
