// The Sweeps screen: define a grid from the current project (the Training fields as lists: batch
// sizes, learning rates, device lists, scaling rules), run it as stored runs with progress per
// point and Cancel, and compare the points: a heatmap of the chosen result over batch x learning
// rate per device list, a scatter of every point, and the table; finished points appear while
// the sweep runs. Stored sweeps can be reopened, resumed and exported as CSV. Clicking a point
// asks for its run in the Runs screen. The sweep runs on a worker thread; every figure shown is
// read back from the store.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include <QWidget>

#include "charts/SweepCharts.h"
#include "learn/SweepResults.h"

class QComboBox;
class QSplitter;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;
class QTableWidget;
class QTimer;

namespace ml {
class SweepRunner;
struct Project;
}  // namespace ml

namespace mlui {

class DataCache;
class ProjectDocument;

class SweepsView : public QWidget {
  Q_OBJECT
 public:
  SweepsView(ProjectDocument* doc, std::shared_ptr<DataCache> cache, std::function<QString()> storePath,
             QWidget* parent = nullptr);
  ~SweepsView() override;  // cancels a running sweep and waits for it

  // The grid fields, as a person types them.
  QLineEdit* batchField() const { return batches_; }
  QLineEdit* lrField() const { return lrs_; }
  QLineEdit* devicesField() const { return devices_; }
  QLineEdit* scalingField() const { return scalings_; }
  QSpinBox* epochsField() const { return epochs_; }
  QSpinBox* stepsField() const { return steps_; }
  QLineEdit* targetField() const { return target_; }
  QSpinBox* maxPointsField() const { return maxPoints_; }
  QSpinBox* earlyStopField() const { return earlyStop_; }
  QComboBox* measureBox() const { return measure_; }
  QTableWidget* pointTable() const { return table_; }
  SweepCharts* charts() const { return charts_; }
  QPushButton* cancelButton() const { return cancel_; }

  // Fills the lists from the current project (one value each).
  void fillFromProject();
  // Starts a new sweep from the fields; false (and errorOccurred) when the input is bad.
  bool start();
  // Resumes the shown sweep's unfinished points.
  bool resume();
  void cancel();
  bool isRunning() const { return running_; }
  // Reloads the list of stored sweeps and shows sweepId (or the newest).
  void refresh(int64_t sweepId = 0);
  int64_t shownSweep() const { return shown_; }
  const ml::SweepResults& results() const { return results_; }
  // Writes the shown sweep's CSV (one row per point); errorOccurred when it cannot.
  bool exportCsv(const QString& path);

 Q_SIGNALS:
  void sweepStarted(qint64 sweepId);
  void pointFinished(int point);
  void resultsLoaded();
  void sweepEnded(const QString& status);
  void runRequested(qint64 runId);
  void busyChanged(bool busy);
  void errorOccurred(const QString& title, const QString& message);

 protected:
  void resizeEvent(QResizeEvent* e) override;
  void fitTableWidth();

 private:
  QSplitter* split_ = nullptr;
  void launch(std::function<std::unique_ptr<ml::SweepRunner>()> make);
  void loadResults(int64_t sweepId);
  void showResults();
  void pollProgress();
  void openPoint(int point);
  void updateButtons();
  void finishRun(const QString& status, const QString& error);
  void reportNoPointTrained(const ml::SweepResults& r);

  ProjectDocument* doc_;
  std::shared_ptr<DataCache> cache_;
  std::function<QString()> storePath_;
  QLineEdit *batches_, *lrs_, *devices_, *scalings_, *target_;
  QSpinBox *epochs_, *steps_, *maxPoints_, *earlyStop_, *parallel_;
  QComboBox* measure_;
  QComboBox* sweepList_;
  QPushButton *run_, *cancel_, *resume_, *export_, *fromProject_;
  QLabel* status_;
  QLabel* best_;
  QTableWidget* table_;
  SweepCharts* charts_;
  QTimer* poll_;
  ml::SweepResults results_;
  int64_t shown_ = 0;
  int loadGeneration_ = 0;
  bool running_ = false;
  std::thread worker_;
  std::mutex mu_;
  ml::SweepRunner* runner_ = nullptr;  // the running one (guarded by mu_)
  std::atomic<bool> cancelRequested_{false};
};

}  // namespace mlui
