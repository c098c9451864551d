// `train`: runs the mirrored training loop, one process or each worker under mpirun, with live
// terminal output.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "AtomicFile.h"
#include "Commands.h"
#include "Error.h"
#include "Field.h"
#include "Mpirun.h"
#include "Overrides.h"
#include "Progress.h"
#include "RunRecording.h"
#include "WorkerHosts.h"
#include "data/Dataset.h"
#include "distribute/MpiWorkers.h"
#include "export/ExportJob.h"
#include "export/WeightsNpz.h"
#include "project/WeightsFile.h"
#include "store/RunStore.h"
#include "telemetry/EventJson.h"
#include "train/RecordedRun.h"
#include "train/Resume.h"

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
  std::string events;        // --events PATH: every telemetry event, one JSON line each (worker 1)
  bool keepWeights = false;  // --keep-weights: the final weights kept with the stored run
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
void prependStoredRows(const std::string& storePath, int64_t runId, const ml::TrainPosition& from,
                       std::vector<ml::EpochEvent>& epochs, std::vector<ml::StepEvent>& steps) {
  auto store = ml::RunStore::open(storePath);
  std::vector<ml::StepEvent> before;
  for (auto& st : store.loadCurves(runId))
    if (st.step <= from.step) before.push_back(std::move(st));
  steps.insert(steps.begin(), before.begin(), before.end());
  std::vector<ml::EpochEvent> earlier;
  for (auto& e : store.loadRun(runId).epochs)
    if (e.epoch < from.epoch) earlier.push_back(std::move(e));
  epochs.insert(epochs.begin(), earlier.begin(), earlier.end());
}

