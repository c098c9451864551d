// The Devices screen: a card per detected GPU (name, memory, tick box), the simulated CPU devices
// (count), the all-reduce algorithm, and one line saying which path will run and why.
#pragma once
#include <QWidget>

#include "backend/DeviceProbe.h"

class QButtonGroup;
class QCheckBox;
class QLabel;
class QPushButton;
class QSpinBox;
class QVBoxLayout;

namespace mlui {

class ProjectDocument;

class DevicesView : public QWidget {
  Q_OBJECT
 public:
  explicit DevicesView(ProjectDocument* doc, QWidget* parent = nullptr);
  bool probed() const { return probed_; }
  const ml::DeviceReport& report() const { return report_; }
  QLabel* reasonLabel() const { return reason_; }
  QLabel* pathLabel() const { return path_; }
  // The line that trains this project as its workers on a cluster (mpirun with a hostfile).
  QString mpirunCommand() const;

 Q_SIGNALS:
  void probeFinished();

 private:
  void onProbed(const ml::DeviceReport& r);
  void refresh();
  void writeDevices();
  void writeAllReduce(const QString& name);

  ProjectDocument* doc_;
  ml::DeviceReport report_;
  bool probed_ = false, refreshing_ = false;
  QLabel* reason_;
  QWidget* gpuCards_;
  QVBoxLayout* gpuLayout_;
  QList<QCheckBox*> gpuChecks_;
  QSpinBox* cpuCount_;
  QLabel* cpuInfo_;
  QLabel* chips_;
  QButtonGroup* algo_;
  QSpinBox* bucket_;
  QCheckBox* wireBf16_ = nullptr;
  QCheckBox* shard_;
  QCheckBox* tf32_ = nullptr;
  QSpinBox* workers_;
  QPushButton* copyCommand_;
  QLabel* workersInfo_;
  QLabel* path_;
};

}  // namespace mlui
