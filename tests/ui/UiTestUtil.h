// Shared set-up for the studio's QtTest suites: a temporary folder, a private run store
// ($MIRRORLAB_DB), private settings, the studio's resources, and small project files.
#pragma once
#include "data/Dataset.h"
#include "train/RecordedRun.h"

#include <optional>

#include <QApplication>
#include <QDir>
#include <QFile>
#include <QImage>
#include <QMessageBox>
#include <QSet>
#include <QSettings>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include "DashboardView.h"
#include "MainWindow.h"
#include "Theme.h"
#include "TrainingSession.h"
#include "project/Project.h"

namespace uitest {

// Call from initTestCase(): settings and the store go to a fresh temporary folder.
inline void isolate(QTemporaryDir& dir) {
  QStandardPaths::setTestModeEnabled(true);
  QCoreApplication::setOrganizationName(QStringLiteral("MirrorlabTest"));
  // One settings file per test process: ctest runs the suites in parallel.
  QCoreApplication::setApplicationName(QStringLiteral("mirrorlab-uitest-%1").arg(QCoreApplication::applicationPid()));
  QSettings().clear();  // no last project or recent files from an earlier run
  qputenv("MIRRORLAB_DB", dir.filePath(QStringLiteral("runs.sqlite")).toUtf8());
  QDir::setCurrent(QStringLiteral(MIRRORLAB_SOURCE_DIR));  // projects/fashion-mlp.json is found here
  static bool themed = false;
  if (!themed) {
    mlui::applyStudioTheme(*qApp);
    themed = true;
  }
}

// A small spirals project that trains in well under a second per epoch on 2 simulated devices.
inline ml::Project spiralsProject(const std::string& devices = "cpu:2", int epochs = 12) {
  ml::Project p;
  p.name = "ui-test spirals";
  p.model.inputShape = {2};
  p.model.layers = {ml::makeLayerSpec("Dense", {{"units", 32}, {"activation", "tanh"}}),
                    ml::makeLayerSpec("Dense", {{"units", 3}, {"activation", "softmax"}})};
  p.data.kind = ml::DataKind::Spirals;
  p.data.samples = 2400;
  p.data.classes = 3;
  p.data.noise = 0.2;
  p.data.seed = 7;
  p.data.validationSplit = 0.2;
  p.training.epochs = epochs;
  p.training.batchSize = 32;
  p.training.optimizer.learningRate = 0.01;
  p.distribute.devices = ml::parseDevices(devices);
  return p;
}

// Trains spiralsProject(devices, epochs) (at most maxSteps updates; 0: every epoch) with the core,
// as the CLI does, recording it in the store at db; returns the run's id (-1 when not recorded).
inline int64_t recordRun(const QString& db, const std::string& devices, int epochs, int64_t maxSteps, const std::string& name) {
  ml::Project p = spiralsProject(devices, epochs);
  auto data = std::make_shared<const ml::DataSplit>(ml::loadData(p.data));
  ml::RecordedRunOptions o;
  o.trainer.runName = name;
  o.trainer.maxSteps = maxSteps;
  o.storePath = db.toStdString();
  return ml::RecordedRun(p, data, o).run().runId.value_or(-1);
}

inline QString writeProject(QTemporaryDir& dir, const ml::Project& p, const QString& name) {
  const QString path = dir.filePath(name);
  p.save(path.toStdString());
  return path;
}

// The text of the first error dialog the window opened (non-blocking), or empty.
inline QString errorDialogText(QWidget* window) {
  for (auto* box : window->findChildren<QMessageBox*>(QStringLiteral("ErrorDialog"))) return box->text();
  return {};
}

inline int distinctColors(const QImage& img) {
  QSet<QRgb> colors;
  const QImage i = img.convertToFormat(QImage::Format_RGB32);
  for (int y = 0; y < i.height(); y += 2)
    for (int x = 0; x < i.width(); x += 2) colors.insert(i.pixel(x, y));
  return colors.size();
}

// Trains the project in the window and waits for the end; returns the finish event. A run that
// does not end in time fails the test (and comes back as Failed, never as a default Finished).
inline ml::RunFinished trainInWindow(mlui::MainWindow& w, int maxSteps = 0, std::optional<int64_t>* runId = nullptr) {
  ml::RunFinished out;
  out.status = ml::RunStatus::Failed;
  out.message = "training did not end in 60 s";
  bool ended = false;
  auto c = QObject::connect(w.session(), &mlui::TrainingSession::runEnded, &w,
                            [&](const ml::RunFinished& f, std::optional<int64_t> id) {
                              out = f;
                              if (runId) *runId = id;
                              ended = true;
                            });
  w.dashboard()->setMaxSteps(maxSteps);
  w.dashboard()->trainAction()->trigger();
  if (!QTest::qWaitFor([&] { return ended; }, 60000)) QTest::qFail("training did not end in 60 s", __FILE__, __LINE__);
  QObject::disconnect(c);
  return out;
}

}  // namespace uitest
