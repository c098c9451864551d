// Parsing of fault-injection specs: kind[:device][=factor][@step=N].
#include "distribute/Faults.h"

#include <algorithm>
#include <cstdlib>

#include "Error.h"

namespace ml {

namespace {

constexpr const char* kForms =
    "slow:DEVICE=FACTORx (slow:cpu:1=3x), hang:DEVICE@step=N (hang:cpu:2@step=50), nan:DEVICE@step=N (nan:cpu:1@step=20), "
    "fail:DEVICE@step=N (fail:cpu:1@step=5), stuck:DEVICE@step=N (never released) or kill@step=N (kill@step=30; "
    "kill:before-checkpoint@step=N and kill:after-checkpoint@step=N die at that step's checkpoint), each with "
    "@worker=K to pick one of several workers";

struct Parsed {
  std::string kind, device;
  double factor = 0;
  int64_t step = 0;
  int worker = 0;  // 1-based; 0: every worker
};

[[noreturn]] void bad(const std::string& spec, const std::string& why) {
  throw UserError("fault '" + spec + "': " + why + " (the forms are " + kForms + ")");
}

int64_t wholeNumber(const std::string& spec, const std::string& text) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < 1) bad(spec, "'" + text + "' is not a step number of at least 1");
  return v;
}

Parsed parseOne(const std::string& spec) {
  Parsed p;
  std::string rest = spec;
  for (auto at = rest.rfind('@'); at != std::string::npos; at = rest.rfind('@')) {
    const std::string tail = rest.substr(at + 1);
    if (tail.rfind("step=", 0) == 0 && p.step == 0)
      p.step = wholeNumber(spec, tail.substr(5));
    else if (tail.rfind("worker=", 0) == 0 && p.worker == 0)
      p.worker = static_cast<int>(std::min<int64_t>(wholeNumber(spec, tail.substr(7)), 1 << 20));
    else
      bad(spec, "after '@' write step=N or worker=K, each once");
    rest = rest.substr(0, at);
  }
  if (const auto eq = rest.find('='); eq != std::string::npos) {
    std::string f = rest.substr(eq + 1);
    if (!f.empty() && (f.back() == 'x' || f.back() == 'X')) f.pop_back();
    char* end = nullptr;
    p.factor = std::strtod(f.c_str(), &end);
    if (f.empty() || *end != '\0' || !(p.factor >= 1.0) || p.factor > 1000)
      bad(spec, "the slow-down factor must be a number from 1 to 1000, such as 3x");
    rest = rest.substr(0, eq);
  }
  const auto colon = rest.find(':');
  p.kind = rest.substr(0, colon);
  if (colon != std::string::npos) p.device = rest.substr(colon + 1);
  if (p.kind == "kill") {
    if ((!p.device.empty() && p.device != "before-checkpoint" && p.device != "after-checkpoint") || p.factor != 0)
      bad(spec, "kill takes no device or factor (the whole process dies), only before-checkpoint or after-checkpoint");
    if (p.step == 0) bad(spec, "kill needs @step=N");
  } else if (p.kind == "slow") {
    if (p.device.empty() || p.factor == 0) bad(spec, "slow needs a device and a factor");
    if (p.step != 0) bad(spec, "slow applies from the first step: leave out @step");
  } else if (p.kind == "hang" || p.kind == "nan" || p.kind == "fail" || p.kind == "stuck") {
    if (p.device.empty() || p.step == 0) bad(spec, p.kind + " needs a device and @step=N");
    if (p.factor != 0) bad(spec, p.kind + " takes no factor");
  } else {
    bad(spec, "unknown kind '" + p.kind + "'");
  }
  return p;
}

}  // namespace

void checkFaultSyntax(const std::string& spec) { parseOne(spec); }

FaultPlan parseFaults(const std::vector<std::string>& specs, const DeviceList& devices, int worker, int workers) {
  FaultPlan plan;
  plan.slow.assign(static_cast<size_t>(devices.size()), 1.0);
  for (const auto& spec : specs) {
    const Parsed p = parseOne(spec);
    if (p.worker > workers)
      bad(spec, "this run has " + std::to_string(workers) + " worker" + (workers == 1 ? "" : "s") +
                    (workers == 1 ? " (several only under mpirun -np W)" : ""));
    if (p.worker != 0 && p.worker != worker + 1) continue;  // another worker's
    int replica = -1;
    if (p.kind == "kill") {
      plan.killStep = p.step;
      plan.killPoint = p.device.empty()                  ? FaultPlan::KillPoint::AfterStep
                       : p.device == "before-checkpoint" ? FaultPlan::KillPoint::BeforeCheckpoint
                                                         : FaultPlan::KillPoint::AfterCheckpoint;
    } else if (!p.device.empty()) {
      for (int r = 0; r < devices.size(); ++r)
        if (devices.devices[static_cast<size_t>(r)].label() == p.device) replica = r;
      if (replica < 0) bad(spec, "'" + p.device + "' is not one of this run's devices (" + devices.describe() + ")");
    }
    if (p.kind == "slow") plan.slow[static_cast<size_t>(replica)] = p.factor;
    if (p.kind == "hang") plan.hangReplica = replica, plan.hangStep = p.step;
    if (p.kind == "nan") plan.nanReplica = replica, plan.nanStep = p.step;
    if (p.kind == "fail") plan.failReplica = replica, plan.failStep = p.step;
    if (p.kind == "stuck") plan.stuckReplica = replica, plan.stuckStep = p.step;
    plan.specs.push_back(spec);
  }
  return plan;
}

}  // namespace ml
