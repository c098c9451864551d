// The worker group of a process started by mpirun: loads libmirrorlab_mpi.so (the Open MPI side,
// distribute/mpi/) only then, so that the program runs without MPI installed when it is not used.
#pragma once
#include <memory>
#include <string>

#include "distribute/Workers.h"

namespace ml {

// Whether mpirun (or another PMI launcher) started this process: its environment says so.
bool launchedByMpi();

class MpiWorkers : public WorkerGroup {
 public:
  ~MpiWorkers() override = default;
  // Ends this worker's MPI (collective: every worker calls it), after a run that ended well.
  virtual void finish() = 0;
  // Stops every worker at once (MPI_Abort): after a failure that left others waiting.
  [[noreturn]] virtual void abortAll(int code) = 0;
};

// Starts MPI in this process (MPI_Init_thread) and returns its group; a collective call that waits
// longer than timeoutSeconds throws WorkerLost naming the worker that did not come. Throws
// UserError when the plugin is missing or MPI cannot start (the message names the fix).
std::unique_ptr<MpiWorkers> startMpiWorkers(double timeoutSeconds);

// Where the plugin is looked for: $MIRRORLAB_MPI_PLUGIN, else beside the executable, then
// ../lib/mirrorlab/ (installed).
std::vector<std::string> mpiPluginCandidates();

}  // namespace ml
