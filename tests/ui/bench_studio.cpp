// Studio speed figures (not a test: run by hand, prints numbers).
//   cold start to a usable window, chart redraw rate with 4 devices x 100,000 points, what one
//   dashboard-sized chart's frame costs (full replot, data layer only, paint),
//   training throughput with the dashboard watching vs. the same run headless (as the CLI runs it:
//   recorded, with the project's checkpoints),
//   interleaved in rounds (the order alternates), with the median ratio, its spread, the frame
//   rate the dashboard's redraw budget settled on (read back from the stored run's UI cost), the
//   UI thread's whole CPU time per second of training, and how many frames redrew only the graphs.
// Usage: bench_studio [project.json|-] [steps] [rounds]
//   (default projects/fashion-mlp.json on cpu:2, 1500 steps, 5 rounds). Each run trains `steps`
//   steps whatever the project's epochs, e.g. `bench_studio - 15000 9`: 32 epochs of the MLP,
//   about 6 s a run on the development machine, so that a run's start and end do not decide the
//   figure. MIRRORLAB_BENCH_EVENTS=1 also lists which widgets got layout requests and paints.
#include "data/Dataset.h"
#include "train/Trainer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <thread>

#include <QAction>
#include <QApplication>
#include <QElapsedTimer>
#include <QThread>
#include <QtTest>

#include "DashboardView.h"
#include "MainWindow.h"
#include "ProjectDocument.h"
#include "Theme.h"
#include "TrainingSession.h"
#include "charts/DeviceCharts.h"
#include "charts/FrameBudget.h"
#include "charts/MetricChart.h"
#include "store/RunStore.h"
#include "train/RecordedRun.h"

// The same run as `mirrorlab-cli train` does it: a progress consumer, the run store's recorder (into
// a store of its own) and the project's checkpoints, each of which waits until the store holds its
// step, so that the ratio measures what watching adds.
static double headlessSamplesPerSec(const ml::Project& p, int64_t steps, const std::string& db) {
  auto data = std::make_shared<const ml::DataSplit>(ml::loadData(p.data));
  ml::RecordedRunOptions o;
  o.trainer.maxSteps = steps;
  o.storePath = db;
  ml::RecordedRun run(p, data, o);
  auto ch = run.subscribe(1 << 16);  // a consumer like the CLI's progress line
  std::atomic<bool> done{false};
  std::thread consumer([&] {
    std::vector<ml::Event> batch;
    while (!done.load()) {
      ch->waitFor(std::chrono::milliseconds(50));
      batch.clear();
      ch->drain(batch);
    }
  });
  const auto f = run.run().finished;
  done = true;
  consumer.join();
  return static_cast<double>(f.steps * run.plan().globalBatch) / f.seconds;
}

// MIRRORLAB_BENCH_EVENTS=1: which widgets get layout requests and paints while the studio trains.
class EventCounter : public QObject {
 public:
  std::map<std::string, int> layouts, paints;
  bool on = false;
  bool eventFilter(QObject* o, QEvent* e) override {
    if (on && (e->type() == QEvent::LayoutRequest || e->type() == QEvent::Paint)) {
      std::string name = o->metaObject()->className();
      for (QObject* p = o->parent(); p && name.size() < 200; p = p->parent())
        name += std::string("<") + p->metaObject()->className() +
                (p->objectName().isEmpty() ? "" : ":" + p->objectName().toStdString());
      ++(e->type() == QEvent::LayoutRequest ? layouts : paints)[name];
    }
    return false;
  }
};
static EventCounter* g_events = nullptr;

struct StudioRun {
  double samplesPerSec = 0;
  double fps = 0, drawMsPerSec = 0;  // from the stored run: what the dashboard drew while it trained
  double uiCpuMsPerSec = 0;          // all of the UI thread's CPU time while the run lasted (events, frames, paints)
};

