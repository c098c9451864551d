// The lesson runner: every experiment is a real Trainer run over the same loaded data set; its
// events are collected from the hub and turned into named figures. Timing figures skip each
// run's first step, which pays for first-touch allocations and thread start-up.
#include "learn/LessonRunner.h"

#include "Format.h"
#include "store/RunFigures.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <set>
#include <thread>

#include "Error.h"
#include "nn/Loss.h"
#include "nn/Sequential.h"

namespace ml {

namespace {

LessonFigure percent(double share) { return {share, formatNumber("%.1f%%", 100.0 * share)}; }
LessonFigure integer(int64_t v) { return {static_cast<double>(v), std::to_string(v)}; }
LessonFigure yesNo(bool b) { return {b ? 1.0 : 0.0, b ? "yes" : "no"}; }

// An experiment's figures (store/RunFigures.h, as every screen's), the first step left out when
// there are more: it pays for first-touch allocations.
RunFigures timingOf(const ExperimentOutcome& o) {
  RunFigures f = figuresFor(o.started, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  f.replicas = std::max(1, o.plan.replicas);
  for (size_t i = o.steps.size() > 1 ? 1 : 0; i < o.steps.size(); ++i) f.addStep(o.steps[i]);
  return f;
}

double finalAccuracy(const ExperimentOutcome& o) {
  if (o.finished.finalValMetric) return *o.finished.finalValMetric;
  if (!o.epochs.empty()) return o.epochs.back().trainMetric;
  return o.steps.empty() ? 0.0 : o.steps.back().metric;
}

double finalLoss(const ExperimentOutcome& o) {
  if (o.finished.finalValLoss) return *o.finished.finalValLoss;
  if (!o.epochs.empty()) return o.epochs.back().trainLoss;
  return o.steps.empty() ? 0.0 : o.steps.back().loss;
}

bool checksumsEqual(const ExperimentOutcome& o) {
  if (o.epochs.empty()) return false;  // nothing was compared
  for (const auto& e : o.epochs) {
    if (!e.inSync) return false;
    for (uint64_t c : e.checksums)
      if (c != e.checksums.front()) return false;
  }
  return true;
}

// Long: the list of figures a lesson's text may name, each one or a few lines; one place to
// read which names exist.
void addExperimentFigures(LessonFigures& f, const ExperimentOutcome& o) {
  const std::string s = "_" + o.experiment.label;
  const RunFigures t = timingOf(o);
  f["final_acc" + s] = percent(finalAccuracy(o));
  f["final_loss" + s] = {finalLoss(o), formatNumber("%.4f", finalLoss(o))};
  const double trainLoss = o.epochs.empty() ? finalLoss(o) : o.epochs.back().trainLoss;
  f["train_loss" + s] = {trainLoss, formatNumber("%.4f", trainLoss)};
  f["steps" + s] = integer(o.finished.steps);
  double seconds = 0;
  for (const auto& e : o.epochs) seconds += e.seconds;
  f["seconds" + s] = {seconds, formatNumber("%.2f", seconds)};
  f["samples_per_sec" + s] = {t.samplesPerSec(), formatNumber("%.0f", t.samplesPerSec())};
  f["step_ms" + s] = {1e3 * t.secondsPerStep(), formatNumber("%.2f", 1e3 * t.secondsPerStep())};
  f["sync_share" + s] = percent(t.phases.share(t.phases.sum.allreduce + t.phases.sum.wait));
  f["allreduce_share" + s] = percent(t.phases.share(t.phases.sum.allreduce));
  f["wait_share" + s] = percent(t.phases.share(t.phases.sum.wait));
  // Per replica, its mean wait per step: the fast ones wait for the slowest, which waits for nobody.
  std::vector<double> waits;
  for (size_t i = o.steps.size() > 1 ? 1 : 0; i < o.steps.size(); ++i)
    for (const auto& r : o.steps[i].replicas) {
      if (waits.size() <= static_cast<size_t>(r.replica)) waits.resize(static_cast<size_t>(r.replica) + 1, 0.0);
      waits[static_cast<size_t>(r.replica)] += r.phases.wait * 1000.0 / static_cast<double>(std::max<int64_t>(1, t.steps));
    }
  const double most = waits.empty() ? 0 : *std::max_element(waits.begin(), waits.end());
  const double least = waits.empty() ? 0 : *std::min_element(waits.begin(), waits.end());
  f["max_wait_ms" + s] = {most, formatNumber("%.2f", most)};
  f["min_wait_ms" + s] = {least, formatNumber("%.2f", least)};
  f["checksums_equal" + s] = yesNo(checksumsEqual(o));
  // Mixed precision: the loss scale's story (0 without loss scaling), and how far the loss fell.
  int64_t skipped = 0;
  for (const auto& st : o.steps) skipped += st.skipped ? 1 : 0;
  f["skipped_steps" + s] = integer(skipped);
  const double lastScale = o.steps.empty() ? 0 : o.steps.back().lossScale;
  f["loss_scale" + s] = {lastScale, lastScale > 0 ? formatNumber("%.0f", lastScale) : std::string("none")};
  const double firstLoss = o.steps.empty() ? 0 : o.steps.front().loss;
  f["first_loss" + s] = {firstLoss, formatNumber("%.4f", firstLoss)};
  std::set<uint64_t> distinct;
  std::string hex = "-";
  if (!o.epochs.empty() && !o.epochs.back().checksums.empty()) {
    distinct.insert(o.epochs.back().checksums.begin(), o.epochs.back().checksums.end());
    char buf[24];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(o.epochs.back().checksums.front()));
    hex = buf;
  }
  f["checksum" + s] = {static_cast<double>(distinct.size()), hex};
  f["replicas" + s] = integer(o.plan.replicas);
  f["global_batch" + s] = integer(o.plan.globalBatch);
  f["per_replica_batch" + s] = integer(o.plan.perReplicaBatch);
  std::string shards;
  int64_t smallest = 0;
  if (!o.steps.empty()) {
    smallest = o.steps.front().replicas.empty() ? 0 : o.steps.front().replicas.front().samples;
    for (const auto& r : o.steps.front().replicas) {
      shards += (shards.empty() ? "" : ", ") + std::to_string(r.samples);
      smallest = std::min(smallest, r.samples);
    }
  }
  f["shard_sizes" + s] = {static_cast<double>(smallest), shards.empty() ? "-" : shards};
  f["lr" + s] = {o.plan.lr, formatNumber("%g", o.plan.lr)};
  f["steps_per_epoch" + s] = integer(o.plan.stepsPerEpoch);
  f["status" + s] = {o.finished.status == RunStatus::Finished ? 1.0 : 0.0, toString(o.finished.status)};
}

}  // namespace

double replicaGradientDifference(const Project& project, const Dataset& train, int replicas, int64_t globalBatch) {
  Sequential model(project.model);
  model.initialize(project.training.seed);
  Loss loss = Loss::make(project.training.loss, project.training.fromLogits);
  model.configureLoss(loss);
  const int64_t batch = std::clamp<int64_t>(globalBatch, 1, train.size);
  const auto order = epochOrder(train.size, project.training.seed, 1);
  const int64_t f = train.featureCount(), k = model.outFeatures();
  auto meanGradient = [&](int64_t lo, int64_t hi) {
    const int64_t n = hi - lo;
    std::vector<float> x(static_cast<size_t>(n * f)), y(static_cast<size_t>(n * train.targetDim));
    std::vector<int64_t> ids(order.begin() + lo, order.begin() + hi);
    for (int64_t i = 0; i < n; ++i) {
      std::copy_n(train.sample(ids[static_cast<size_t>(i)]), f, x.data() + i * f);
      std::copy_n(train.target(ids[static_cast<size_t>(i)]), train.targetDim, y.data() + i * train.targetDim);
    }
    model.zeroGrads();
    const StepContext ctx{true, project.training.seed, 1, ids.data()};
    const float* out = model.forward(x.data(), n, ctx);
    loss.compute(out, y.data(), n, k, model.outputGrad(n));
    model.backward(x.data(), n, ctx);
    std::vector<double> g(model.grads().begin(), model.grads().end());
    for (double& v : g) v /= static_cast<double>(n);
    return g;
  };
  const auto full = meanGradient(0, batch);
  const auto [lo, hi] = shardRange(batch, 0, std::max(1, replicas));
  if (hi <= lo) return 0.0;
  const auto shard = meanGradient(lo, hi);
  double diff = 0, norm = 0;
  for (size_t i = 0; i < full.size(); ++i) {
    diff += (shard[i] - full[i]) * (shard[i] - full[i]);
    norm += full[i] * full[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : 0.0;
}

LessonFigures computeLessonFigures(const Lesson& lesson, const std::vector<ExperimentOutcome>& outcomes, const DataSplit* data) {
  LessonFigures f;
  bool allEqual = !outcomes.empty();
  for (const auto& o : outcomes) {
    addExperimentFigures(f, o);
    // How far this experiment's training-loss curve strayed from the first experiment's, step by step.
    double most = 0;
    for (size_t i = 0; i < std::min(o.steps.size(), outcomes.front().steps.size()); ++i)
      most = std::max(most, std::abs(o.steps[i].loss - outcomes.front().steps[i].loss));
    f["loss_diff_" + o.experiment.label] = {most, formatNumber("%.2g", most)};
    allEqual = allEqual && checksumsEqual(o);
  }
  f["checksums_equal"] = yesNo(allEqual);
  const Sequential model(lesson.project.model);
  f["params"] = integer(model.paramCount());
  f["gradient_kib"] = {static_cast<double>(model.paramCount()) * 4.0 / 1024.0,
                       formatNumber("%.1f", static_cast<double>(model.paramCount()) * 4.0 / 1024.0)};
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  f["host_cores"] = integer(cores);
  f["experiments"] = integer(static_cast<int64_t>(outcomes.size()));

  // Per device count: the first experiment with that many replicas, against the one with fewest.
  const ExperimentOutcome* ref = nullptr;
  for (const auto& o : outcomes)
    if (!ref || o.plan.replicas < ref->plan.replicas) ref = &o;
  std::set<int> seen;
  for (const auto& o : outcomes) {
    const int n = o.plan.replicas;
    if (!seen.insert(n).second) continue;
    const RunFigures t = timingOf(o), tr = timingOf(*ref);
    const std::string s = "_" + std::to_string(n);
    const Scaling sc = scalingVs(tr, t);
    f["speedup" + s] = {sc.speedup, formatNumber("%.2f", sc.speedup)};
    f["efficiency" + s] = percent(sc.efficiency);
    f["sync_share" + s] = percent(t.phases.share(t.phases.sum.allreduce + t.phases.sum.wait));
    f["step_ms" + s] = {1e3 * t.secondsPerStep(), formatNumber("%.2f", 1e3 * t.secondsPerStep())};
    f["samples_per_sec" + s] = {t.samplesPerSec(), formatNumber("%.0f", t.samplesPerSec())};
  }

  if (outcomes.size() >= 2) {
    const auto &a = outcomes[0], &b = outcomes[1];
    double maxDiff = 0;
    for (size_t i = 0; i < std::min(a.steps.size(), b.steps.size()); ++i)
      maxDiff = std::max(maxDiff, std::abs(a.steps[i].loss - b.steps[i].loss));
    f["max_loss_diff"] = {maxDiff, formatNumber("%.2g", maxDiff)};
    const double accDiff = std::abs(finalAccuracy(a) - finalAccuracy(b)) * 100.0;
    f["final_acc_diff"] = {accDiff, formatNumber("%.1f", accDiff)};
  }
  for (const auto& o : outcomes) {
    if (o.plan.replicas > 1 && data) {
      const double d = replicaGradientDifference(o.project, data->train, o.plan.replicas, o.plan.globalBatch);
      f["replica_grad_diff"] = percent(d);
      break;
    }
  }
  return f;
}

// A plain scan (no std::regex, which recurses per character on long texts).
std::string fillPlaceholders(const std::string& text, const LessonFigures& figures) {
  auto nameChar = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::string out;
  size_t pos = 0;
  for (size_t open = text.find('{'); open != std::string::npos; open = text.find('{', open + 1)) {
    size_t end = open + 1;
    while (end < text.size() && nameChar(text[end])) ++end;
    if (end == open + 1 || end >= text.size() || text[end] != '}') continue;
    const auto f = figures.find(text.substr(open + 1, end - open - 1));
    if (f == figures.end()) continue;
    out.append(text, pos, open - pos);
    out += f->second.text;
    pos = end + 1;
    open = end;
  }
  out.append(text, pos, std::string::npos);
  return out;
}

LessonRunner::LessonRunner(Lesson lesson, LessonRunnerOptions options)
    : lesson_(std::move(lesson)), options_(std::move(options)) {}

void LessonRunner::requestCancel() { runs_.requestCancel(); }

LessonOutcome LessonRunner::run() {
  struct CloseHub {
    TelemetryHub& hub;
    ~CloseHub() { hub.closeAll(); }
  } closeHub{hub_};
  LessonOutcome out;
  auto data = std::make_shared<const DataSplit>(loadData(lesson_.project.data));
  auto collect = hub_.subscribe(size_t{1} << 20);
  std::vector<Event> events;
  for (size_t i = 0; i < lesson_.experiments.size(); ++i) {
    if (runs_.cancelled()) {
      out.message = "cancelled before experiment '" + lesson_.experiments[i].title + "'";
      break;
    }
    ExperimentOutcome eo;
    eo.experiment = lesson_.experiments[i];
    eo.project = eo.experiment.apply(lesson_.project);
    RecordedRunOptions ro;
    const int64_t a = eo.experiment.steps, b = options_.maxSteps;
    ro.trainer.maxSteps = a > 0 && b > 0 ? std::min(a, b) : std::max(a, b);
    ro.trainer.runName = options_.runNamePrefix + " " + lesson_.id + ": " + eo.experiment.title;
    ro.storePath = options_.storePath;
    ro.hub = &hub_;  // one watcher follows every experiment
    RecordedRun run(eo.project, data, std::move(ro));
    eo.plan = run.plan();
    if (onExperimentStarted) onExperimentStarted(i, eo);
    const auto result = runs_.run(run);
    eo.finished = result.finished;
    eo.runId = result.runId;
    events.clear();
    collect->drain(events);
    for (auto& e : events) {
      if (auto* s = std::get_if<StepEvent>(&e))
        eo.steps.push_back(std::move(*s));
      else if (auto* ep = std::get_if<EpochEvent>(&e))
        eo.epochs.push_back(std::move(*ep));
      else if (auto* st = std::get_if<RunStarted>(&e))
        eo.started = std::move(*st);
    }
    const bool ok = eo.finished.status == RunStatus::Finished;
    if (!ok)
      out.message = "experiment '" + eo.experiment.title + "' ended " + toString(eo.finished.status) +
                    (eo.finished.message.empty() ? "" : ": " + eo.finished.message);
    out.experiments.push_back(std::move(eo));
    if (!ok) break;
  }
  out.completed = out.message.empty() && out.experiments.size() == lesson_.experiments.size();
  out.figures = computeLessonFigures(lesson_, out.experiments, data.get());
  out.reveal = fillPlaceholders(lesson_.reveal, out.figures);
  return out;
}

}  // namespace ml
