// Fault injection, for teaching and for tests: a slow replica, a replica that hangs, a replica
// whose gradient becomes NaN, a replica whose step fails with an error (as a device error would),
// a replica stuck for good (no release reaches it), a process that dies. Parsed from the --inject
// flag or the project's "faults" field ("slow:cpu:1=3x", "hang:cpu:2@step=50", "nan:cpu:1@step=20",
// "fail:cpu:1@step=5", "stuck:cpu:1@step=5", "kill@step=30"); the strategy plays the first five on
// the replica's own thread, the trainer the last one. With several workers, "@worker=K" (1-based) plays a fault on worker K only.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/DeviceList.h"

namespace ml {

struct FaultPlan {
  std::vector<double> slow;  // per replica: compute takes this many times longer (1: normal)
  int hangReplica = -1;      // this replica stops in backward of hangStep until released
  int64_t hangStep = 0;
  int nanReplica = -1;  // this replica's gradient becomes NaN at nanStep
  int64_t nanStep = 0;
  int failReplica = -1;  // this replica's step fails with an error at failStep
  int64_t failStep = 0;
  // This replica stops in backward of stuckStep and never comes back, whatever releases it (a
  // device that hangs for good): the watchdog names it, and the program must go on without it.
  int stuckReplica = -1;
  int64_t stuckStep = 0;
  int64_t killStep = 0;  // the process dies (SIGKILL) after this step; 0: never
  // Where in killStep: after the whole step (kill@step=N); or at the checkpoint of that step,
  // after the store has committed its steps and before the file is written
  // (kill:before-checkpoint@step=N), or once the file is in place, before anything else
  // (kill:after-checkpoint@step=N): the two writes a kill -9 may fall between.
  enum class KillPoint { AfterStep, BeforeCheckpoint, AfterCheckpoint } killPoint = KillPoint::AfterStep;
  std::vector<std::string> specs;  // as given, for the store's label
  bool empty() const { return specs.empty(); }
  double slowFactor(int replica) const {
    return replica >= 0 && static_cast<size_t>(replica) < slow.size() ? slow[static_cast<size_t>(replica)] : 1.0;
  }
};

// One fault as written, its syntax checked: what the project holds (distribute.faults). Which
// replica it hits is settled by planFaults, against the run's devices (they may change after the
// file is read: the Devices screen, --devices).
struct Fault {
  enum class Kind { Slow, Hang, Nan, Fail, Stuck, Kill } kind = Kind::Slow;
  std::string device;  // "cpu:1"; for kill: "", "before-checkpoint" or "after-checkpoint"
  double factor = 0;   // slow's
  int64_t step = 0;    // hang, nan, fail, stuck, kill: the step it happens at
  int worker = 0;      // 1-based; 0: every worker
  std::string text;    // as written, for the file and the store's label
};
inline constexpr const char* kFaultForms =
    "slow:DEVICE=FACTORx (slow:cpu:1=3x), hang:DEVICE@step=N (hang:cpu:2@step=50), nan:DEVICE@step=N (nan:cpu:1@step=20), "
    "fail:DEVICE@step=N (fail:cpu:1@step=5), stuck:DEVICE@step=N (never released) or kill@step=N (kill@step=30; "
    "kill:before-checkpoint@step=N and kill:after-checkpoint@step=N die at that step's checkpoint), each with "
    "@worker=K to pick one of several workers";

// Throws UserError "fault '<spec>': <what is wrong> (the forms are ...)".
Fault parseFault(const std::string& spec);

// This process's plan. Throws UserError naming the fault: a device must be one of the run's
// devices ("cpu:3" on a cpu:2 run is refused). Of several workers, this process is worker
// `worker` (0-based) of `workers`: faults for another worker are left out (and a worker number
// past the last is refused).
FaultPlan planFaults(const std::vector<Fault>& faults, const DeviceList& devices, int worker = 0, int workers = 1);
// Each fault as written.
std::vector<std::string> faultTexts(const std::vector<Fault>& faults);
// parseFault on each, then planFaults: a plan straight from texts (the tests).
FaultPlan parseFaults(const std::vector<std::string>& specs, const DeviceList& devices, int worker = 0, int workers = 1);

}  // namespace ml
