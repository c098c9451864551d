// Learn mode's commands: thin wrappers over core/learn (lessons, generated code, trace export,
// the alpha-beta what-if). What the what-if prints is modelled and says so on every row.
#include "LearnCommands.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "AtomicFile.h"
#include "Commands.h"
#include "Error.h"
#include "JsonFile.h"
#include "backend/DeviceList.h"
#include "data/Dataset.h"
#include "distribute/AllReduce.h"
#include "learn/CodeGen.h"
#include "learn/CostModel.h"
#include "learn/Lesson.h"
#include "learn/LessonRunner.h"
#include "learn/LinkCalibration.h"
#include "learn/TraceExport.h"
#include "nn/Sequential.h"
#include "project/Settings.h"
#include "store/RunStore.h"
#include "train/RecordedRun.h"

namespace mlcli {
namespace {

namespace fs = std::filesystem;

struct LearnArgs {
  std::string dir;            // lesson folder
  std::string lesson;         // id, order number or file
  std::optional<int> answer;  // 1-based, as printed
  int64_t steps = 0;          // cap per experiment
  std::string db;             // record the experiments there
  bool record = false;        // record into the default store
  // export-code
  std::string project, framework = "tf", output;
  // trace
  int64_t runId = 0;
  int64_t fromStep = 1, toStep = std::numeric_limits<int64_t>::max();
  // what-if
  std::string source, link = "pcie4", devices = "1,2,4,8", algo = "ring";
  double overlap = 0.0;
  int workers = 0;  // what-if: 0 = the run's (a stored multi-worker run) or 1
  std::string crossLink = "100gbe";
  int measuredWorkers = 1;      // what-if from a stored run: its workers
  double measuredNetwork = -1;  // and its median cross-worker time per step (seconds), when it had several
  std::optional<int64_t> batch;
  bool perDevice = false;
  int64_t profileSteps = 20;
  std::optional<std::string> allreduceDtype;  // what-if: the gradients' format (default: the project's)
};

bool allDigits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// ---- learn list / run ---------------------------------------------------------------------------

std::string lessonsDir(const LearnArgs& a) { return a.dir.empty() ? ml::defaultLessonsDir() : a.dir; }

ml::Lesson findLesson(const LearnArgs& a) {
  std::error_code ec;  // a name too long is "not a file", not an exception
  if (a.lesson.size() > 5 && a.lesson.ends_with(".json") && fs::exists(a.lesson, ec)) {
    const fs::path dir = fs::path(a.lesson).parent_path();
    return ml::loadLesson(a.lesson, (dir.empty() ? fs::path(".") : dir).parent_path().string());
  }
  // A broken lesson elsewhere in the folder does not stop this one; it is named when this one is not found.
  const auto folder = ml::scanLessons(lessonsDir(a));
  const auto& lessons = folder.lessons;
  std::string ids;
  for (size_t i = 0; i < lessons.size(); ++i) {
    if (lessons[i].id == a.lesson || (allDigits(a.lesson) && std::stoul(a.lesson) == i + 1)) return lessons[i];
    ids += (ids.empty() ? "" : ", ") + lessons[i].id;
  }
  std::string broken;
  for (const auto& p : folder.problems) broken += "; a lesson file could not be read: " + p;
  throw ml::UserError("no lesson '" + a.lesson + "' in " + lessonsDir(a) + " (lessons: " + ids +
                      "; or give its number from `learn list`)" + broken);
}

// Every lesson that loads is listed; each broken file is named on stderr, and the exit status says so.
int learnList(const LearnArgs& a) {
  const auto folder = ml::scanLessons(lessonsDir(a));
  const auto& lessons = folder.lessons;
  for (size_t i = 0; i < lessons.size(); ++i) {
    const auto& l = lessons[i];
    std::printf("%2zu  %-28s %s\n    %s\n", i + 1, l.id.c_str(), l.title.c_str(), l.idea.c_str());
  }
  if (lessons.empty() && folder.problems.empty()) std::printf("no lessons in %s\n", lessonsDir(a).c_str());
  std::fflush(stdout);
  for (const auto& p : folder.problems) std::fprintf(stderr, "error: lesson not listed: %s\n", p.c_str());
  return folder.problems.empty() ? kExitDone : kExitRefused;
}

int askQuestion(const ml::Lesson& l, const std::optional<int>& given) {
  std::printf("\nQuestion: %s\n", l.question.text.c_str());
  for (size_t i = 0; i < l.question.choices.size(); ++i) std::printf("  %zu) %s\n", i + 1, l.question.choices[i].c_str());
  const int k = static_cast<int>(l.question.choices.size());
  if (given) {
    if (*given < 1 || *given > k)
      throw ml::UserError("--answer must be 1.." + std::to_string(k) + ", got " + std::to_string(*given));
    std::printf("Your answer: %d\n", *given);
    return *given - 1;
  }
  std::string line;
  while (true) {
    std::printf("Commit to an answer (1-%d): ", k);
    std::fflush(stdout);
    if (!std::getline(std::cin, line)) throw ml::UserError("no answer on standard input: type a number or pass --answer N");
    if (allDigits(line) && std::stoi(line) >= 1 && std::stoi(line) <= k) return std::stoi(line) - 1;
  }
}

int learnRun(const LearnArgs& a) {
  const ml::Lesson lesson = findLesson(a);
  std::printf("%s\n%s\n", lesson.title.c_str(), std::string(lesson.title.size(), '=').c_str());
  std::printf("%s\n", lesson.idea.c_str());
  const int choice = askQuestion(lesson, a.answer);

  ml::LessonRunnerOptions opts;
  opts.maxSteps = a.steps;
  if (!a.db.empty())
    opts.storePath = a.db;
  else if (a.record)
    opts.storePath = ml::defaultStorePath();
  ml::LessonRunner runner(lesson, opts);
  runner.onExperimentStarted = [&](size_t i, const ml::ExperimentOutcome& o) {
    std::printf("\n[%zu/%zu] %s: %s\n", i + 1, lesson.experiments.size(), o.experiment.title.c_str(), o.plan.sentence().c_str());
    std::fflush(stdout);
  };
  const ml::LessonOutcome out = runner.run();
  for (const auto& e : out.experiments) {
    std::printf("  %-36s %-9s %5lld steps  final accuracy %s  %s samples/s  sync %s  replicas in sync: %s%s\n",
                e.experiment.title.c_str(), ml::toString(e.finished.status), static_cast<long long>(e.finished.steps),
                out.figures.at("final_acc_" + e.experiment.label).text.c_str(),
                out.figures.at("samples_per_sec_" + e.experiment.label).text.c_str(),
                out.figures.at("sync_share_" + e.experiment.label).text.c_str(),
                out.figures.at("checksums_equal_" + e.experiment.label).text.c_str(),
                e.runId ? (" (run " + std::to_string(*e.runId) + ")").c_str() : "");
  }
  if (!out.completed) std::printf("\nnote: %s; the figures below are from what ran\n", out.message.c_str());
  const bool right = runner.isCorrect(choice);
  std::printf("\n%s The answer is %d) %s\n", right ? "Correct." : "Not quite.", lesson.question.correct + 1,
              lesson.question.choices[static_cast<size_t>(lesson.question.correct)].c_str());
  if (!lesson.question.explanation.empty()) std::printf("%s\n", lesson.question.explanation.c_str());
  std::printf("\n%s\n", out.reveal.c_str());
  return out.completed ? 0 : 1;
}

// ---- export-code ---------------------------------------------------------------------------------

int exportCode(const LearnArgs& a) {
  const ml::Project p = ml::Project::load(a.project);
  const ml::Framework f = ml::parseFramework(a.framework);
  const std::string code = ml::generateProgram(p, f);
  if (a.output.empty() || a.output == "-") {
    if (std::fwrite(code.data(), 1, code.size(), stdout) != code.size() || std::fflush(stdout) != 0)
      throw ml::UserError("writing the program to standard output failed");
    return 0;
  }
  ml::writeFileAtomically(a.output, code, "program file");
  std::fprintf(stderr, "wrote %s (%s program for '%s')\n", a.output.c_str(),
               f == ml::Framework::TensorFlow ? "TensorFlow/Keras" : "PyTorch DDP", p.name.c_str());
  return 0;
}

// ---- trace ---------------------------------------------------------------------------------------

int trace(const LearnArgs& a) {
  ml::RunStore store = ml::RunStore::open(a.db.empty() ? ml::defaultStorePath() : a.db);
  const auto t = ml::exportRunTrace(store, a.runId, a.output, a.fromStep, a.toStep);
  std::printf("wrote %s: %zu steps, %d device track(s), %zu spans (open it in https://ui.perfetto.dev or chrome://tracing)\n",
              a.output.c_str(), t.steps, t.tracks, t.spans);
  return 0;
}

// ---- what-if -------------------------------------------------------------------------------------

std::vector<int> parseCounts(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!allDigits(item) || item.size() > 5 || std::stoi(item) < 1)
      throw ml::UserError("--devices takes counts such as 1,2,4,8, got '" + s + "'");
    out.push_back(std::stoi(item));
  }
  if (out.empty()) throw ml::UserError("--devices takes counts such as 1,2,4,8");
  return out;
}

