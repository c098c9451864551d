// More than one process ("workers", as MultiWorkerMirroredStrategy calls them): W workers, each
// with N local replicas, train one model as W*N replicas. A WorkerGroup is what the strategy needs
// from the engine that connects them: sums across workers (the cross-worker hop of the
// hierarchical all-reduce, the step's sums and timings), a broadcast, and a few strings gathered
// at start-up. Implemented on Open MPI by the plugin (distribute/mpi/, loaded by MpiWorkers.h
// only when mpirun launched the process) and in-process by ThreadWorkers.h for the tests.
//
// Every call is collective: every worker makes the same calls in the same order. A call that does
// not complete within the group's timeout (a worker died, hangs, or was killed) throws WorkerLost
// with a message naming the worker that stopped answering, so the survivors never wait forever.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "Error.h"

namespace ml {

class WorkerLost : public UserError {
 public:
  using UserError::UserError;
};

class WorkerGroup {
 public:
  virtual ~WorkerGroup() = default;
  virtual int rank() const = 0;  // 0-based; rank 0 records the run and prints
  virtual int size() const = 0;
  virtual std::string host() const = 0;                // this worker's host name
  virtual std::vector<std::string> hosts() const = 0;  // every worker's, by rank
  virtual std::string engine() const = 0;              // "Open MPI v4.1.4", "threads (test)"
  virtual double timeoutSeconds() const = 0;

  // Element-wise sums, in place, with identical bits on every worker. `what` names the call in a
  // WorkerLost message ("the all-reduce of step 12").
  virtual void allReduce(std::span<float> data, const std::string& what) = 0;
  virtual void allReduce(std::span<double> data, const std::string& what) = 0;
  // Every worker gets root's data.
  virtual void broadcast(std::span<float> data, int root, const std::string& what) = 0;
  // Every worker's string, by rank, on every worker (start-up checks; not for every step).
  virtual std::vector<std::string> allGather(const std::string& mine, const std::string& what) = 0;

  // Where this worker is ("backward of step 5 on cpu:1"), for the message another worker gives
  // when this one stops answering. Cheap: called at every phase change of replica 0.
  virtual void setProgress(int64_t /*step*/, const char* /*phase*/) {}
  // Makes a waiting call throw WorkerLost(reason) at once (SIGTERM from mpirun, a cancelled run).
  virtual void interrupt(const std::string& reason) = 0;
  // How long this worker has been waiting in a collective call for the others (0: in none). The
  // watchdog leaves such a wait to the group, which names the worker that did not come.
  virtual double waitingSeconds() const { return 0; }
};

// "worker 2 of 3" (1-based, as people count).
inline std::string workerName(int rank, int size) { return "worker " + std::to_string(rank + 1) + " of " + std::to_string(size); }

// "worker 2 of 3 on host node2": what a message about one worker says, so the fault is looked for
// on the right machine.
inline std::string workerOnHost(const WorkerGroup& group, int rank) {
  const auto hosts = group.hosts();
  std::string name = workerName(rank, group.size());
  if (rank >= 0 && static_cast<size_t>(rank) < hosts.size() && !hosts[static_cast<size_t>(rank)].empty())
    name += " on host " + hosts[static_cast<size_t>(rank)];
  return name;
}

}  // namespace ml
