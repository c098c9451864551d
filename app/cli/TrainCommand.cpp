// `train` and `scale`: run the mirrored training loop with live terminal output.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "AtomicFile.h"
#include "Commands.h"
#include "Error.h"
#include "FieldNames.h"
#include "Mpirun.h"
#include "Overrides.h"
#include "Progress.h"
#include "RunRecording.h"
#include "WorkerHosts.h"
#include "data/Dataset.h"
#include "distribute/MpiWorkers.h"
#include "export/WeightsNpz.h"
#include "learn/ScalingExperiment.h"
#include "nn/WeightsFile.h"
#include "store/RunStore.h"
#include "train/Resume.h"
#include "train/Trainer.h"

namespace mlcli {

namespace {

std::atomic<bool> gInterrupted{false};
extern "C" void onSigint(int) { gInterrupted.store(true); }

struct TrainArgs {
  std::string project;
  Overrides o;
  std::optional<int64_t> steps;
  bool quiet = false;
  std::string saveWeights, saveInitialWeights, report, name;
  std::optional<int64_t> resume;
  RecordingArgs rec;
  int workers = 0;            // --workers W: start W workers under mpirun
  std::string hostfile;       // --hostfile: the hosts mpirun starts them on
  double workerTimeout = 30;  // --worker-timeout
  bool abortAfter = false;    // several workers: the run failed, some may still wait in a collective
};

// --resume continues the stored run as it was: only where it runs (devices, data path), the
// checkpoints, the watchdog and injected faults may change.
void refuseTrainingOverrides(const Overrides& o) {
  const char* changed = o.epochs                   ? "--epochs"
                        : o.batchSize              ? "--batch-size"
                        : o.perDeviceBatch         ? "--per-device-batch"
                        : o.lr                     ? "--lr"
                        : o.optimizer              ? "--optimizer"
                        : o.seed                   ? "--seed"
                        : o.lrScaling              ? "--lr-scaling"
                        : o.warmupEpochs           ? "--warmup-epochs"
                        : !o.lrDecayEpochs.empty() ? "--lr-decay-epochs"
                        : o.lrDecayFactor          ? "--lr-decay-factor"
                        : o.accumulate             ? "--accumulate"
                        : o.allreduce              ? "--allreduce"
                        : o.bucketKb               ? "--bucket-kb"
                        : o.lrReferenceBatch       ? "--lr-reference-batch"
                        : o.precision              ? "--precision"
                        : o.lossScale              ? "--loss-scale"
                        : o.lossScaleGrowthSteps   ? "--loss-scale-growth-steps"
                                                   : nullptr;
  if (changed)
    throw ml::UserError(std::string(changed) +
                        " cannot change a resumed run: --resume goes on with the run's own settings "
                        "(start a new run to change them)");
}

bool endsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// PATH.npz: NumPy arrays named per layer (for the generated programs' --weights); else .mlw.
uint64_t writeWeights(const ml::Sequential& model, const std::string& path) {
  if (!endsWith(path, ".npz")) return ml::saveWeights(model, path);
  ml::saveWeightsNpz(model, path);
  return model.checksum();
}

// --report of a resumed run holds the whole run: the steps and epochs before the checkpoint come
// from the store (this process trained only the rest).
void prependStoredRows(const std::string& storePath, const ml::Checkpoint& from, std::vector<ml::EpochEvent>& epochs,
                       std::vector<ml::StepEvent>& steps) {
  auto store = ml::RunStore::open(storePath);
  std::vector<ml::StepEvent> before;
  for (auto& st : store.loadCurves(from.runId))
    if (st.step <= from.at.step) before.push_back(std::move(st));
  steps.insert(steps.begin(), before.begin(), before.end());
  std::vector<ml::EpochEvent> earlier;
  for (auto& e : store.loadRun(from.runId).epochs)
    if (e.epoch < from.at.epoch) earlier.push_back(std::move(e));
  epochs.insert(epochs.begin(), earlier.begin(), earlier.end());
}

// Runs one training to the end with progress on stdout; returns the finish event.
// With several workers (silent: not worker 1, which alone prints and records) a signal means
// mpirun is stopping the job (Ctrl-C, or a worker died): the waits between workers end at once
// and worker 1 records the run failed with the reason before mpirun's SIGKILL a second later.
ml::RunFinished runTraining(ml::Trainer& trainer, ml::TelemetryHub& hub, bool quiet, RunRecording* recording,
                            std::vector<ml::EpochEvent>* epochs, std::vector<ml::StepEvent>* steps, bool silent = false) {
  auto progressCh = hub.subscribe(1 << 16);
  const std::string metric = trainer.project().training.metrics.empty() ? "accuracy" : trainer.project().training.metrics.front();
  Progress progress(stdout, quiet, metric == "acc" ? "accuracy" : metric);
  gInterrupted.store(false);
  auto old = std::signal(SIGINT, onSigint);
  auto oldTerm = std::signal(SIGTERM, trainer.strategy().workers() ? onSigint : SIG_DFL);
  ml::RunFinished fin;
  std::thread worker([&] {
    fin = trainer.run();
    hub.closeAll();
  });
  std::vector<ml::Event> batch;
  bool cancelSent = false, abandoned = false;
  while (true) {
    const bool open = progressCh->waitFor(std::chrono::milliseconds(50));
    // A hang the watchdog could not release: record the run failed with its diagnosis and leave
    // (exit 1 below) rather than wait for a thread that will never return.
    if (const std::string why = trainer.stuckFor(5.0); !why.empty() && !abandoned) {
      ml::RunFinished f;
      f.status = ml::RunStatus::Failed;
      f.message = why + " (the stuck replica did not return; the process exits)";
      hub.publish(f);
      hub.closeAll();
      fin = f;
      abandoned = true;
    }
    if (gInterrupted.load() && !cancelSent) {
      trainer.requestCancel();
      // Under mpirun a signal means the job is being stopped (Ctrl-C, or a worker died without
      // --enable-recovery): mpirun kills every worker a second later, so nobody waits any more;
      // worker 1 records the run failed with what it knows.
      if (ml::WorkerGroup* w = trainer.strategy().workers())
        w->interrupt(
            "mpirun is stopping the workers (a signal: Ctrl-C, or another worker ended; start mpirun with "
            "--enable-recovery to have a lost worker named after --worker-timeout)");
      cancelSent = true;
    }
    batch.clear();
    progressCh->drain(batch);
    for (const auto& e : batch) {
      if (!silent) progress.onEvent(e);
      if (epochs)
        if (const auto* ep = std::get_if<ml::EpochEvent>(&e)) epochs->push_back(*ep);
      if (steps)
        if (const auto* st = std::get_if<ml::StepEvent>(&e)) steps->push_back(*st);
    }
    if (!open) break;
  }
  if (abandoned) {
    worker.detach();
    if (recording) recording->finish();
    std::fflush(stdout);
    std::_Exit(1);
  }
  worker.join();
  std::signal(SIGINT, old);
  std::signal(SIGTERM, oldTerm);
  if (recording) recording->finish();
  return fin;
}

// Worker 1 under --workers: its exit status, for the process that started mpirun.
void reportWorkersStatus(int rc) {
  const char* path = std::getenv("MIRRORLAB_WORKERS_STATUS");
  if (!path || !*path) return;
  if (FILE* f = std::fopen(path, "w")) {
    std::fprintf(f, "%d\n", rc);
    std::fclose(f);
  }
}

// An error every worker throws alike (after agree()): each ends on its own, worker 1 prints it.
class AgreedError : public ml::UserError {
 public:
  using ml::UserError::UserError;
};

// Several workers agree before training: every worker's error (the project, the data, the
// store...) is gathered, and if any failed all stop with the same message, printed once.
void agree(ml::WorkerGroup& group, const std::string& mine, const std::string& what) {
  const auto all = group.allGather(mine, what);
  std::string msg;
  for (size_t w = 0; w < all.size(); ++w)
    if (!all[w].empty()) msg += (msg.empty() ? "" : "; ") + workerOnHost(group, static_cast<int>(w)) + ": " + all[w];
  if (!msg.empty()) throw AgreedError(msg);
}

int exitCodeFor(const ml::RunFinished& f) {
  switch (f.status) {
    case ml::RunStatus::Finished: return 0;
    case ml::RunStatus::Cancelled: return 130;
    default: return 1;
  }
}

int trainOne(TrainArgs& a, ml::MpiWorkers* group);

int train(TrainArgs& a) {
  const bool underMpi = ml::launchedByMpi();
  // The project may ask for several workers (distribute.workers); --workers overrides it.
  int want = a.workers;
  if (want == 0 && !a.resume && !a.project.empty() && !underMpi) {
    try {
      want = ml::Project::load(a.project).distribute.workers;
    } catch (const ml::UserError&) {
      want = 1;  // trainOne reports the project's error
    }
  }
  // A resumed run goes on with the workers it had: this command again under mpirun.
  if (want == 0 && a.resume && !underMpi) {
    try {
      want = ml::RunStore::open(a.rec.storePath()).loadRun(*a.resume).workers;
    } catch (const ml::UserError&) {
      want = 1;  // trainOne reports the store's or the run's error
    }
  }
  if (want > 1 && !underMpi)
    return relaunchUnderMpirun(want, {a.hostfile, a.workerTimeout, a.rec.noRecord ? std::string() : a.rec.storePath(), a.resume});
  if (!underMpi) return trainOne(a, nullptr);
  std::unique_ptr<ml::MpiWorkers> group;
  try {
    group = ml::startMpiWorkers(a.workerTimeout);
  } catch (const ml::UserError& e) {
    // Every worker fails alike here (no MPI to agree through): the first prints it, and tells
    // --workers, which reads its status.
    const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
    if (rank && std::string(rank) != "0") return 2;
    std::fprintf(stderr, "error: %s\n", e.what());
    reportWorkersStatus(2);
    return 2;
  }
  if (a.workers > 1 && group->size() != a.workers)
    throw ml::UserError("--workers " + std::to_string(a.workers) + " but mpirun started " + std::to_string(group->size()) +
                        ": give one or the other");
  if (group->size() == 1) {
    const int rc = trainOne(a, nullptr);
    reportWorkersStatus(rc);
    group->finish();
    return rc;
  }
  const bool lead = group->rank() == 0;
  int rc = 1;
  try {
    rc = trainOne(a, group.get());
  } catch (const AgreedError& e) {
    // Start-up errors are agreed on, so every worker throws the same one: worker 1 prints it.
    if (lead) std::fprintf(stderr, "error: %s\n", e.what());
    if (lead) reportWorkersStatus(2);
    group->finish();
    return 2;
  } catch (const std::exception& e) {
    // This worker alone: say which, then stop the others (they may be waiting for it).
    std::fprintf(stderr, "error: %s%s\n", lead ? "" : (workerOnHost(*group, group->rank()) + ": ").c_str(), e.what());
    rc = dynamic_cast<const ml::UserError*>(&e) && !dynamic_cast<const ml::WorkerLost*>(&e) ? 2 : 1;
    if (lead) reportWorkersStatus(rc);
    if (!lead) std::this_thread::sleep_for(std::chrono::seconds(5));  // worker 1 records first
    group->abortAll(rc);
  }
  if (lead) reportWorkersStatus(rc);
  if (!a.abortAfter) {
    group->finish();
    return rc;
  }
  // The run failed: worker 1 has recorded it; stop any worker still waiting in a collective.
  // The others give worker 1 time to record before they go.
  if (group->rank() != 0) std::this_thread::sleep_for(std::chrono::seconds(5));
  group->abortAll(rc);
  return rc;  // not reached
}

int trainOne(TrainArgs& a, ml::MpiWorkers* group) {
  ml::Project p;
  ml::TrainerOptions opts;
  std::string source = a.project;
  const bool lead = !group || group->rank() == 0;  // prints and records
  if (!lead) {
    a.quiet = true;
    a.rec.noRecord = true;
    a.saveWeights.clear();
    a.saveInitialWeights.clear();
    a.report.clear();
  }
  if (a.resume) {
    if (!a.project.empty()) throw ml::UserError("--resume goes on with the run's stored project: give no project file");
    refuseTrainingOverrides(a.o);
    // Worker 1 (or the one process) finds the run; several workers receive it from worker 1.
    auto find = [&a] {
      if (a.rec.noRecord) throw ml::UserError("--resume continues a stored run: it cannot be used with --no-record");
      auto store = ml::RunStore::open(a.rec.storePath());
      return ml::findResume(store, *a.resume);
    };
    ml::ResumeSource src;
    if (group) {
      try {
        src = resumeAcrossWorkers(*group, find);
      } catch (const ml::UserError& e) {
        throw AgreedError(e.what());
      }
    } else {
      src = find();
      src.project.distribute.workers = 1;  // a run of several workers resumed in one process (--workers 1)
    }
    p = src.project;
    source = "run " + std::to_string(*a.resume);
    opts.resume = std::move(src.checkpoint);
    if (!a.quiet) std::printf("resuming run %lld from %s\n", static_cast<long long>(*a.resume), src.checkpointPath.c_str());
  } else if (a.project.empty()) {
    throw ml::UserError("give a project file (e.g. projects/spirals.json), or --resume RUN_ID to continue a stored run");
  }
  std::shared_ptr<const ml::DataSplit> data;
  std::string loadError;
  try {
    if (!a.resume) p = ml::Project::load(a.project);
    a.o.apply(p);
    data = std::make_shared<const ml::DataSplit>(ml::loadData(p.data));
  } catch (const ml::UserError& e) {
    if (!group) throw;
    loadError = e.what();
  }
  if (group) {
    agree(*group, loadError, "the start-up check of the project and data");
    // Every worker must run the same Mirrorlab and train the same project on the same data.
    try {
      checkWorkersAgree(*group, p, static_cast<int64_t>(data->train.size), a.project);
    } catch (const ml::UserError& e) {
      throw AgreedError(e.what());
    }
    const int asked = a.workers > 0 ? a.workers : p.distribute.workers;
    if (asked > 1 && asked != group->size())
      throw AgreedError("the project asks for " + std::to_string(asked) + " workers (" +
                        (a.workers > 0 ? std::string("--workers") : ml::fieldInWords("distribute.workers")) +
                        ") but mpirun started " + std::to_string(group->size()) + ": give mpirun -np " + std::to_string(asked) +
                        " or change the project");
    p.distribute.workers = group->size();  // what runs, as stored with the run
    opts.workers = group;
  }
  ml::TelemetryHub hub;
  opts.maxSteps = a.steps.value_or(0);
  opts.runName = a.name;
  opts.checkpointStore = lead ? a.rec.storePath() : std::string();  // worker 1 records, and checkpoints
  RunRecording* recordingPtr = nullptr;
  opts.runId = [&recordingPtr]() -> std::optional<int64_t> {
    return recordingPtr ? recordingPtr->waitForRunId(std::chrono::seconds(10)) : std::nullopt;
  };
  // Each step and checkpoint waits for the store (Trainer.h); a store that stays silent for a
  // minute fails the checkpoint rather than leave one ahead of the stored steps.
  opts.awaitRecorded = [&recordingPtr](int64_t step) {
    return !recordingPtr || recordingPtr->waitForStep(step, std::chrono::seconds(60));
  };
  // The pre-flight checks (loss vs labels, shapes, memory) name the project file they concern.
  std::unique_ptr<ml::Trainer> trainer;
  std::unique_ptr<RunRecording> recording;
  std::string startError;
  try {
    try {
      trainer = std::make_unique<ml::Trainer>(p, data, hub, opts);
    } catch (const ml::UserError& e) {
      throw ml::UserError(source + ": " + e.what());
    }
    // Before training: an output that cannot be written fails now, not after an hour.
    if (!a.saveWeights.empty()) ml::checkCanWrite(a.saveWeights, "weights file");
    if (!a.report.empty()) ml::checkCanWrite(a.report, "report file");
    // A bad store fails now; a store that fails during the run stops it (nothing unrecorded goes on).
    recording = RunRecording::open(a.rec, hub, [&t = *trainer](const std::string& why) { t.abort(why); });
  } catch (const ml::UserError& e) {
    if (!group) throw;
    startError = e.what();
  }
  if (group) agree(*group, startError, "the start-up check of the trainers and the run store");
  recordingPtr = recording.get();
  if (!a.saveInitialWeights.empty()) {
    const uint64_t sum = writeWeights(trainer->strategy().model(0), a.saveInitialWeights);
    if (!a.quiet)
      std::printf("initial weights saved to %s (checksum %016llx)\n", a.saveInitialWeights.c_str(),
                  static_cast<unsigned long long>(sum));
  }
  std::vector<ml::EpochEvent> epochs;
  std::vector<ml::StepEvent> steps;
  const ml::RunFinished fin =
      runTraining(*trainer, hub, a.quiet, recording.get(), &epochs, a.report.empty() ? nullptr : &steps, !lead);
  if (group && fin.status == ml::RunStatus::Failed) a.abortAfter = true;
  const bool recorded = !recording || recording->report();
  if (!a.saveWeights.empty() && fin.status == ml::RunStatus::Finished) {
    const uint64_t sum = writeWeights(trainer->strategy().model(0), a.saveWeights);
    if (!a.quiet)
      std::printf("weights saved to %s (checksum %016llx)\n", a.saveWeights.c_str(), static_cast<unsigned long long>(sum));
    if (recording && recorded) recording->addArtifact(a.saveWeights, "weights", sum);
  }
  if (recording && recorded && !a.quiet && recording->runId())
    std::printf("recorded as run %lld in %s\n", static_cast<long long>(*recording->runId()), recording->path().c_str());
  if (!a.report.empty() && opts.resume) prependStoredRows(a.rec.storePath(), *opts.resume, epochs, steps);
  if (!a.report.empty()) {
    nlohmann::json r{{"status", ml::toString(fin.status)},
                     {"seconds", fin.seconds},
                     {"steps", fin.steps},
                     {"config", trainer->effectiveConfig()},
                     {"epochs", nlohmann::json::array()}};
    if (!recorded) r["recording_error"] = recording->error();
    for (const auto& e : epochs) {
      nlohmann::json je{{"epoch", e.epoch},         {"seconds", e.seconds},    {"samples_per_sec", e.samplesPerSec},
                        {"loss", e.trainLoss},      {"metric", e.trainMetric}, {"allreduce_share", e.allreduceShare},
                        {"wait_share", e.waitShare}};
      if (e.valLoss) je["val_loss"] = *e.valLoss;
      if (e.valMetric) je["val_metric"] = *e.valMetric;
      r["epochs"].push_back(je);
    }
    // Per step: the global batch's mean loss and the learning rate used (to compare with other programs).
    nlohmann::json sl = nlohmann::json::array(), lr = nlohmann::json::array();
    for (const auto& st : steps) {
      sl.push_back(st.loss);
      lr.push_back(st.lr);
    }
    r["step_loss"] = sl;
    r["step_lr"] = lr;
    ml::writeFileAtomically(a.report, r.dump(2) + "\n", "report file");
  }
  if (!recorded) return 1;
  return exitCodeFor(fin);
}

struct ScaleArgs {
  std::string project, devices = "cpu:1,2,4", keep = "global";
  int64_t steps = 200;
  Overrides o;
  RecordingArgs rec;
};

int scale(ScaleArgs& a) {
  ml::Project base = ml::Project::load(a.project);
  a.o.apply(base);
  auto data = std::make_shared<const ml::DataSplit>(ml::loadData(base.data));
  ml::ScalingOptions so;
  so.devices = a.devices;
  so.keep = ml::parseBatchPolicy(a.keep);
  so.steps = a.steps;
  so.storePath = a.rec.storePath();
  ml::ScalingExperiment experiment(base, data, so);
  std::printf("scaling %s over %s for %lld steps each, keeping the %s batch\n", base.name.c_str(), a.devices.c_str(),
              static_cast<long long>(a.steps), a.keep == "global" ? "global" : "per-device");
  experiment.onRowFinished = [](size_t, const ml::ScalingRow& r) {
    std::printf("  %s done%s\n", r.devices.c_str(), r.runId ? (" (run " + std::to_string(*r.runId) + ")").c_str() : "");
    std::fflush(stdout);
  };
  gInterrupted.store(false);
  auto old = std::signal(SIGINT, onSigint);
  ml::ScalingResult result;
  std::atomic<bool> done{false};
  std::exception_ptr failure;
  std::thread worker([&] {
    try {
      result = experiment.run();
    } catch (...) {
      failure = std::current_exception();
    }
    done.store(true);
  });
  bool cancelSent = false;
  while (!done.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (gInterrupted.load() && !cancelSent) {
      experiment.requestCancel();
      cancelSent = true;
    }
  }
  worker.join();
  std::signal(SIGINT, old);
  if (failure) std::rethrow_exception(failure);
  const auto& rows = result.rows;
  if (!rows.empty()) {
    std::printf("\n%-10s %8s %10s %10s %12s %9s %11s %10s\n", "devices", "global", "per-rep.", "step ms", "samples/s", "speed-up",
                "efficiency", "sync share");
    for (const auto& r : rows)
      std::printf("%-10s %8lld %10lld %10.2f %12.0f %8.2fx %10.0f%% %9.1f%%\n", r.devices.c_str(),
                  static_cast<long long>(r.globalBatch), static_cast<long long>(r.perReplicaBatch), r.stepSeconds * 1e3,
                  r.samplesPerSecond, r.speedup, r.efficiency * 100, r.syncShare * 100);
    std::printf("(step time: median over %lld steps after warm-up; samples/s = global batch / step time)\n%s\n",
                static_cast<long long>(a.steps), result.explanation.c_str());
  }
  if (!result.completed) {
    std::fprintf(stderr, "error: the scaling experiment stopped: %s\n", result.message.c_str());
    return cancelSent ? 130 : 1;
  }
  return 0;
}

}  // namespace

namespace {
std::vector<std::string> gCommandLine;
}

const std::vector<std::string>& commandLine() { return gCommandLine; }
void setCommandLine(int argc, char** argv) { gCommandLine.assign(argv, argv + argc); }

int guarded(const std::function<int()>& f) {
  try {
    return f();
  } catch (const ml::UserError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

void addTrainCommand(CLI::App& app, int& exitCode) {
  auto a = std::make_shared<TrainArgs>();
  auto* c = app.add_subcommand("train", "Train a project's model with the mirrored strategy and record the run");
  c->add_option("project", a->project, "Project file (JSON), e.g. projects/fashion-mlp.json");
  c->add_option("--resume", a->resume,
                "Continue stored run RUN_ID from its newest checkpoint: same run, its curves go on, and the final weights are "
                "bit-identical to an uninterrupted run (on another device count: equal to float rounding, same global batch)")
      ->check(positiveWhole());
  a->o.addTo(c, true);
  c->add_option("--steps", a->steps, "Stop after N optimizer steps")->check(positiveWhole());
  c->add_flag("--quiet", a->quiet, "Print only errors");
  c->add_option("--save-weights", a->saveWeights,
                "Write the trained weights to PATH: .npz gives NumPy arrays named like dense_1/kernel (in, out) and "
                "dense_1/bias, any other name Mirrorlab's .mlw");
  c->add_option("--save-initial-weights", a->saveInitialWeights,
                "Write the weights before the first step to PATH (.npz or .mlw, as --save-weights): start a generated "
                "program from them with --weights PATH.npz");
  c->add_option("--report", a->report,
                "Write a JSON report (per-epoch seconds, samples/s, sync shares; per-step loss and learning rate) to PATH");
  c->add_option("--name", a->name, "Name of the recorded run (default: the project's name)");
  c->add_option("--workers", a->workers,
                "Train as W workers (processes) under mpirun, each with the devices of --devices as its local replicas: "
                "one run of W x N replicas (same as mpirun -np W mirrorlab-cli train ...)")
      ->check(CLI::Range(1, 1024));
  c->add_option("--hostfile", a->hostfile,
                "With --workers: the hosts to start the workers on (Open MPI's hostfile: `node1 slots=1` a line); each is "
                "checked first (reachable with ssh or OMPI_MCA_plm_rsh_agent, the same Mirrorlab)");
  c->add_option("--worker-timeout", a->workerTimeout,
                "Several workers: seconds a worker waits for the others in a collective before it names the one that did not "
                "come and stops the run")
      ->check(positiveFinite())
      ->capture_default_str();
  a->rec.addTo(c);
  c->callback([a, &exitCode] { exitCode = guarded([&] { return train(*a); }); });
}

void addScaleCommand(CLI::App& app, int& exitCode) {
  auto a = std::make_shared<ScaleArgs>();
  auto* c = app.add_subcommand("scale", "Run the same model on 1, 2, 4... devices and print speed-up and efficiency");
  c->add_option("project", a->project, "Project file (JSON)")->required();
  c->add_option("--devices", a->devices, "Device counts to compare, e.g. cpu:1,2,4")->capture_default_str();
  c->add_option("--steps", a->steps, "Optimizer steps per device count")->capture_default_str()->check(positiveWhole());
  c->add_option("--keep", a->keep, "Batch policy: keep the global batch or the per-device batch")
      ->check(CLI::IsMember({"global", "per-device"}))
      ->capture_default_str();
  Overrides& o = a->o;
  c->add_option("--batch-size", o.batchSize, "Global batch of the first row")->check(positiveWhole());
  c->add_option("--lr", o.lr, "Base learning rate")->check(positiveFinite());
  c->add_option("--allreduce", o.allreduce, "ring or reduce-to-one")->check(CLI::IsMember({"ring", "reduce-to-one"}));
  c->add_option("--data-path", o.dataPath, "Folder or file of the data set");
  a->rec.addTo(c);
  c->callback([a, &exitCode] { exitCode = guarded([&] { return scale(*a); }); });
}

}  // namespace mlcli
