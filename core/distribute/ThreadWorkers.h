// W in-process workers on threads: a WorkerGroup for tests (and the thread sanitizer), with the
// same contract as the MPI one: collective calls, sums in rank order (identical bits everywhere),
// a timeout that throws WorkerLost naming the worker that did not arrive.
#pragma once
#include <memory>
#include <vector>

#include "distribute/Workers.h"

namespace ml {

// One WorkerGroup per worker; each is used by that worker's threads only.
std::vector<std::unique_ptr<WorkerGroup>> makeThreadWorkers(int workers, double timeoutSeconds,
                                                            const std::string& host = "localhost");

}  // namespace ml
