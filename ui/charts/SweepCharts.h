// The charts of a sweep: one heatmap of the chosen result over batch size x learning rate per
// device list (and scaling rule), each cell labelled with its value, and a scatter of every point
// (learning rate against the result, one series per batch size). Both draw only what a
// SweepResults read from the store holds; clicking a cell or a dot names the point.
#pragma once
#include <optional>
#include <vector>

#include <QWidget>

#include "learn/SweepResults.h"

class QCPColorMap;
class QCustomPlot;
class QHBoxLayout;

namespace mlui {

enum class SweepMeasure { FinalMetric, SecondsToTarget, SamplesToTarget, SamplesPerSec };
QString measureName(SweepMeasure m, const QString& metric);
std::optional<double> measureOf(const ml::SweepPointResult& p, SweepMeasure m);

class SweepCharts : public QWidget {
  Q_OBJECT
 public:
  explicit SweepCharts(QWidget* parent = nullptr);

  void show(const ml::SweepResults& results, SweepMeasure measure);
  void clear();

  // One heatmap per (device list, scaling rule), in the grid's order.
  int heatmapCount() const { return static_cast<int>(maps_.size()); }
  QCustomPlot* heatmapPlot(int i) const { return maps_[static_cast<size_t>(i)].plot; }
  QCPColorMap* heatmap(int i) const { return maps_[static_cast<size_t>(i)].map; }
  QString heatmapTitle(int i) const;
  // The learning rate and batch size of cell (column, row) of heatmap i.
  double heatmapLr(int i, int column) const;
  int64_t heatmapBatch(int i, int row) const;
  QCustomPlot* scatter() const { return scatter_; }
  // The point whose dot or cell was last clicked (tests), and the signal for it.
  std::optional<int> pointAt(int heatmap, int column, int row) const;

 Q_SIGNALS:
  void pointClicked(int point);

 private:
  struct Map {
    QCustomPlot* plot = nullptr;
    QCPColorMap* map = nullptr;
    std::string devices, scaling;
  };
  void buildHeatmaps();
  void buildScatter();

  ml::SweepResults results_;
  SweepMeasure measure_ = SweepMeasure::FinalMetric;
  std::vector<int64_t> batches_;
  std::vector<double> lrs_;
  std::vector<Map> maps_;
  QHBoxLayout* mapsRow_;
  QCustomPlot* scatter_;
  std::vector<std::vector<int>> scatterPoints_;  // per scatter graph: the point of each dot
};

}  // namespace mlui
