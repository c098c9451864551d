// Sweeps: a grid of global batch size x learning rate x devices x scaling rule, every point a
// stored run of the same project tagged with the sweep's id, and a sweep record in the store
// (grid, options, status, target) so that an interrupted or cancelled sweep can be resumed.
// `mirrorlab-cli sweep` and the studio's Sweeps view both run this.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/Dataset.h"
#include "project/Project.h"
#include "store/SweepStore.h"
#include "telemetry/Channel.h"

namespace ml {

class RunSequence;

struct SweepGrid {
  std::vector<int64_t> batchSizes;      // global batch of one update
  std::vector<double> lrs;              // base learning rates
  std::vector<std::string> devices;     // device specs: "cpu:1", "cpu:2", "gpu:0,1"
  std::vector<std::string> lrScalings;  // none | linear | sqrt
  size_t size() const { return batchSizes.size() * lrs.size() * devices.size() * lrScalings.size(); }
  nlohmann::json toJson() const;
  static SweepGrid fromJson(const nlohmann::json& j);
};

// Lists as typed by a person ("64, 128", "1e-3,3e-3"); what names the option in messages.
// Each throws UserError for an empty list, an empty item or a value that is not a number.
std::vector<int64_t> parseBatchList(const std::string& text, const std::string& what = "--batch-size");
std::vector<double> parseLrList(const std::string& text, const std::string& what = "--lr");
// "cpu:1,cpu:2" or "cpu:1,2,4" (a bare count repeats cpu:), "gpu:0;gpu:0,1" (';' separates
// lists whose devices are themselves comma-separated). Every spec is validated.
std::vector<std::string> parseDeviceSpecList(const std::string& text, const std::string& what = "--devices");
std::vector<std::string> parseScalingList(const std::string& text, const std::string& what = "--lr-scaling");

struct SweepOptions {
  SweepGrid grid;
  std::optional<int> epochs;       // per point (else the project's)
  std::optional<int64_t> steps;    // per point: stop after S updates
  std::optional<double> target;    // validation metric to reach (time / samples to it)
  int parallel = 1;                // points trained at once
  int64_t maxPoints = 64;          // a larger grid is refused before anything runs
  int stopAfterNoImprovement = 0;  // early stopping, in epochs; 0: never
  std::string name;                // "" -> "<project name> sweep"
  nlohmann::json toJson() const;   // everything but the grid
  static SweepOptions fromJson(const nlohmann::json& options, const nlohmann::json& grid);
};

inline constexpr int64_t kDefaultMaxSweepPoints = 64;

// The grid's points in a fixed order: devices, then scaling rule, then batch, then learning rate.
std::vector<SweepPointRow> expandGrid(const SweepGrid& grid);
// The project one point trains: global batch, base rate, devices and rule set; epochs override.
Project pointProject(const Project& base, const SweepPointRow& point, const SweepOptions& o, int64_t trainSamples);
// Every check that can be made before anything runs (lists, grid size, batches the devices
// cannot split or the data cannot hold, options); throws one UserError naming the fix.
void validateSweep(const Project& base, const SweepOptions& o, int64_t trainSamples);

// One point's live state for progress displays.
struct SweepPointProgress {
  std::string status;  // as in SweepPointRow
  int64_t step = 0, totalSteps = 0;
  std::optional<int64_t> runId;
};

class SweepRunner {
 public:
  // A new sweep: validates (throws UserError before anything is stored), then creates the record
  // in storePath with every point pending.
  SweepRunner(Project base, std::shared_ptr<const DataSplit> data, SweepOptions options, std::string storePath);
  // Resumes sweep id in storePath: only the points that did not finish will run. The project and
  // options come from the record; the data set must be the project's.
  SweepRunner(int64_t sweepId, std::shared_ptr<const DataSplit> data, std::string storePath);
  ~SweepRunner();

  int64_t id() const { return id_; }
  const Project& project() const { return base_; }
  const SweepOptions& options() const { return options_; }
  const std::vector<SweepPointRow>& points() const { return points_; }
  // The points that run() will train, in order.
  std::vector<int> pending() const;

  // Called on a worker thread when a point starts (with its run name) and ends.
  std::function<void(const SweepPointRow& point)> onPointStarted;
  std::function<void(const SweepPointRow& point)> onPointFinished;

  // Trains the pending points (options.parallel at a time) on this thread and workers; returns
  // the sweep's final status: finished, cancelled or failed (a store that cannot be written throws;
  // no point trained, every one failed, returns failed). A sweep where some points finished or
  // diverged and others failed is finished: the trained points are its result.
  std::string run();
  // From any thread: stops the running points between steps; they and every later point are
  // stored as cancelled.
  void requestCancel();
  bool cancelled() const { return cancel_.load(); }
  // Per point, safe from any thread (drains the running points' progress channels).
  std::vector<SweepPointProgress> progress();

 private:
  void runPoint(size_t index, RunSequence& seq);
  void create();

  Project base_;
  std::shared_ptr<const DataSplit> data_;
  SweepOptions options_;
  std::string storePath_;
  int64_t id_ = 0;
  std::vector<SweepPointRow> points_;
  std::atomic<bool> cancel_{false};
  std::mutex mu_;  // guards points_' status/run, progress_, live_, sequences_
  std::vector<SweepPointProgress> progress_;
  std::vector<std::shared_ptr<Channel>> live_;  // per point while it runs
  std::vector<RunSequence*> sequences_;
};

}  // namespace ml
