// Workers on several hosts: what `train --workers W` checks before and after mpirun, and what the
// workers compare at start-up, so that a host that cannot be reached, runs another Mirrorlab or
// reads another project is named with the fix, and a host that vanished never holds the command.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "distribute/Workers.h"
#include "project/Project.h"
#include "train/Resume.h"

namespace mlcli {

// "mirrorlab-cli 0.1.0": what --version prints, compared between the hosts.
std::string versionLine();

// The hostfile mpirun will use: `--hostfile` if given, else Open MPI's default hostfile setting
// (OMPI_MCA_orte_default_hostfile), else "" (this host only).
std::string hostfileInEffect(const std::string& given);
// The host names of an Open MPI hostfile ("node1 slots=2", comments after #), in order, once each.
// Throws UserError when it cannot be read or names no host.
std::vector<std::string> hostfileHosts(const std::string& path);

// Before mpirun: every host of the hostfile but this one answers the launch agent
// (OMPI_MCA_plm_rsh_agent, else ssh) within `timeoutSeconds` and runs `exe --version` with this
// host's version. Throws UserError naming the host, what failed and the fix; the hosts are tried
// side by side.
void checkWorkerHosts(const std::string& hostfile, const std::string& exe, double timeoutSeconds);

// At start-up, under mpirun: every worker's Mirrorlab, project, devices and data are gathered and
// compared with worker 1's. Throws UserError naming the first worker that differs, its host, what
// differs and the fix. `projectPath` is the project file each worker read ("" for a resumed run).
void checkWorkersAgree(ml::WorkerGroup& group, const ml::Project& p, int64_t trainSamples, const std::string& projectPath);

// --resume under several workers: worker 1 runs `find` (it alone has the run store) and hands the
// stored project and the checkpoint's bytes to every worker over MPI, so the other hosts need no
// copy of the store. Throws UserError alike on every worker when worker 1's `find` refused.
ml::ResumeSource resumeAcrossWorkers(ml::WorkerGroup& group, const std::function<ml::ResumeSource()>& find);

// After mpirun, when worker 1 left no exit status (Open MPI stopped it, or it was killed): its run
// in `store` (the one resumed, else the first one newer than `newestBefore`), left running or
// marked interrupted, is stored failed with what is known. Returns the message ("" if no such run).
std::string recordLostLead(const std::string& store, int64_t newestBefore, std::optional<int64_t> resumed, int workers);
// The newest run id in `store` (0 when it has none or does not exist yet).
int64_t newestRunId(const std::string& store);

using ml::workerOnHost;

}  // namespace mlcli
