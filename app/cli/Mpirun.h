// `train --workers W` starts its workers under mpirun from here (Mpirun.cpp).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace mlcli {

struct MpirunLaunch {
  std::string hostfile;       // --hostfile ("" : Open MPI's default)
  double workerTimeout = 30;  // --worker-timeout: also the bound on checking the hosts first
  std::string store;          // the run store worker 1 records in ("" : --no-record)
  std::optional<int64_t> resume;
};

// Checks the hosts, starts this command as `workers` workers under mpirun, waits, and returns
// worker 1's exit status (or 1, with the run stored failed, when worker 1 left none).
int relaunchUnderMpirun(int workers, const MpirunLaunch& a);

}  // namespace mlcli