// The compute profile: from a stored run's steps, or from a short run of the project on one device.
ml::ComputeProfile profileFor(LearnArgs& a, ml::Project& project) {
  std::error_code ec;
  if (allDigits(a.source) && !fs::exists(a.source, ec)) {
    const int64_t id = std::stoll(a.source);
    ml::RunStore store = ml::RunStore::open(a.db.empty() ? ml::defaultStorePath() : a.db);
    const ml::RunDetail run = store.loadRun(id);
    project =
        ml::Project::fromJson(ml::parseJsonText(run.projectJson, "run " + std::to_string(id), "the stored project is damaged"),
                              "run " + std::to_string(id));
    const auto steps = store.loadSteps(id, 1, std::numeric_limits<int64_t>::max());
    const int64_t grad = ml::Sequential(project.model).paramCount() * 4;
    // A multi-worker run: how long its cross-worker hop took per step (the replica that carried it).
    const auto config = nlohmann::json::parse(run.configJson, nullptr, false);
    if (config.is_object() && config.value("workers", 1) > 1) {
      a.measuredWorkers = config.value("workers", 1);
      std::vector<double> per;
      for (const auto& st : steps) {
        double most = 0;
        for (const auto& r : st.replicas) most = std::max(most, r.phases.network);
        per.push_back(most);
      }
      if (!per.empty()) {
        std::sort(per.begin(), per.end());
        a.measuredNetwork = per[per.size() / 2];
      }
    }
    return ml::profileFromSteps(steps, grad,
                                "run " + std::to_string(id) + " (" + std::to_string(run.summary.replicas) + " replica(s))");
  }
  project = ml::Project::load(a.source);
  ml::Project one = project;
  one.distribute.devices = ml::parseDevices("cpu:1");
  auto data = std::make_shared<const ml::DataSplit>(ml::loadData(one.data));
  // A measuring run, not a recorded one: no store named, so it leaves no stored run.
  ml::RecordedRunOptions ro;
  const int64_t measured = std::max<int64_t>(2, a.profileSteps);
  ro.trainer.maxSteps = measured;
  ml::RecordedRun run(one, data, std::move(ro));
  auto ch = run.subscribe();
  std::fprintf(stderr, "measuring compute: %lld steps of '%s' on cpu:1...\n", static_cast<long long>(measured),
               project.name.c_str());
  const ml::RunFinished fin = run.run().finished;
  if (fin.status != ml::RunStatus::Finished)
    throw ml::UserError("the measuring run ended " + std::string(ml::toString(fin.status)) + ": " + fin.message);
  std::vector<ml::Event> events;
  ch->drain(events);
  std::vector<ml::StepEvent> steps;
  for (auto& e : events)
    if (auto* s = std::get_if<ml::StepEvent>(&e)) steps.push_back(std::move(*s));
  return ml::profileFromSteps(steps, run.trainer().strategy().model(0).paramCount() * 4,
                              std::to_string(steps.size()) + " steps of '" + project.name + "' on cpu:1");
}

