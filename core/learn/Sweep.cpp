// The sweep engine: list parsing, grid expansion and validation, and the runner that trains the
// pending points (one RunSequence per worker) and keeps the sweep record in the store current.
#include "learn/Sweep.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>
#include <thread>

#include "Error.h"
#include "Format.h"
#include "backend/DeviceList.h"
#include "learn/RunSequence.h"
#include "project/LrScaling.h"
#include "store/RunStore.h"
#include "train/Trainer.h"

namespace ml {

namespace {

std::string trim(const std::string& s) {
  const auto a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return {};
  return s.substr(a, s.find_last_not_of(" \t") - a + 1);
}

// Splits on sep; an empty list or an empty item is an error naming the option.
std::vector<std::string> splitList(const std::string& text, char sep, const std::string& what, const std::string& example) {
  std::vector<std::string> items;
  if (trim(text).empty()) throw UserError(what + ": the list is empty; give at least one value, e.g. " + what + " " + example);
  size_t start = 0;
  while (true) {
    const size_t end = text.find(sep, start);
    std::string item = trim(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (item.empty())
      throw UserError(what + ": '" + text + "' has an empty item; separate values with single commas, e.g. " + what + " " +
                      example);
    items.push_back(item);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return items;
}

template <class T>
void requireUnique(const std::vector<T>& v, const std::string& what, const std::string& shown) {
  std::set<T> seen(v.begin(), v.end());
  if (seen.size() != v.size()) throw UserError(what + ": '" + shown + "' lists a value twice; give each value once");
}

double toNumber(const std::string& item, const std::string& what, const std::string& example) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(item.c_str(), &end);
  if (end == item.c_str() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
    throw UserError(what + ": '" + item + "' is not a number; give numbers separated by commas, e.g. " + what + " " + example);
  return v;
}

}  // namespace

std::vector<int64_t> parseBatchList(const std::string& text, const std::string& what) {
  std::vector<int64_t> out;
  for (const auto& item : splitList(text, ',', what, "64,128,256")) {
    const double v = toNumber(item, what, "64,128,256");
    if (v < 1 || v != std::floor(v) || v > 1e12)
      throw UserError(what + ": '" + item + "' is not a whole number of samples of at least 1; e.g. " + what + " 64,128,256");
    out.push_back(static_cast<int64_t>(v));
  }
  requireUnique(out, what, text);
  return out;
}

std::vector<double> parseLrList(const std::string& text, const std::string& what) {
  std::vector<double> out;
  for (const auto& item : splitList(text, ',', what, "1e-3,3e-3,1e-2")) {
    const double v = toNumber(item, what, "1e-3,3e-3,1e-2");
    if (v <= 0) throw UserError(what + ": '" + item + "' is not a positive learning rate; e.g. " + what + " 1e-3,3e-3,1e-2");
    out.push_back(v);
  }
  requireUnique(out, what, text);
  return out;
}

std::vector<std::string> parseDeviceSpecList(const std::string& text, const std::string& what) {
  std::vector<std::string> specs;
  if (text.find(';') != std::string::npos) {
    specs = splitList(text, ';', what, "gpu:0;gpu:0,1");
  } else {
    for (const auto& item : splitList(text, ',', what, "cpu:1,cpu:2")) {
      const bool bare = item.find(':') == std::string::npos;
      if (!bare)
        specs.push_back(item);
      else if (specs.empty())
        throw UserError(what + ": '" + item + "' names no device kind; write cpu:N, e.g. " + what + " cpu:1,cpu:2");
      else if (specs.back().rfind("gpu:", 0) == 0)
        specs.back() += "," + item;  // gpu:0,1 is one list of GPUs
      else
        specs.push_back(specs.back().substr(0, specs.back().find(':') + 1) + item);  // cpu:1,2 = cpu:1, cpu:2
    }
  }
  for (const auto& s : specs) {
    try {
      parseDevices(s);
    } catch (const UserError& e) {
      throw UserError(what + ": " + e.what(), e.field());
    }
  }
  requireUnique(specs, what, text);
  return specs;
}

std::vector<std::string> parseScalingList(const std::string& text, const std::string& what) {
  auto out = splitList(text, ',', what, "none,linear");
  for (const auto& s : out)
    if (!parseLrRule(s))
      throw UserError(what + ": '" + s + "' is not a scaling rule; use none, linear or sqrt, e.g. " + what + " none,linear");
  requireUnique(out, what, text);
  return out;
}

nlohmann::json SweepGrid::toJson() const {
  return {{"batch_sizes", batchSizes}, {"learning_rates", lrs}, {"devices", devices}, {"lr_scaling", lrScalings}};
}

SweepGrid SweepGrid::fromJson(const nlohmann::json& j) {
  SweepGrid g;
  g.batchSizes = j.at("batch_sizes").get<std::vector<int64_t>>();
  g.lrs = j.at("learning_rates").get<std::vector<double>>();
  g.devices = j.at("devices").get<std::vector<std::string>>();
  g.lrScalings = j.at("lr_scaling").get<std::vector<std::string>>();
  return g;
}

nlohmann::json SweepOptions::toJson() const {
  nlohmann::json j{
      {"parallel", parallel}, {"max_points", maxPoints}, {"stop_after_no_improvement", stopAfterNoImprovement}, {"name", name}};
  if (epochs) j["epochs"] = *epochs;
  if (steps) j["steps"] = *steps;
  if (target) j["target"] = *target;
  return j;
}

SweepOptions SweepOptions::fromJson(const nlohmann::json& j, const nlohmann::json& grid) {
  SweepOptions o;
  o.grid = SweepGrid::fromJson(grid);
  o.parallel = j.value("parallel", 1);
  o.maxPoints = j.value("max_points", kDefaultMaxSweepPoints);
  o.stopAfterNoImprovement = j.value("stop_after_no_improvement", 0);
  o.name = j.value("name", std::string());
  if (j.contains("epochs")) o.epochs = j["epochs"].get<int>();
  if (j.contains("steps")) o.steps = j["steps"].get<int64_t>();
  if (j.contains("target")) o.target = j["target"].get<double>();
  return o;
}

std::vector<SweepPointRow> expandGrid(const SweepGrid& g) {
  std::vector<SweepPointRow> out;
  for (const auto& d : g.devices)
    for (const auto& s : g.lrScalings)
      for (int64_t b : g.batchSizes)
        for (double lr : g.lrs) {
          SweepPointRow p;
          p.point = static_cast<int>(out.size());
          p.batchSize = b;
          p.lr = lr;
          p.devices = d;
          p.lrScaling = s;
          out.push_back(std::move(p));
        }
  return out;
}

Project pointProject(const Project& base, const SweepPointRow& pt, const SweepOptions& o, int64_t trainSamples) {
  Project p = base;
  p.training.batchSize = pt.batchSize;
  p.training.perDeviceBatch = false;  // the grid's batch is the global batch of one update
  p.training.optimizer.learningRate = pt.lr;
  p.training.lrScaling = parseLrRule(pt.lrScaling).value_or(LrRule::None);  // parseScalingList checked it
  // A scaling rule scales the grid's rate by the point's global batch against the batch the base
  // project's rate was set for (one rule everywhere, project/LrScaling.h).
  p.training.lrReferenceBatch = lrReferenceBatch(base.training);
  p.distribute.devices = parseDevices(pt.devices);  // the store keeps a point's devices as text; checked by parseDeviceSpecList
  if (o.epochs)
    p.training.epochs = *o.epochs;
  else if (o.steps && trainSamples > 0) {
    const int64_t perEpoch = std::max<int64_t>(1, (trainSamples + pt.batchSize - 1) / pt.batchSize);
    p.training.epochs = static_cast<int>(std::max<int64_t>(1, (*o.steps + perEpoch - 1) / perEpoch));
  }
  return p;
}

void validateSweep(const Project& base, const SweepOptions& o, int64_t trainSamples) {
  const SweepGrid& g = o.grid;
  const struct {
    size_t n;
    const char* what;
    const char* example;
  } lists[] = {{g.batchSizes.size(), "--batch-size", "64,128"},
               {g.lrs.size(), "--lr", "1e-3,1e-2"},
               {g.devices.size(), "--devices", "cpu:1,cpu:2"},
               {g.lrScalings.size(), "--lr-scaling", "none,linear"}};
  for (const auto& l : lists)
    if (l.n == 0)
      throw UserError(std::string(l.what) + ": the list is empty; give at least one value, e.g. " + l.what + " " + l.example);
  if (o.maxPoints < 1) throw UserError("--max-points must be at least 1, got " + std::to_string(o.maxPoints));
  if (static_cast<int64_t>(g.size()) > o.maxPoints)
    throw UserError("the grid has " + std::to_string(g.size()) + " points (" + std::to_string(g.batchSizes.size()) +
                    " batch sizes x " + std::to_string(g.lrs.size()) + " learning rates x " + std::to_string(g.devices.size()) +
                    " device lists x " + std::to_string(g.lrScalings.size()) + " scaling rules), more than the limit of " +
                    std::to_string(o.maxPoints) + ": shorten a list, or allow it with --max-points " + std::to_string(g.size()));
  if (o.epochs && o.steps) throw UserError("give --epochs or --steps for the sweep's points, not both");
  if (o.epochs && *o.epochs < 1) throw UserError("--epochs must be at least 1, got " + std::to_string(*o.epochs));
  if (o.steps && *o.steps < 1) throw UserError("--steps must be at least 1, got " + std::to_string(*o.steps));
  if (o.parallel < 1 || o.parallel > 16)
    throw UserError("--parallel must be between 1 and 16, got " + std::to_string(o.parallel));
  if (o.stopAfterNoImprovement < 0)
    throw UserError("--stop-after-no-improvement must be 0 (off) or a number of epochs, got " +
                    std::to_string(o.stopAfterNoImprovement));
  if (o.target && !std::isfinite(*o.target)) throw UserError("--target must be a number, e.g. --target 0.85");
  for (const auto& d : g.devices) {
    const int replicas = parseDevices(d).size();
    for (int64_t b : g.batchSizes)
      if (b < replicas)
        throw UserError("batch size " + std::to_string(b) + " cannot be split across the " + std::to_string(replicas) +
                        " replicas of " + d + ": every replica needs at least one sample; use batch sizes of at least " +
                        std::to_string(replicas) + " or fewer devices");
  }
  for (const auto& pt : expandGrid(g)) {
    const Project p = pointProject(base, pt, o, trainSamples);
    validate(p, "sweep point " + std::to_string(pt.point + 1));
    planRun(p, p.distribute.devices.size(), trainSamples);
  }
}

SweepRunner::SweepRunner(Project base, std::shared_ptr<const DataSplit> data, SweepOptions options, std::string storePath)
    : base_(std::move(base)), data_(std::move(data)), options_(std::move(options)), storePath_(std::move(storePath)) {
  if (storePath_.empty()) throw UserError("a sweep's points are stored runs: give a run store (--db PATH or MIRRORLAB_DB)");
  validateSweep(base_, options_, data_->train.size);
  points_ = expandGrid(options_.grid);
  create();
}

SweepRunner::SweepRunner(int64_t sweepId, std::shared_ptr<const DataSplit> data, std::string storePath)
    : data_(std::move(data)), storePath_(std::move(storePath)), id_(sweepId) {
  RunStore store = RunStore::open(storePath_);
  SweepRecord rec = loadSweep(store, sweepId);
  // Two processes on one sweep would train its points twice and race on their rows.
  if (rec.status == "running")
    throw UserError("sweep " + std::to_string(sweepId) + " is still running (process " + std::to_string(rec.pid) +
                    (rec.host.empty() ? std::string() : " on " + rec.host) + "): let it finish, or stop it, before resuming it");
  base_ = Project::fromJson(nlohmann::json::parse(rec.projectJson), "sweep " + std::to_string(sweepId));
  options_ = SweepOptions::fromJson(nlohmann::json::parse(rec.optionsJson), nlohmann::json::parse(rec.gridJson));
  validateSweep(base_, options_, data_->train.size);
  points_ = std::move(rec.points);
  progress_.resize(points_.size());
  for (size_t i = 0; i < points_.size(); ++i) {
    progress_[i].status = points_[i].status;
    progress_[i].runId = points_[i].runId;
  }
  live_.resize(points_.size());
}

SweepRunner::~SweepRunner() = default;

void SweepRunner::create() {
  RunStore store = RunStore::open(storePath_);
  SweepRecord rec;
  rec.name = options_.name.empty() ? base_.name + " sweep" : options_.name;
  rec.status = "pending";
  rec.target = options_.target;
  rec.gridJson = options_.grid.toJson().dump();
  rec.optionsJson = options_.toJson().dump();
  rec.projectJson = base_.toJson().dump();
  rec.points = points_;
  id_ = createSweep(store, rec);
  progress_.assign(points_.size(), SweepPointProgress{"pending", 0, 0, std::nullopt});
  live_.resize(points_.size());
}

std::vector<int> SweepRunner::pending() const {
  std::vector<int> out;
  for (const auto& p : points_)
    if (p.status != "finished" && p.status != "diverged") out.push_back(p.point);
  return out;
}

void SweepRunner::requestCancel() {
  cancel_.store(true);
  std::lock_guard lock(mu_);
  for (auto* s : sequences_) s->requestCancel();
}

std::vector<SweepPointProgress> SweepRunner::progress() {
  std::lock_guard lock(mu_);
  std::vector<Event> events;
  for (size_t i = 0; i < live_.size(); ++i) {
    if (!live_[i]) continue;
    events.clear();
    live_[i]->drain(events);
    for (const auto& e : events)
      if (const auto* s = std::get_if<StepEvent>(&e)) progress_[i].step = s->step;
  }
  return progress_;
}

std::string SweepRunner::run() {
  const std::vector<int> todo = pending();
  {
    RunStore store = RunStore::open(storePath_);
    setSweepStatus(store, id_, "running");
  }
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  auto work = [&] {
    RunSequence seq;
    {
      std::lock_guard lock(mu_);
      sequences_.push_back(&seq);
    }
    if (cancel_.load()) seq.requestCancel();
    try {
      for (size_t k; !cancel_.load() && (k = next.fetch_add(1)) < todo.size();) runPoint(static_cast<size_t>(todo[k]), seq);
    } catch (...) {
      // A store that cannot be written ends the sweep: the other workers stop after their point.
      std::lock_guard lock(mu_);
      if (!failure) failure = std::current_exception();
      next.store(todo.size());
    }
    std::lock_guard lock(mu_);
    sequences_.erase(std::find(sequences_.begin(), sequences_.end(), &seq));
  };
  const int workers = std::max(1, std::min<int>(options_.parallel, static_cast<int>(todo.size())));
  std::vector<std::thread> threads;
  for (int w = 1; w < workers; ++w) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  if (failure) {
    try {
      RunStore store = RunStore::open(storePath_);
      setSweepStatus(store, id_, "failed");
    } catch (...) {
    }
    std::rethrow_exception(failure);
  }

  RunStore store = RunStore::open(storePath_);
  std::string status = "finished";
  for (auto& p : points_) {
    if (p.status == "pending" || p.status == "running") {
      std::lock_guard lock(mu_);
      p.status = progress_[static_cast<size_t>(p.point)].status = "cancelled";
      setPointState(store, id_, p.point, "cancelled", std::nullopt, cancel_.load() ? "the sweep was cancelled" : p.message);
    }
    if (p.status == "cancelled") status = "cancelled";
  }
  // No point trained (every one that ran failed: a full disk, a data set that is gone, a fault):
  // the sweep has no result and failed; a resume trains those points again. A diverged point is a
  // result (that rate is too high), so it counts as trained.
  const bool trained = std::any_of(points_.begin(), points_.end(),
                                   [](const SweepPointRow& p) { return p.status == "finished" || p.status == "diverged"; });
  if (status == "finished" && !trained) status = "failed";
  setSweepStatus(store, id_, status);
  return status;
}

void SweepRunner::runPoint(size_t i, RunSequence& seq) {
  SweepPointRow pt;
  {
    std::lock_guard lock(mu_);
    pt = points_[i];
  }
  const Project p = pointProject(base_, pt, options_, data_->train.size);
  RecordedRunOptions ro;
  ro.storePath = storePath_;
  TrainerOptions& to = ro.trainer;
  to.maxSteps = options_.steps.value_or(0);
  to.stopAfterNoImprovement = options_.stopAfterNoImprovement;
  to.runName = (options_.name.empty() ? base_.name + " sweep" : options_.name) + " " + std::to_string(id_) + " #" +
               std::to_string(pt.point + 1) + ": batch " + std::to_string(pt.batchSize) + ", lr " + formatNumber("%g", pt.lr) +
               ", " + pt.devices + (pt.lrScaling == "none" ? "" : ", " + pt.lrScaling + " scaling");
  std::string status, message;
  std::optional<int64_t> runId;
  try {
    const int64_t maxSteps = to.maxSteps;
    RecordedRun run(p, data_, std::move(ro));
    const int64_t spe = run.plan().stepsPerEpoch;
    const int64_t total = maxSteps > 0 ? std::min<int64_t>(maxSteps, spe * p.training.epochs) : spe * p.training.epochs;
    {
      std::lock_guard lock(mu_);
      points_[i].status = "running";
      progress_[i] = {"running", 0, total, std::nullopt};
      live_[i] = run.subscribe(size_t{1} << 14);
    }
    {
      RunStore store = RunStore::open(storePath_);
      setPointState(store, id_, pt.point, "running", std::nullopt);
      // An earlier, unfinished attempt stays stored as a run but no longer counts for the sweep.
      if (pt.runId) store.untagRun(*pt.runId, sweepTag(id_));
    }
    if (onPointStarted) onPointStarted(pt);
    const auto r = seq.run(run);
    status = toString(r.finished.status);
    message = r.finished.message;
    runId = r.runId;
  } catch (const std::exception& e) {
    status = "failed";
    message = e.what();
  }
  {
    RunStore store = RunStore::open(storePath_);
    setPointState(store, id_, pt.point, status, runId, message);
  }
  {
    std::lock_guard lock(mu_);
    points_[i].status = status;
    points_[i].runId = runId;
    points_[i].message = message;
    progress_[i].status = status;
    progress_[i].runId = runId;
    live_[i].reset();
    pt = points_[i];
  }
  if (onPointFinished) onPointFinished(pt);
}

}  // namespace ml