static StudioRun studioRun(mlui::MainWindow& w, int64_t steps, int64_t globalBatch, const std::string& db) {
  ml::RunFinished out;
  std::optional<int64_t> runId;
  bool ended = false;
  auto c = QObject::connect(w.session(), &mlui::TrainingSession::runEnded, &w,
                            [&](const ml::RunFinished& f, std::optional<int64_t> id) {
                              out = f;
                              runId = id;
                              ended = true;
                            });
  w.dashboard()->setMaxSteps(static_cast<int>(steps));
  const double cpu0 = mlui::FrameBudget::threadCpuMs();
  if (g_events) g_events->on = true;
  w.dashboard()->trainAction()->trigger();
  if (!QTest::qWaitFor([&] { return ended; }, 600000)) std::fprintf(stderr, "the studio run did not end within 10 minutes\n");
  const double cpu1 = mlui::FrameBudget::threadCpuMs();
  if (g_events) g_events->on = false;
  QObject::disconnect(c);
  StudioRun r;
  r.samplesPerSec = static_cast<double>(out.steps * globalBatch) / out.seconds;
  r.uiCpuMsPerSec = out.seconds > 0 ? (cpu1 - cpu0) / out.seconds : 0;
  if (runId) {
    const auto d = ml::RunStore::open(db).loadRun(*runId);
    if (d.uiFrames && d.seconds && *d.seconds > 0) {
      r.fps = static_cast<double>(*d.uiFrames) / *d.seconds;
      r.drawMsPerSec = d.uiDrawMs.value_or(0) / *d.seconds;
    }
  }
  return r;
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
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
  if (qEnvironmentVariableIntValue("MIRRORLAB_BENCH_EVENTS")) {
    g_events = new EventCounter;
    app.installEventFilter(g_events);
  }
  QDir::setCurrent(QStringLiteral(MIRRORLAB_SOURCE_DIR));

  // 1. Cold start: QApplication to the exposed, painted main window on the example project.
  auto* w = new mlui::MainWindow;
  const bool defaultProject = argc <= 1 || std::string(argv[1]) == "-";  // "-": the default, on cpu:2
  const QString project = defaultProject ? mlui::MainWindow::findDefaultProject() : QString::fromLocal8Bit(argv[1]);
  w->openProject(project);
  w->show();
  if (!QTest::qWaitForWindowExposed(w)) std::fprintf(stderr, "the window was not shown within 5 s\n");
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
    if (!QTest::qWaitForWindowExposed(&util)) std::fprintf(stderr, "the chart was not shown\n");
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
    if (!QTest::qWaitForWindowExposed(&loss)) std::fprintf(stderr, "the chart was not shown\n");
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

  // 2b. What one frame of one dashboard-sized chart costs, in the UI thread's CPU time: a full
  //     replot, a replot of the data layer only, and the paint that puts it on screen.
  {
    mlui::MetricChart loss(QStringLiteral("Loss"), QStringLiteral("step"), QStringLiteral("loss"), QStringLiteral("loss"),
                           QColor(0x4e, 0x79, 0xa7), true);
    loss.resize(480, 300);
    for (int i = 0; i < 20000; ++i) loss.addStep(i, 1.0 / (1 + i * 0.001) + 0.05 * std::sin(i * 0.7));
    loss.show();
    if (!QTest::qWaitForWindowExposed(&loss)) std::fprintf(stderr, "the chart was not shown\n");
    if (qEnvironmentVariableIntValue("NOFAST")) loss.setPlottingHint(QCP::phFastPolylines, false);
    if (qEnvironmentVariableIntValue("THIN")) loss.smoothGraph()->setPen(QPen(QColor(0x4e, 0x79, 0xa7), 1));
    loss.refresh();
    QCoreApplication::processEvents();
    auto cpuPer = [](int n, const std::function<void()>& f) {
      const double t0 = mlui::FrameBudget::threadCpuMs();
      for (int i = 0; i < n; ++i) f();
      return (mlui::FrameBudget::threadCpuMs() - t0) / n;
    };
    const double full = cpuPer(300, [&] { loss.replot(QCustomPlot::rpQueuedRefresh); });
    const double data = cpuPer(300, [&] { loss.layer(QStringLiteral("main"))->replot(); });
    const double paint = cpuPer(300, [&] { loss.repaint(); });
    std::printf("one 480x300 chart, CPU ms: full replot %.2f, data layer only %.2f, paint to the window %.2f\n", full, data,
                paint);
  }

  // 3. Training throughput with the dashboard watching vs. headless, interleaved in rounds; the
  //    order alternates so a slow spell of this shared VM does not always hit the same side.
  const int64_t steps = argc > 2 ? std::atoll(argv[2]) : 1500;
  const int rounds = argc > 3 ? std::max(1, std::atoi(argv[3])) : 5;
  ml::Project p = w->document()->project();
  if (defaultProject) p.distribute.devices = ml::parseDevices("cpu:2");
  // `steps` steps whatever the project's epochs (its 5 epochs are 2,345 steps, under a second on
  // this machine now): a run long enough that its start and end do not decide the figure.
  p.training.epochs = std::max(p.training.epochs, 1000);
  w->document()->reset(p);
  w->resize(1500, 950);
  w->showPage(mlui::MainWindow::DashboardPage);
  const std::string db = qEnvironmentVariable("MIRRORLAB_DB").toStdString();
  const std::string headlessDb = dir.filePath(QStringLiteral("headless.sqlite")).toStdString();
  const int64_t globalBatch = p.training.perDeviceBatch ? p.training.batchSize * 2 : p.training.batchSize;
  std::vector<double> ratios, fps, drawMs, uiCpu, headless, studio;
  std::printf("training %s on %s, %lld steps, %d rounds (dashboard visible, %d cores):\n", p.name.c_str(),
              p.distribute.devices.spec.c_str(), static_cast<long long>(steps), rounds, QThread::idealThreadCount());
  for (int round = 0; round < rounds; ++round) {
    double h = 0;
    StudioRun s;
    if (round % 2 == 0) {
      h = headlessSamplesPerSec(p, steps, headlessDb);
      s = studioRun(*w, steps, globalBatch, db);
    } else {
      s = studioRun(*w, steps, globalBatch, db);
      h = headlessSamplesPerSec(p, steps, headlessDb);
    }
    headless.push_back(h);
    studio.push_back(s.samplesPerSec);
    ratios.push_back(s.samplesPerSec / h);
    fps.push_back(s.fps);
    drawMs.push_back(s.drawMsPerSec);
    uiCpu.push_back(s.uiCpuMsPerSec);
    std::printf(
        "  round %d: headless %.0f samples/s, studio %.0f samples/s (%.1f%%), dashboard %.1f fps, %.1f ms drawing/s, "
        "UI thread %.1f ms CPU/s\n",
        round + 1, h, s.samplesPerSec, 100.0 * ratios.back(), s.fps, s.drawMsPerSec, s.uiCpuMsPerSec);
    std::fflush(stdout);
  }
  const auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
  std::printf(
      "median studio/headless: %.1f%% (spread %.1f%% .. %.1f%% over %d rounds); headless median %.0f samples/s, "
      "studio median %.0f samples/s\n",
      100.0 * median(ratios), 100.0 * *lo, 100.0 * *hi, rounds, median(headless), median(studio));
  std::printf(
      "frame rate the redraw budget settled on: %.1f fps (median; %.1f ms of drawing per second, i.e. %.1f%% of "
      "one core); cost per frame %.1f ms\n",
      median(fps), median(drawMs), median(drawMs) / 10.0, w->dashboard()->frameBudget().frameCostMs());
  std::printf("UI thread in all (events, frames, paints, labels): %.1f ms of CPU per second of training (median)\n",
              median(uiCpu));
  std::printf("average replot per chart (ms):");
  for (auto* c : w->dashboard()->charts()) std::printf(" %s %.1f;", qPrintable(c->accessibleName()), c->replotTime(true));
  std::printf("\nframes that redrew only the data layers / everything, per chart:");
  for (auto* c : w->dashboard()->charts())
    std::printf(" %s %d/%d;", qPrintable(c->accessibleName()), c->dataOnlyFrames(), c->fullFrames());
  std::printf("\n");
  if (g_events) {
    for (auto* m : {&g_events->layouts, &g_events->paints}) {
      std::printf(m == &g_events->layouts ? "layout requests:\n" : "paints:\n");
      for (const auto& [k, v] : *m) std::printf("  %6d %s\n", v, k.c_str());
    }
  }
  delete w;
  return 0;
}