// A preset by id, else a rate ("10gbit") as a link with the shipped calibration's overheads.
ml::Link crossLinkFor(const std::string& text) {
  for (const auto& l : ml::linkPresets())
    if (l.id == text) return l;
  try {
    return ml::calibratedLink(ml::parseLinkRate(text), ml::shippedLinkCalibration());
  } catch (const ml::UserError&) {
    throw ml::UserError("--cross-link: '" + text + "' is neither ib-hdr, 100gbe, 10gbe nor a rate such as 10gbit or 500mbit");
  }
}

int whatIf(LearnArgs& a) {
  ml::Project project;
  ml::ComputeProfile prof = profileFor(a, project);
  // The bytes of one all-reduce: two per parameter when the gradients cross as bfloat16.
  const auto dtype =
      a.allreduceDtype ? ml::allReduceDtypeSetting(*a.allreduceDtype, "command line") : project.distribute.allreduceDtype;
  prof.gradientBytes = prof.gradientBytes / 4 * ml::bytesPerValue(dtype);
  const int workers = a.workers > 0 ? a.workers : a.measuredWorkers;
  ml::WhatIfOptions o;
  o.devices = parseCounts(a.devices);
  o.algo = ml::parseCollectiveAlgo(a.algo);
  o.overlap = a.overlap;
  o.perDeviceBatch = a.perDevice || (!a.batch && project.training.perDeviceBatch);
  o.batch = a.batch.value_or(project.training.batchSize);
  if (a.link == "host") {
    const int n = *std::max_element(o.devices.begin(), o.devices.end());
    const auto m = ml::measureHostAllReduce(n, std::max<int64_t>(4, prof.gradientBytes));
    std::printf("measured: ring all-reduce of %lld bytes over host memory with %d threads: %.3f ms (bus bandwidth %.2f GB/s)\n",
                static_cast<long long>(m.bytes), m.devices, m.seconds * 1e3, m.busBandwidth / 1e9);
    o.link = m.link;
  } else {
    o.link = ml::linkPreset(a.link);
  }
  o.workers = workers;
  if (workers > 1) o.crossLink = crossLinkFor(a.crossLink);
  o.crossBuckets = static_cast<int>((prof.gradientBytes + project.distribute.bucketBytes - 1) /
                                    std::max<int64_t>(1, project.distribute.bucketBytes));
  const ml::WhatIfResult r = ml::predictScaling(prof, o);
  std::printf("What-if for '%s' (MODELLED, not measured)\n", project.name.c_str());
  if (workers > 1)
    std::printf("%d workers (machines), each with the device counts below, joined by %s (%.3g GB/s, %.3g us per message)\n",
                workers, o.crossLink.name.c_str(), o.crossLink.bandwidth / 1e9, o.crossLink.latency * 1e6);
  if (workers > 1 && o.crossLink.id.ends_with("mbit")) {
    const auto& c = ml::shippedLinkCalibration();
    char ceiling[64] = "no hosts' ceiling (none measured)";
    if (c.hostBytesPerSecond > 0) std::snprintf(ceiling, sizeof ceiling, "hosts' ceiling %.3g GB/s", c.hostBytesPerSecond / 1e9);
    std::printf(
        "calibrated %s on %s: %.3g us per message, %.0f%% of the link's rate, %s; the latency term is that message "
        "overhead (those links add no delay): on a network with a longer round trip it is larger\n",
        c.date.c_str(), c.source.c_str(), c.messageSeconds * 1e6, c.linkFraction * 100, ceiling);
  }
  std::printf("link: %s, %.3g GB/s, %.3g us per message; %s all-reduce of %.1f KiB of %s gradients\n", r.link.name.c_str(),
              r.link.bandwidth / 1e9, r.link.latency * 1e6, ml::toString(r.algo),
              static_cast<double>(prof.gradientBytes) / 1024.0, ml::toString(dtype));
  std::printf("compute (measured, %s): forward %.3g us + backward %.3g us per sample, optimizer %.3g ms per step\n",
              prof.source.c_str(), prof.forwardPerSample * 1e6, prof.backwardPerSample * 1e6, prof.optimizerPerStep * 1e3);
  std::printf("\n%7s %7s %8s %11s %13s %11s %9s %11s %9s %10s %7s  %s\n", "devices", "global", "per-dev", "compute ms",
              "all-reduce ms", "exposed ms", "step ms", "samples/s", "speed-up", "efficiency", "sync", "");
  for (const auto& row : r.rows)
    std::printf("%7d %7lld %8lld %11.3f %13.3f %11.3f %9.3f %11.0f %9.2f %9.1f%% %6.1f%%  %s\n", row.devices,
                static_cast<long long>(row.globalBatch), static_cast<long long>(row.perReplicaBatch), row.computeSeconds * 1e3,
                row.allreduceSeconds * 1e3, row.exposedSeconds * 1e3, row.stepSeconds * 1e3, row.samplesPerSecond, row.speedup,
                row.efficiency * 100, row.syncShare * 100, r.label.c_str());
  std::printf("\n%s\n", r.assumptions.c_str());
  if (workers > 1) {
    std::printf("cross-worker ring per step (modelled, %s): %.3f ms\n", o.crossLink.name.c_str(),
                r.rows.front().crossSeconds * 1e3);
    if (a.measuredNetwork >= 0)
      std::printf(
          "cross-worker hop measured in run %s (%d workers, MPI): %.3f ms per step (median of the steps; the part "
          "not hidden behind backward)\n",
          a.source.c_str(), a.measuredWorkers, a.measuredNetwork * 1e3);
  }
  return 0;
}

}  // namespace

