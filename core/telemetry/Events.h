// Typed telemetry events: what the training core tells the CLI, the run recorder and the studio.
// All times are seconds; wall times are seconds of training since the run started (steady clock,
// paused time left out: see RunPaused).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace ml {

enum class RunStatus { Running, Finished, Cancelled, Diverged, Failed, Interrupted };

inline const char* toString(RunStatus s) {
  switch (s) {
    case RunStatus::Running: return "running";
    case RunStatus::Finished: return "finished";
    case RunStatus::Cancelled: return "cancelled";
    case RunStatus::Diverged: return "diverged";
    case RunStatus::Failed: return "failed";
    case RunStatus::Interrupted: return "interrupted";
  }
  return "unknown";
}

// Time one replica spent in each phase of one optimizer step.
struct PhaseTimes {
  double forward = 0;    // forward passes (all micro-batches)
  double backward = 0;   // backward passes, including the loss gradient
  double allreduce = 0;  // exposed all-reduce time: after backward, waiting for our buckets to finish
  double wait = 0;       // waiting for the slowest replica to finish its backward
  double optimizer = 0;  // the optimizer update
  double allgather = 0;  // sharded optimizer: waiting for the owners' updates, copying their parameters
  // More than one worker (process): the cross-worker hop of the hierarchical all-reduce (MPI), on
  // the replica that carries it; its exposed part is here, not in allreduce.
  double network = 0;
  // The micro-batches' input: rows gathered on the host (CPU devices), or their indices copied to the
  // device and the rows gathered there (GPUs; the data set is kept on the device when it fits).
  double input = 0;
  double total() const { return input + forward + backward + allreduce + wait + optimizer + allgather + network; }
  double compute() const { return forward + backward + optimizer; }
  bool operator==(const PhaseTimes&) const = default;
};

struct ReplicaStep {
  int replica = 0;
  int64_t samples = 0;  // samples in this replica's shards this step
  PhaseTimes phases;
  double start = 0;  // wall time the replica started the step
  bool operator==(const ReplicaStep&) const = default;
};

// Sent once, when training is about to start.
struct RunStarted {
  std::string runName;
  std::string projectJson;           // the whole project as it was run (so it can be re-run)
  std::string configJson;            // the effective configuration (devices, batches, lr rule, ...)
  std::vector<std::string> devices;  // "cpu:0 (simulated)", "gpu:0 NVIDIA H200", ...; with several
                                     // workers one per replica of every worker: "vm/worker2/cpu:1 (simulated)"
  int replicas = 1;                  // in all, every worker's
  // Workers (processes launched by mpirun, each with replicas / workers local replicas) and the
  // host each runs on, by rank. One worker: {} (this process's host is in the run's host info).
  int workers = 1;
  std::vector<std::string> hosts;
  int64_t globalBatch = 0;
  int64_t perReplicaBatch = 0;  // the largest shard
  double baseLr = 0;
  double lr = 0;  // after the scaling rule
  int epochs = 0;
  int64_t stepsPerEpoch = 0;
  int64_t totalSteps = 0;
  std::string description;  // the lines the CLI prints at start
  // Where the run's device samples come from, one line (also among the description's): NVML's
  // figures per physical GPU, or the computed utilization and why NVML is not used. "" on CPU runs.
  std::string telemetry;
  std::vector<std::string> tags;  // stored with the run ("fault injected")
  // A resumed run goes on in its stored row: the store drops what came after the checkpoint
  // (steps after resumeStep, epochs after resumeEpochsDone) and marks it running again.
  std::optional<int64_t> resumeRun;
  int64_t resumeStep = 0;
  int resumeEpochsDone = 0;
  double resumeWall = 0;
  bool operator==(const RunStarted&) const = default;
};

struct StepEvent {
  int64_t step = 0;         // global optimizer step, from 1
  int epoch = 0;            // from 1
  int64_t stepInEpoch = 0;  // from 1
  int64_t stepsPerEpoch = 0;
  double loss = 0;    // mean over the global batch
  double metric = 0;  // accuracy (or MAE for regression) over the global batch
  double lr = 0;
  int64_t samples = 0;  // samples in this step (global)
  double stepTime = 0;  // wall time of the step
  double wallTime = 0;  // when the step ended
  std::vector<ReplicaStep> replicas;
  // Dynamic loss scaling (mixed_float16): the scale this step's loss was multiplied by (0: no
  // loss scaling), and whether its summed gradients overflowed so that the update was skipped.
  double lossScale = 0;
  bool skipped = false;
  bool operator==(const StepEvent&) const = default;
};

