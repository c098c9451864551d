// MirroredStrategy across several workers (processes): what the step needs besides the
// hierarchical all-reduce (CrossWorker.h) so that W workers train as one run — the cores a worker
// may use, what is refused across them, the replicas' names, one exchange of every replica's
// results per step, the clocks, the checksums and the evaluation sums of every worker. With
// several workers every exchange here is collective: each worker makes it at the same point of
// the same step.
#include <algorithm>
#include <chrono>
#include <thread>

#include "Error.h"
#include "Field.h"
#include "distribute/MirroredStrategy.h"
#include "distribute/Workers.h"

namespace ml {

// The cores this process may use: the machine's, shared by the workers on this host (several
// workers started on one machine must not each think they have all of it).
int MirroredStrategy::coresOfThisWorker() const {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (!workers_) return cores;
  const auto hosts = workers_->hosts();
  const auto here = std::count(hosts.begin(), hosts.end(), workers_->host());
  return std::max(1, cores / static_cast<int>(std::max<std::ptrdiff_t>(1, here)));
}

// What does not cross processes yet is refused before anything runs, with the way out.
void MirroredStrategy::refuseAcrossWorkers() const {
  const AllReduceAlgo algo = options_.allreduce;
  if (!workers_) {
    if (acrossWorkers(algo))
      throw UserError(std::string("all-reduce '") + toString(algo) +
                      "' sums across workers (processes): run under mpirun -np W (or mirrorlab-cli train --workers W); "
                      "in one process use ring or reduce-to-one");
    return;
  }
  const std::string who = workerOnHost(*workers_, worker_) + ": ";
  const bool device = caps_.collectives != nullptr;  // their own collectives cross the workers (DeviceCollectives)
  if (device && algo == AllReduceAlgo::Mpi)
    throw UserError(who + "all-reduce 'mpi' sums in host memory; GPUs across workers all-reduce with NCCL: " +
                    "leave --allreduce out (or use hierarchical)");
  if (options_.shardOptimizer)
    throw UserError(who + fieldInWords("distribute.shard_optimizer") +
                        " across workers is not built yet; turn it off or train in one process",
                    "distribute.shard_optimizer");
  if (algo == AllReduceAlgo::Mpi && replicas() > 1)
    throw UserError(who + "all-reduce 'mpi' is the flat form, one replica per worker (--devices cpu:1), but this worker has " +
                    std::to_string(replicas()) + " local replicas; use 'hierarchical' (the default across workers)");
}

std::string MirroredStrategy::replicaLabel(int g) const {
  const int n = replicas();
  const std::string dev = options_.devices.devices[static_cast<size_t>(g % n)].label();
  if (!workers_) return dev;
  const int w = g / n;
  const auto hosts = workers_->hosts();
  const std::string host = w < static_cast<int>(hosts.size()) ? hosts[static_cast<size_t>(w)] : std::string("?");
  return host + "/worker" + std::to_string(w + 1) + "/" + dev;
}

namespace {
constexpr size_t kHeader = 2;  // stop votes, failed workers
constexpr size_t kFields = 15;
}  // namespace

// After the local step: every worker's replicas' outcomes, its stop vote and whether it failed,
// summed across the workers (each slot is written by one worker only, so the sums are exact).
// A failure anywhere is thrown on every worker with the failing worker's message.
// Long: the packing and the unpacking of the same fixed slot layout sit side by side so that a
// field added to one is seen missing from the other.
std::vector<MirroredStrategy::ReplicaOutcome> MirroredStrategy::exchange(const std::string& localFailure, uint64_t step) {
  const size_t G = static_cast<size_t>(globalReplicas());
  std::vector<ReplicaOutcome> out(G);
  if (!workers_) {
    for (const auto& r : replicas_) {
      ReplicaOutcome& o = out[static_cast<size_t>(r->rank)];
      o.lossSum = r->lossSum;
      o.metricSum = r->metricSum;
      o.samples = static_cast<double>(r->samples);
      o.start = r->start;
      o.phases = r->phases;
      o.inlineComm = r->inlineComm;
      o.backwardEnd = r->backwardEnd;
      o.commEnd = r->commEnd;
      o.bad = r->finite ? 0 : (r->badWhat == "loss" ? 1 : 2);
      o.skipped = r->skipped;
    }
    return out;
  }
  std::vector<double> v(kHeader + kFields * G, 0.0);
  v[0] = stopVote_.load(std::memory_order_relaxed) ? 1 : 0;
  v[1] = localFailure.empty() ? 0 : 1;
  if (localFailure.empty()) {
    for (const auto& r : replicas_) {
      double* f = v.data() + kHeader + kFields * static_cast<size_t>(globalIndex(r->rank));
      const double fields[kFields] = {r->lossSum,
                                      r->metricSum,
                                      static_cast<double>(r->samples),
                                      r->start,
                                      r->phases.forward,
                                      r->phases.backward,
                                      r->phases.optimizer,
                                      r->network,
                                      r->inlineComm,
                                      r->backwardEnd,
                                      r->commEnd,
                                      r->finite ? 0.0 : (r->badWhat == "loss" ? 1.0 : 2.0),
                                      r->skipped ? 1.0 : 0.0,
                                      r->phases.allgather,
                                      r->phases.input};
      std::copy(fields, fields + kFields, f);
    }
  }
  workers_->allReduce(std::span<double>(v), "the exchange of step " + std::to_string(step) + "'s results");
  if (v[1] > 0) throwFailure(localFailure, "step " + std::to_string(step));
  stopVotes_ = static_cast<int>(v[0] + 0.5);
  for (size_t g = 0; g < G; ++g) {
    const double* f = v.data() + kHeader + kFields * g;
    ReplicaOutcome& o = out[g];
    o.lossSum = f[0];
    o.metricSum = f[1];
    o.samples = f[2];
    o.start = f[3];
    o.phases.forward = f[4];
    o.phases.backward = f[5];
    o.phases.optimizer = f[6];
    o.phases.network = f[7];
    o.inlineComm = f[8];
    o.backwardEnd = f[9];
    o.commEnd = f[10];
    o.bad = static_cast<int>(f[11] + 0.5);
    o.skipped = f[12] > 0.5;
    o.phases.allgather = f[13];
    o.phases.input = f[14];
  }
  return out;
}

// Every worker leaves this sum at nearly the same instant: their clocks start together.
void MirroredStrategy::syncClocks() {
  double one = 1;
  workers_->allReduce(std::span<double>(&one, 1), "the start of training");
  t0_.store(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  clockSynced_ = true;
}

// Every worker's checksums, by global replica: each 64-bit sum as two exact 32-bit halves in a double sum.
std::vector<uint64_t> MirroredStrategy::gatherChecksums(const std::vector<uint64_t>& local) const {
  std::vector<double> all(2 * static_cast<size_t>(globalReplicas()), 0.0);
  for (int r = 0; r < replicas(); ++r) {
    all[2 * static_cast<size_t>(globalIndex(r))] = static_cast<double>(local[static_cast<size_t>(r)] >> 32);
    all[2 * static_cast<size_t>(globalIndex(r)) + 1] = static_cast<double>(local[static_cast<size_t>(r)] & 0xffffffffu);
  }
  workers_->allReduce(std::span<double>(all), "the gathering of the replicas' checksums");
  std::vector<uint64_t> out;
  for (size_t g = 0; g < all.size() / 2; ++g)
    out.push_back((static_cast<uint64_t>(all[2 * g]) << 32) | static_cast<uint64_t>(all[2 * g + 1]));
  return out;
}

// An evaluation of every worker's shards: the sums across the workers, a failure anywhere thrown
// everywhere, and the outputs (each worker wrote its rows, the rest are zero) summed into place.
void MirroredStrategy::shareEvaluation(EvalResult& res, const std::string& localFailure, std::span<float> outputs) {
  std::vector<double> v = {localFailure.empty() ? 0.0 : 1.0, res.lossSum, res.metricSum, static_cast<double>(res.samples)};
  workers_->allReduce(std::span<double>(v), "the sums of an evaluation");
  if (v[0] > 0) throwFailure(localFailure, "an evaluation");
  res.lossSum = v[1];
  res.metricSum = v[2];
  res.samples = static_cast<int64_t>(v[3]);
  if (!outputs.empty()) workers_->allReduce(outputs, "the outputs of an evaluation");
}

// Some worker failed in `what`: every worker throws the first failing worker's message (its own
// without the worker's name).
void MirroredStrategy::throwFailure(const std::string& localFailure, const std::string& what) const {
  const auto messages = workers_->allGather(localFailure, "the messages of " + what + "'s failure");
  for (size_t w = 0; w < messages.size(); ++w)
    if (!messages[w].empty())
      throw UserError(w == static_cast<size_t>(worker_) ? messages[w]
                                                        : workerOnHost(*workers_, static_cast<int>(w)) + ": " + messages[w]);
  throw UserError("a worker failed in " + what);
}

}  // namespace ml
