// A project of several workers (distribute.workers > 1) from the studio: mirrorlab-cli trains it
// as local MPI workers (it starts mpirun itself), and worker 1, whose RecordedRun records the run
// and keeps its final weights, streams its telemetry through a pipe (train --events): the
// dashboard shows the multi-worker run live from the same events as any other run. No Qt here:
// it runs on the training session's thread.
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
  // What mirrorlab-cli said when it exited with an error after the run ended (the store could not
  // record it, the weights could not be kept); "" otherwise.
  std::string error;
};

// The RunStarted a stored run began with, as the dashboard needs it (its devices named by host and
// worker, its hosts, its plan), read back from the store.
ml::RunStarted startedFromStore(const ml::RunDetail& d);

// Runs `cli` (the mirrorlab-cli beside the studio) on the project, recording into `store`, and
// publishes worker 1's events on `hub` as they happen, ending with RunFinished. `cancel` stops the
// workers (mpirun gets SIGTERM; the run is stored failed with that reason). Throws ml::UserError
// with the CLI's own message when the run did not start.
WorkersRun runWorkers(const std::string& cli, const ml::Project& project, const std::string& store, int64_t maxSteps,
                      ml::TelemetryHub& hub, const std::atomic<bool>& cancel);

}  // namespace mlui
