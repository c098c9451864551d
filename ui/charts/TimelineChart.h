// The last ~10 steps as a timeline: one lane per device, each step's phases (forward, backward,
// wait, all-reduce, network, optimizer, all-gather) as coloured bars from the replica's start
// time. Shows why the fastest replica waits and where the all-reduce sits. Devices named
// "host/workerK/device" on more than one host are drawn as one lane group per host: a shaded band
// with the host's name, a gap between groups, and lanes labelled without the host.
#pragma once
#include <deque>
#include <vector>

#include "Theme.h"
#include "charts/LiveChart.h"
#include "telemetry/Events.h"

namespace mlui {

class TimelineChart : public LiveChart {
  Q_OBJECT
 public:
  explicit TimelineChart(QWidget* parent = nullptr);
  void setDevices(const std::vector<std::string>& names);
  void addStep(const ml::StepEvent& e);
  void updateBars();  // once per frame
  void clearData() override;
  int barCount() const;             // visible phase bars, for tests
  int barCount(Phase phase) const;  // of one phase: the legend shows Network only when it is drawn
  // The lane groups, one per host in device order (empty with one host), and a lane's group.
  QStringList hostGroups() const { return hosts_; }
  int laneGroup(int device) const;
  double lanePosition(int device) const;  // the lane's centre on the y axis

 protected:
  void rescaleToData() override;

 private:
  struct Bar {
    int device;
    int64_t step;
    Phase phase;
    double t0, t1;
  };
  QString tipAt(const QPointF& pos) const;
  void drawHostBands(const std::vector<int>& groupOf);

  static constexpr size_t kSteps = 10;
  std::deque<ml::StepEvent> recent_;
  std::vector<QCPItemRect*> pool_;
  std::vector<Bar> bars_;
  std::vector<double> lanes_;  // y of each device's lane (gaps between host groups)
  std::vector<int> groupOf_;   // each device's host group, or 0
  QStringList hosts_;
  std::vector<QCPAbstractItem*> bands_;  // the host groups' bands and names
  int devices_ = 1;
  double t0_ = 0, t1_ = 1;
  bool dirty_ = false;
};

}  // namespace mlui
