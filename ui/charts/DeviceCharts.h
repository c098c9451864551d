// Per-device charts: utilization over time (a line per device in the device's colour) and the
// step-time breakdown per device stacked as compute / all-reduce / waiting.
#pragma once
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "charts/LiveChart.h"
#include "telemetry/Events.h"

namespace mlui {

// "memory 1.2 GiB of 80.0 GiB · 64 °C": an NVML sample's memory and temperature, as far as known.
QString gpuSampleText(const ml::DeviceSample& s);

// Samples come in two kinds (ml::SampleSource). Computed: a line per replica. NVML (GPU runs): a
// line per physical GPU, created by its first sample; replicas sharing a GPU (logical GPUs) have
// one line for all of them, and the title and axis say the figure is NVML's. The tooltip of an NVML
// point gives the GPU's memory and temperature at that time.
class UtilizationChart : public LiveChart {
  Q_OBJECT
 public:
  explicit UtilizationChart(QWidget* parent = nullptr);
  void setDevices(const std::vector<std::string>& names);
  void addSample(const ml::DeviceSample& s);
  // Breaks every line where the run was paused: samples carry training time (pauses left out), the
  // axis shows real time, so the pause is an empty stretch instead of a line bridging it.
  void addPause(const ml::RunPaused& p);
  double pausedSeconds() const { return pauseOffset_; }
  void clearData() override;
  QCPGraph* deviceGraph(int device) const;  // a replica's computed utilization
  int deviceCount() const { return static_cast<int>(replicaGraphs_.size()); }
  QCPGraph* gpuGraph(int gpu) const;  // a physical GPU's NVML utilization; null before its first sample
  int gpuCount() const { return static_cast<int>(gpuGraphs_.size()); }
  // The latest NVML sample of each physical GPU, by GPU: for the figures beside the chart.
  const std::map<int, ml::DeviceSample>& latestGpuSamples() const { return latest_; }
  QString title() const;
  // The hover text of a point: NVML's points add the GPU's memory and temperature at that time.
  QString tooltip(QCPAbstractPlottable* pl, double key, double value) const;

 protected:
  void rescaleToData() override;
  void syncData() override;

 private:
  QCPGraph* laneFor(const ml::DeviceSample& s);
  void updateLabels();
  QString nvmlTip(int gpu, double key) const;
  struct Extra {  // what an NVML point's tooltip shows besides the utilization
    double x;
    ml::DeviceSample sample;
  };
  double tmax_ = 0;
  double pauseOffset_ = 0;
  bool anyComputed_ = false;
  std::vector<QCPGraph*> replicaGraphs_;
  std::map<int, QCPGraph*> gpuGraphs_;
  std::map<QCPGraph*, StreamingDecimator> cols_;  // one per graph (map nodes stay put)
  std::map<int, std::vector<Extra>> extras_;      // by GPU, in time order
  std::map<int, ml::DeviceSample> latest_;
};

class StepBreakdownChart : public LiveChart {
  Q_OBJECT
 public:
  explicit StepBreakdownChart(QWidget* parent = nullptr);
  void setDevices(const std::vector<std::string>& names);
  void addStep(const ml::StepEvent& e);
  // Recomputes the bars from the last `window` steps (call once per frame).
  void updateBars();
  void clearData() override;
  // Shares of replica step time over the window, for the numbers next to the chart.
  double allreduceShare() const { return allreduceShare_; }
  double waitShare() const { return waitShare_; }
  double networkShare() const { return networkShare_; }      // several workers: the cross-worker hop
  double allgatherShare() const { return allgatherShare_; }  // the sharded optimizer's all-gather
  double inputShare() const { return inputShare_; }          // the micro-batches' input (gather, copy to the device)
  double computeShare() const { return 1.0 - inputShare_ - allreduceShare_ - waitShare_ - networkShare_ - allgatherShare_; }
  QCPBars* computeBars() const { return compute_; }
  QCPBars* inputBars() const { return input_; }          // in the legend only while some replica has input time
  QCPBars* networkBars() const { return network_; }      // in the legend only while some replica has network time
  QCPBars* allgatherBars() const { return allgather_; }  // in the legend only while some replica all-gathers

 protected:
  void rescaleToData() override;

 private:
  static constexpr size_t kWindow = 20;
  std::deque<std::vector<ml::ReplicaStep>> recent_;
  QCPBars *input_, *compute_, *allreduce_, *network_, *allgather_, *wait_;
  double allreduceShare_ = 0, waitShare_ = 0, networkShare_ = 0, allgatherShare_ = 0, inputShare_ = 0, ymax_ = 1;
  int devices_ = 1;
};

}  // namespace mlui