struct EpochEvent {
  int epoch = 0;
  double trainLoss = 0;
  double trainMetric = 0;
  std::optional<double> valLoss;
  std::optional<double> valMetric;
  double seconds = 0;  // training time of the epoch (without validation)
  double samplesPerSec = 0;
  double allreduceShare = 0;        // share of replica step time spent in exposed all-reduce
  double waitShare = 0;             // share spent waiting for the slowest replica
  std::vector<uint64_t> checksums;  // one per replica
  bool inSync = true;
  double wallTime = 0;
  bool operator==(const EpochEvent&) const = default;
};

// Where a device sample's figures come from. Computed: the Trainer's compute time / step time of
// one replica (every run; on GPU runs where NVML cannot be read, and with several workers). Nvml:
// the driver's figures for one physical GPU, sampled off the training threads at a steady period.
enum class SampleSource { Computed, Nvml };

inline const char* toString(SampleSource s) { return s == SampleSource::Nvml ? "nvml" : "computed"; }

struct DeviceSample {
  double wallTime = 0;
  int device = 0;          // replica index; an NVML sample: the first replica on its GPU
  double utilization = 0;  // 0..1: compute time / wall time over a sliding window, or NVML's kernel-busy share
  double memoryBytes = 0;  // computed: the replica's parameters and activations (an estimate); NVML: used on the GPU
  SampleSource source = SampleSource::Computed;
  // NVML samples: the physical GPU (CUDA ordinal) and how many replicas share it (logical GPUs,
  // gpu:0x4: one sample of the GPU stands for all four, stored under the first); the GPU's memory
  // in all (0: unknown), its core temperature and memory-controller busy share (0..1) when known.
  int gpu = -1;
  int gpuReplicas = 1;
  double memoryTotalBytes = 0;
  std::optional<double> temperatureC;
  std::optional<double> memoryBusy;
  bool operator==(const DeviceSample&) const = default;
};

// Sent when a paused run resumes (or is cancelled while paused). Paused time is not training
// time: every other time in a run (wall, step, epoch, throughput) leaves it out, so wallTime is
// the training time at which the pause began and the pause itself is only this event.
struct RunPaused {
  double wallTime = 0;
  double seconds = 0;  // how long it was paused, in real time
  bool operator==(const RunPaused&) const = default;
};

struct RunFinished {
  RunStatus status = RunStatus::Finished;
  std::string message;  // error or divergence message
  double seconds = 0;
  int64_t steps = 0;
  std::optional<double> finalValLoss;
  std::optional<double> finalValMetric;
  bool operator==(const RunFinished&) const = default;
};

// A checkpoint was written (atomically) after `step`; older ones beyond the kept number were
// deleted (removed). The recorder lists them among the run's artifacts.
struct CheckpointSaved {
  int64_t step = 0;
  int epoch = 0;
  std::string path;
  uint64_t checksum = 0;
  int64_t bytes = 0;
  std::vector<std::string> removed;
  double wallTime = 0;
  bool operator==(const CheckpointSaved&) const = default;
};

// The watchdog's warning: a replica keeps arriving at the all-reduce late (a straggler).
struct WatchdogWarning {
  int replica = 0;
  std::string device;  // "cpu:1"
  std::string phase;   // where it spends the extra time ("backward")
  int64_t step = 0;
  double lateSeconds = 0;     // median lateness over the last steps
  double typicalSeconds = 0;  // median compute time of a replica's step
  std::string message;        // "replica 1 (cpu:1) is a straggler: ..."
  double wallTime = 0;
  bool operator==(const WatchdogWarning&) const = default;
};

using Event =
    std::variant<RunStarted, StepEvent, EpochEvent, DeviceSample, RunPaused, RunFinished, CheckpointSaved, WatchdogWarning>;

}  // namespace ml
