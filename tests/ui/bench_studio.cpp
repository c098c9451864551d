// Studio speed figures (not a test: run by hand, prints numbers).
//   cold start to a usable window, chart redraw rate with 4 devices x 100,000 points,
//   training throughput with the dashboard watching vs. the same run headless (as the CLI runs it).
// Usage: bench_studio [project.json] [steps]   (default projects/fashion-mlp.json on cpu:2, 1500 steps)
#include "data/Dataset.h"
#include "train/Trainer.h"

#include <chrono>
#include <cstdio>
#include <thread>

#include <QAction>
#include <QApplication>
#include <QElapsedTimer>
#include <QtTest>

#include "DashboardView.h"
#include "MainWindow.h"
#include "ProjectDocument.h"
#include "TrainingSession.h"
#include "Theme.h"
#include "charts/DeviceCharts.h"
#include "charts/MetricChart.h"

static double headlessSamplesPerSec(const ml::Project& p, int64_t steps) {
  auto data = std::make_shared<const ml::DataSplit>(ml::loadData(p.data));
  ml::TelemetryHub hub;
  auto ch = hub.subscribe(1 << 16);  // a consumer like the CLI's progress line
  ml::TrainerOptions o;
  o.maxSteps = steps;
  ml::Trainer t(p, data, hub, o);
  std::atomic<bool> done{false};
  std::thread consumer([&] {
    std::vector<ml::Event> batch;
    while (!done.load()) {
      ch->waitFor(std::chrono::milliseconds(50));
      batch.clear();
      ch->drain(batch);
    }
  });
  const auto f = t.run();
  done = true;
  consumer.join();
  return static_cast<double>(f.steps * t.plan().globalBatch) / f.seconds;
}

static double studioSamplesPerSec(mlui::MainWindow& w, int64_t steps, int64_t globalBatch) {
  ml::RunFinished out;
  bool ended = false;
  auto c = QObject::connect(w.session(), &mlui::TrainingSession::runEnded, &w,
                            [&](const ml::RunFinished& f, std::optional<int64_t>) { out = f; ended = true; });
  w.dashboard()->setMaxSteps(static_cast<int>(steps));
  w.dashboard()->trainAction()->trigger();
  QTest::qWaitFor([&] { return ended; }, 600000);
  QObject::disconnect(c);
  return static_cast<double>(out.steps * globalBatch) / out.seconds;
}

int main(int argc, char** argv) {
  QElapsedTimer start;
  start.start();
  QApplication app(argc, argv);
  QStandardPaths::setTestModeEnabled(true);
  QCoreApplication::setOrganizationName(QStringLiteral("MirrorlabBench"));
  QTemporaryDir dir;
  qputenv("MIRRORLAB_DB", dir.filePath(QStringLiteral("bench.sqlite")).toUtf8());
  mlui::applyStudioTheme(app);
  QDir::setCurrent(QStringLiteral(MIRRORLAB_SOURCE_DIR));

  // 1. Cold start: QApplication to the exposed, painted main window on the example project.
  auto* w = new mlui::MainWindow;
  const QString project = argc > 1 ? QString::fromLocal8Bit(argv[1]) : mlui::MainWindow::findDefaultProject();
  w->openProject(project);
  w->show();
  QTest::qWaitForWindowExposed(w);
  QCoreApplication::processEvents();
  std::printf("cold start to a usable window: %.0f ms\n", static_cast<double>(start.elapsed()));

  // 2. Chart redraw: 4 devices x 100,000 points in the utilization chart, 100,000 in the loss chart.
  {
    mlui::UtilizationChart util;
    util.resize(640, 360);
    util.setDevices({"cpu:0", "cpu:1", "cpu:2", "cpu:3"});
    for (int i = 0; i < 100000; ++i)
      for (int d = 0; d < 4; ++d) util.addSample({i * 0.01, d, 0.5 + 0.4 * std::sin(i * 0.001 + d), 0});
    util.show();
    QTest::qWaitForWindowExposed(&util);
    util.refresh();
    QElapsedTimer t;
    t.start();
    int frames = 0;
    for (; t.elapsed() < 2000; ++frames) {
      util.xAxis->moveRange(0.5);  // a real redraw every frame
      util.replot(QCustomPlot::rpImmediateRefresh);
    }
    std::printf("utilization chart, 4 x 100,000 points: %.1f frames/s\n", frames * 1000.0 / static_cast<double>(t.elapsed()));
  }
  {
    mlui::MetricChart loss(QStringLiteral("Loss"), QStringLiteral("step"), QStringLiteral("loss"), QStringLiteral("loss"),
                           QColor(0x4e, 0x79, 0xa7), true);
    loss.resize(640, 360);
    for (int i = 0; i < 100000; ++i) loss.addStep(i, 1.0 / (1 + i * 0.001) + 0.05 * std::sin(i * 0.7));
    loss.show();
    QTest::qWaitForWindowExposed(&loss);
    loss.refresh();
    QElapsedTimer t;
    t.start();
    int frames = 0;
    for (; t.elapsed() < 2000; ++frames) {
      loss.addStep(100000 + frames, 0.1);
      loss.refresh();
      loss.replot(QCustomPlot::rpImmediateRefresh);
    }
    std::printf("loss chart, 100,000 steps (raw + smoothed), appending: %.1f frames/s\n",
                frames * 1000.0 / static_cast<double>(t.elapsed()));
  }

  // 3. Training throughput with the dashboard watching vs. headless, alternating, best of 2.
  const int64_t steps = argc > 2 ? std::atoll(argv[2]) : 1500;
  ml::Project p = w->document()->project();
  if (argc <= 1) p.distribute.devices = "cpu:2";
  w->document()->reset(p);
  w->resize(1500, 950);
  w->showPage(mlui::MainWindow::DashboardPage);
  double best[2] = {0, 0};
  for (int round = 0; round < 2; ++round) {
    best[0] = std::max(best[0], headlessSamplesPerSec(p, steps));
    best[1] = std::max(best[1], studioSamplesPerSec(*w, steps, p.training.perDeviceBatch ? p.training.batchSize * 2 : p.training.batchSize));
  }
  std::printf("training %s on %s, %lld steps: headless %.0f samples/s, studio watching %.0f samples/s (%.1f%%)\n",
              p.name.c_str(), p.distribute.devices.c_str(), static_cast<long long>(steps), best[0], best[1],
              100.0 * best[1] / best[0]);
  delete w;
  return 0;
}