void addLearnCommands(CLI::App& app, int& exitCode) {
  auto a = std::make_shared<LearnArgs>();

  auto* learn = app.add_subcommand("learn", "Guided lessons on mirrored training: predict, run, see the measured answer");
  learn->require_subcommand(1);
  auto* list = learn->add_subcommand("list", "List the lessons");
  list->add_option("--dir", a->dir, "Lesson folder (default: $MIRRORLAB_LESSONS, else the installed or build tree's lessons)");
  list->callback([a, &exitCode] { exitCode = guarded([&] { return learnList(*a); }); });
  auto* run = learn->add_subcommand("run", "Ask a lesson's question, run its experiments and reveal the result");
  run->add_option("lesson", a->lesson, "Lesson id, number (from `learn list`) or file")->required();
  run->add_option("--answer", a->answer, "Your answer (1..choices) instead of asking on standard input");
  run->add_option("--dir", a->dir, "Lesson folder (default: $MIRRORLAB_LESSONS, else the installed or build tree's lessons)");
  run->add_option("--steps", a->steps, "Cap every experiment at this many updates (a quick look)");
  run->add_option("--db", a->db, "Record every experiment as a run in this store");
  run->add_flag("--record", a->record, "Record every experiment in the default run store");
  run->callback([a, &exitCode] { exitCode = guarded([&] { return learnRun(*a); }); });

  auto* code = app.add_subcommand("export-code", "Write the project as a TensorFlow (MirroredStrategy) or PyTorch (DDP) program");
  code->add_option("project", a->project, "Project file (JSON)")->required();
  code->add_option("--framework", a->framework, "tf or torch")
      ->check(CLI::IsMember({"tf", "torch", "tensorflow", "pytorch", "keras"}));
  code->add_option("--output,-o", a->output, "File to write (default: standard output)");
  code->callback([a, &exitCode] { exitCode = guarded([&] { return exportCode(*a); }); });

  auto* tr =
      app.add_subcommand("trace", "Export a stored run's per-device timeline as a Chrome trace (Perfetto, chrome://tracing)");
  tr->add_option("run", a->runId, "Run id (see `runs list`)")->required();
  tr->add_option("--output,-o", a->output, "Trace file to write (.json)")->required();
  tr->add_option("--db", a->db, "Run store (default: $MIRRORLAB_DB or the user's data folder)");
  tr->add_option("--from", a->fromStep, "First step (default 1)");
  tr->add_option("--to", a->toStep, "Last step (default: the last)");
  tr->callback([a, &exitCode] { exitCode = guarded([&] { return trace(*a); }); });

  auto* w = app.add_subcommand("what-if", "Modelled step time and efficiency for N devices on a link (alpha-beta model)");
  w->add_option("source", a->source, "Project file, or a stored run id whose steps give the compute time")->required();
  w->add_option("--link", a->link,
                "Between the devices of a machine: nvlink | pcie4 | ib-hdr | 100gbe | 10gbe | host (measured here)")
      ->check(CLI::IsMember({"nvlink", "pcie4", "ib-hdr", "100gbe", "10gbe", "host"}));
  w->add_option("--workers", a->workers,
                "Workers (machines): --devices are then per worker and the all-reduce hierarchical, its cross-worker "
                "ring over --cross-link (default: the stored run's workers, else 1)")
      ->check(CLI::Range(1, 4096));
  w->add_option("--cross-link", a->crossLink,
                "Between the workers: ib-hdr | 100gbe | 10gbe (nominal), or a rate such as 2.5gbit or 500mbit (Ethernet "
                "with the measured overheads of the shipped calibration) (default 100gbe)");
  w->add_option("--devices", a->devices, "Device counts, e.g. 1,2,4,8");
  w->add_option("--algo", a->algo, "ring | reduce-to-one")->check(CLI::IsMember({"ring", "reduce-to-one"}));
  w->add_option("--overlap", a->overlap, "Share of the all-reduce hidden behind backward, 0..1 (default 0)")
      ->check(CLI::Range(0.0, 1.0));
  w->add_option("--allreduce-dtype", a->allreduceDtype,
                "Gradients on the wire: float32 or bfloat16 (half the bytes; default: the project's or run's)")
      ->check(CLI::IsMember({"float32", "bfloat16"}));
  w->add_option("--batch", a->batch, "Batch (default: the project's)");
  w->add_flag("--per-device", a->perDevice, "The batch is per device (the global batch grows with N)");
  w->add_option("--steps", a->profileSteps, "Steps of the measuring run for a project (default 20)");
  w->add_option("--db", a->db, "Run store for a run id");
  w->callback([a, &exitCode] { exitCode = guarded([&] { return whatIf(*a); }); });
}

}  // namespace mlcli