// Runs one training to the end with progress on stdout (and every event into `events` when
// given); returns its result. With several workers (silent: not worker 1, which alone prints and
// records) a signal means mpirun is stopping the job (Ctrl-C, or a worker died): the waits between
// workers end at once and worker 1 records the run failed with the reason before mpirun's SIGKILL
// a second later.
ml::RecordedRun::Result runTraining(ml::RecordedRun& run, bool quiet, std::vector<ml::EpochEvent>* epochs,
                                    std::vector<ml::StepEvent>* steps, bool silent, std::FILE* events) {
  auto progressCh = run.subscribe(1 << 16);
  ml::Trainer& trainer = run.trainer();
  const std::string metric = trainer.project().training.metrics.empty() ? "accuracy" : trainer.project().training.metrics.front();
  Progress progress(stdout, quiet, metric == "acc" ? "accuracy" : metric);
  gInterrupted.store(false);
  auto old = std::signal(SIGINT, onSigint);
  auto oldTerm = std::signal(SIGTERM, trainer.strategy().workers() ? onSigint : SIG_DFL);
  ml::RecordedRun::Result result;
  std::thread worker([&] { result = run.run(); });
  std::vector<ml::Event> batch;
  bool cancelSent = false, abandoned = false;
  ml::RecordedRun::Result gaveUp;
  while (true) {
    const bool open = progressCh->waitFor(std::chrono::milliseconds(50));
    // A hang the watchdog could not release: record the run failed with its diagnosis and leave
    // (exit 1 below) rather than wait for a thread that will never return.
    if (const std::string why = run.stuckFor(5.0); !why.empty() && !abandoned) {
      gaveUp = run.abandon(why + " (the stuck replica did not return; the process exits)");
      abandoned = true;
    }
    if (gInterrupted.load() && !cancelSent) {
      run.requestCancel();
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
      if (events) std::fprintf(events, "%s\n", ml::eventToJson(e).dump().c_str());
      if (epochs)
        if (const auto* ep = std::get_if<ml::EpochEvent>(&e)) epochs->push_back(*ep);
      if (steps)
        if (const auto* st = std::get_if<ml::StepEvent>(&e)) steps->push_back(*st);
    }
    if (events && !batch.empty()) std::fflush(events);
    if (!open) break;
  }
  if (abandoned) {  // the run is recorded failed; its thread never returns
    worker.detach();
    if (events && gaveUp.runId) std::fprintf(events, "%s\n", ml::recordedRunLine(*gaveUp.runId).dump().c_str());
    if (events) std::fflush(events);
    std::fflush(stdout);
    std::_Exit(1);
  }
  worker.join();
  std::signal(SIGINT, old);
  std::signal(SIGTERM, oldTerm);
  return result;
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

// --events PATH: worker 1's telemetry, one JSON object a line as it happens (for the studio, which
// follows a multi-worker run it started this way), ended by a line naming the stored run.
class EventsFile {
 public:
  void open(const std::string& path) {
    // A reader that went away (a pipe: the studio closed) costs the events, never the run.
    std::signal(SIGPIPE, SIG_IGN);
    f_.reset(std::fopen(path.c_str(), "w"));
    if (!f_) throw ml::UserError("cannot write the events file " + path + ": " + std::strerror(errno));
  }
  std::FILE* file() const { return f_.get(); }
  void recorded(int64_t runId) {
    if (!f_) return;
    std::fprintf(f_.get(), "%s\n", ml::recordedRunLine(runId).dump().c_str());
    std::fflush(f_.get());
  }

 private:
  struct Close {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, Close> f_;
};

int trainOne(TrainArgs& a, ml::MpiWorkers* group);

// --resume: the stored run's project and its newest checkpoint, checked for what may not change.
// Worker 1 (or the one process) finds the run; several workers receive it from worker 1.
ml::Project resumeSource(const TrainArgs& a, ml::TrainerOptions& opts, ml::WorkerGroup* group) {
  if (!a.project.empty()) throw ml::UserError("--resume goes on with the run's stored project: give no project file");
  refuseTrainingOverrides(a.o);
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
  opts.resume = std::move(src.checkpoint);
  if (!a.quiet) std::printf("resuming run %lld from %s\n", static_cast<long long>(*a.resume), src.checkpointPath.c_str());
  return src.project;
}

// Several workers must run the same Mirrorlab and train the same project on the same data, and as
// many workers as were asked for must have started.
void checkWorkersMatch(ml::WorkerGroup& group, const ml::Project& p, const ml::DataSplit& data, const TrainArgs& a) {
  try {
    checkWorkersAgree(group, p, static_cast<int64_t>(data.train.size), a.project);
  } catch (const ml::UserError& e) {
    throw AgreedError(e.what());
  }
  const int asked = a.workers > 0 ? a.workers : p.distribute.workers;
  if (asked > 1 && asked != group.size())
    throw AgreedError("the project asks for " + std::to_string(asked) + " workers (" +
                      (a.workers > 0 ? std::string("--workers") : ml::fieldInWords("distribute.workers")) +
                      ") but mpirun started " + std::to_string(group.size()) + ": give mpirun -np " + std::to_string(asked) +
                      " or change the project");
}

// After the run: the weights written (--save-weights) or kept with the stored run (--keep-weights),
// and where it was recorded (runId 0: not in the store).
void keepOutputs(const TrainArgs& a, ml::RecordedRun& run, const ml::RunFinished& fin, int64_t runId, EventsFile& events) {
  const ml::Sequential& model = run.trainer().strategy().model(0);
  if (!a.saveWeights.empty() && fin.status == ml::RunStatus::Finished) {
    const uint64_t sum = writeWeights(model, a.saveWeights);
    if (!a.quiet)
      std::printf("weights saved to %s (checksum %016llx)\n", a.saveWeights.c_str(), static_cast<unsigned long long>(sum));
    if (runId > 0) addRunArtifact(run.storePath(), runId, a.saveWeights, "weights", sum);
  }
  // Kept beside the store, as the studio keeps every finished run's: the Runs screen exports them.
  if (a.keepWeights && runId > 0 && fin.status == ml::RunStatus::Finished) ml::keepRunWeights(run.storePath(), runId, model);
  if (runId > 0 && !a.quiet) std::printf("recorded as run %lld in %s\n", static_cast<long long>(runId), run.storePath().c_str());
  if (runId > 0) events.recorded(runId);
}

// --report PATH: per-epoch figures and the per-step loss and learning rate, as JSON.
void writeReport(const std::string& path, const ml::RecordedRun::Result& result, bool recorded, const ml::Trainer& trainer,
                 const std::vector<ml::EpochEvent>& epochs, const std::vector<ml::StepEvent>& steps) {
  const ml::RunFinished& fin = result.finished;
  nlohmann::json r{{"status", ml::toString(fin.status)},
                   {"seconds", fin.seconds},
                   {"steps", fin.steps},
                   {"config", trainer.effectiveConfig()},
                   {"epochs", nlohmann::json::array()}};
  if (!recorded) r["recording_error"] = result.recordingError;
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
  ml::writeFileAtomically(path, r.dump(2) + "\n", "report file");
}

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

// The train command of one process (alone, or one worker under mpirun), in the order it goes:
// the project and data, the workers' agreement, the RecordedRun, training, the outputs. Over 60
// lines: each step is a few lines, and splitting them further would only pass the same state on.
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
    a.events.clear();
  }
  if (a.resume) {
    source = "run " + std::to_string(*a.resume);
    p = resumeSource(a, opts, group);
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
    checkWorkersMatch(*group, p, *data, a);
    p.distribute.workers = group->size();  // what runs, as stored with the run
    opts.workers = group;
  }
  // --report of a resumed run: where this process took it up.
  std::optional<std::pair<int64_t, ml::TrainPosition>> resumedFrom;
  if (opts.resume) resumedFrom.emplace(opts.resume->runId, opts.resume->at);
  ml::RecordedRunOptions ro;
  ro.trainer = std::move(opts);
  ro.trainer.maxSteps = a.steps.value_or(0);
  ro.trainer.runName = a.name;
  ro.storePath = a.rec.storePath();
  ro.source = source;  // the pre-flight checks (loss vs labels, shapes, memory) name the project file
  std::unique_ptr<ml::RecordedRun> run;
  EventsFile events;
  std::string startError;
  try {
    // A bad project or store fails now; a store that fails during the run stops it.
    run = std::make_unique<ml::RecordedRun>(p, data, std::move(ro));
    // Before training: an output that cannot be written fails now, not after an hour.
    if (!a.saveWeights.empty()) ml::checkCanWrite(a.saveWeights, "weights file");
    if (!a.report.empty()) ml::checkCanWrite(a.report, "report file");
    if (!a.events.empty()) events.open(a.events);
  } catch (const ml::UserError& e) {
    if (!group) throw;
    startError = e.what();
  }
  if (group) agree(*group, startError, "the start-up check of the trainers and the run store");
  ml::Trainer& trainer = run->trainer();
  if (!a.saveInitialWeights.empty()) {
    const uint64_t sum = writeWeights(trainer.strategy().model(0), a.saveInitialWeights);
    if (!a.quiet)
      std::printf("initial weights saved to %s (checksum %016llx)\n", a.saveInitialWeights.c_str(),
                  static_cast<unsigned long long>(sum));
  }
  std::vector<ml::EpochEvent> epochs;
  std::vector<ml::StepEvent> steps;
  const ml::RecordedRun::Result result =
      runTraining(*run, a.quiet, &epochs, a.report.empty() ? nullptr : &steps, !lead, events.file());
  const ml::RunFinished& fin = result.finished;
  if (group && fin.status == ml::RunStatus::Failed) a.abortAfter = true;
  const bool recorded = !run->recorded() || reportRecording(result, run->storePath());
  keepOutputs(a, *run, fin, recorded && result.runId ? *result.runId : 0, events);
  if (!a.report.empty() && resumedFrom)
    prependStoredRows(run->storePath(), resumedFrom->first, resumedFrom->second, epochs, steps);
  if (!a.report.empty()) writeReport(a.report, result, recorded, trainer, epochs, steps);
  if (!recorded) return 1;
  return exitCodeFor(fin);
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
  c->add_flag("--keep-weights", a->keepWeights,
              "Keep the final weights of a finished run with the recorded run (beside the run store), as the studio does, "
              "so that export --run ID and the studio's Runs screen can export it");
  c->add_option("--events", a->events,
                "Write every telemetry event to PATH as it happens, one JSON object a line, then a line naming the recorded "
                "run (with several workers, worker 1's); the studio follows the multi-worker runs it starts this way");
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

}  // namespace mlcli
