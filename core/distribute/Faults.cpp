// Fault-injection specs, kind[:device][=factor][@step=N][@worker=K]: parsed, then planned for one process.
#include "distribute/Faults.h"

#include <algorithm>
#include <cstdlib>

#include "Error.h"

namespace ml {

namespace {

[[noreturn]] void bad(const std::string& spec, const std::string& why) {
  throw UserError("fault '" + spec + "': " + why + " (the forms are " + kFaultForms + ")");
}

int64_t wholeNumber(const std::string& spec, const std::string& text) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < 1) bad(spec, "'" + text + "' is not a step number of at least 1");
  return v;
}

}  // namespace

Fault parseFault(const std::string& spec) {
  Fault p;
  p.text = spec;
  std::string kind;
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
  kind = rest.substr(0, colon);
  if (colon != std::string::npos) p.device = rest.substr(colon + 1);
  if (kind == "kill") {
    p.kind = Fault::Kind::Kill;
    if ((!p.device.empty() && p.device != "before-checkpoint" && p.device != "after-checkpoint") || p.factor != 0)
      bad(spec, "kill takes no device or factor (the whole process dies), only before-checkpoint or after-checkpoint");
    if (p.step == 0) bad(spec, "kill needs @step=N");
  } else if (kind == "slow") {
    p.kind = Fault::Kind::Slow;
    if (p.device.empty() || p.factor == 0) bad(spec, "slow needs a device and a factor");
    if (p.step != 0) bad(spec, "slow applies from the first step: leave out @step");
  } else if (kind == "hang" || kind == "nan" || kind == "fail" || kind == "stuck") {
    p.kind = kind == "hang"   ? Fault::Kind::Hang
             : kind == "nan"  ? Fault::Kind::Nan
             : kind == "fail" ? Fault::Kind::Fail
                              : Fault::Kind::Stuck;
    if (p.device.empty() || p.step == 0) bad(spec, kind + " needs a device and @step=N");
    if (p.factor != 0) bad(spec, kind + " takes no factor");
  } else {
    bad(spec, "unknown kind '" + kind + "'");
  }
  return p;
}

FaultPlan planFaults(const std::vector<Fault>& faults, const DeviceList& devices, int worker, int workers) {
  FaultPlan plan;
  plan.slow.assign(static_cast<size_t>(devices.size()), 1.0);
  for (const Fault& p : faults) {
    const std::string& spec = p.text;
    if (p.worker > workers)
      bad(spec, "this run has " + std::to_string(workers) + " worker" + (workers == 1 ? "" : "s") +
                    (workers == 1 ? " (several only under mpirun -np W)" : ""));
    if (p.worker != 0 && p.worker != worker + 1) continue;  // another worker's
    int replica = -1;
    if (p.kind == Fault::Kind::Kill) {
      plan.killStep = p.step;
      plan.killPoint = p.device.empty()                  ? FaultPlan::KillPoint::AfterStep
                       : p.device == "before-checkpoint" ? FaultPlan::KillPoint::BeforeCheckpoint
                                                         : FaultPlan::KillPoint::AfterCheckpoint;
    } else if (!p.device.empty()) {
      for (int r = 0; r < devices.size(); ++r)
        if (devices.devices[static_cast<size_t>(r)].label() == p.device) replica = r;
      if (replica < 0) bad(spec, "'" + p.device + "' is not one of this run's devices (" + devices.describe() + ")");
    }
    switch (p.kind) {
      case Fault::Kind::Slow: plan.slow[static_cast<size_t>(replica)] = p.factor; break;
      case Fault::Kind::Hang: plan.hangReplica = replica, plan.hangStep = p.step; break;
      case Fault::Kind::Nan: plan.nanReplica = replica, plan.nanStep = p.step; break;
      case Fault::Kind::Fail: plan.failReplica = replica, plan.failStep = p.step; break;
      case Fault::Kind::Stuck: plan.stuckReplica = replica, plan.stuckStep = p.step; break;
      case Fault::Kind::Kill: break;
    }
    plan.specs.push_back(spec);
  }
  return plan;
}

std::vector<std::string> faultTexts(const std::vector<Fault>& faults) {
  std::vector<std::string> out;
  for (const Fault& f : faults) out.push_back(f.text);
  return out;
}

FaultPlan parseFaults(const std::vector<std::string>& specs, const DeviceList& devices, int worker, int workers) {
  std::vector<Fault> faults;
  for (const auto& s : specs) faults.push_back(parseFault(s));
  return planFaults(faults, devices, worker, workers);
}

}  // namespace ml
