// The Learn screen: lessons load and run for real, the scaling experiment drives real stored runs
// and plots one point per device count, the replay draws a stored run's measured durations to
// scale, the sync panel keeps modelled and measured apart, the code panel copies runnable code,
// and a run's timeline exports as a trace. Set MIRRORLAB_SHOTS=DIR to keep pictures of the panels.
#include "data/Dataset.h"
#include "distribute/MirroredStrategy.h"
#include "learn/Lesson.h"
#include "store/Recorder.h"
#include "store/RunStore.h"
#include "train/Trainer.h"

#include <QClipboard>
#include <QComboBox>
#include <QGuiApplication>
#include <QListWidget>
#include <QSignalSpy>
#include <QTableWidget>
#include <QVBoxLayout>

#include <qcustomplot.h>

#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "DataCache.h"
#include "MainWindow.h"
#include "ProjectDocument.h"
#include "RunsView.h"
#include "UiTestUtil.h"
#include "learn/CodePanel.h"
#include "learn/LearnView.h"
#include "learn/LessonsPanel.h"
#include "learn/LinkCalibration.h"
#include "learn/ScalingPanel.h"
#include "learn/StepDiagram.h"
#include "learn/StepReplayPanel.h"
#include "learn/SyncCostPanel.h"

class LearnTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  QString db_;

  static void shot(QWidget* w, const char* name) {
    const QByteArray d = qgetenv("MIRRORLAB_SHOTS");
    if (d.isEmpty()) return;
    for (auto* plot : w->findChildren<QCustomPlot*>()) plot->replot();
    QCoreApplication::processEvents();
    QTest::qWait(50);
    w->grab().save(QString::fromUtf8(d) + QLatin1Char('/') + QLatin1String(name) + QStringLiteral(".png"));
  }

  int64_t recordRun(const std::string& devices, int64_t steps, const std::string& name) {
    return uitest::recordRun(db_, devices, 3, steps, name);
  }

 private Q_SLOTS:
  void initTestCase() {
    uitest::isolate(dir_);
    db_ = dir_.filePath(QStringLiteral("learn.sqlite"));
    qputenv("MIRRORLAB_DB", db_.toUtf8());
  }

  // The window has a Learn screen with its five panels.
  void windowHasLearnScreen() {
    mlui::MainWindow w;
    w.openInitialProject();
    w.resize(1500, 950);
    w.show();
    w.showPage(mlui::MainWindow::LearnPage);
    QCOMPARE(w.currentPage(), mlui::MainWindow::LearnPage);
    auto* nav = w.findChild<QListWidget*>(QStringLiteral("NavList"));
    QVERIFY(nav);
    QCOMPARE(nav->item(mlui::MainWindow::LearnPage)->text(), QStringLiteral("Learn"));
    QVERIFY(w.learnView()->isVisible());
    // The lessons load when the screen opens: every lesson file of projects/lessons.
    QTRY_VERIFY(!w.learnView()->lessons()->lessons().empty());
    QCOMPARE(static_cast<int>(w.learnView()->lessons()->lessons().size()), 9);
    QVERIFY(w.learnView()->lessons()->loadError().isEmpty());
    shot(&w, "learn-lessons");
  }

  // A lesson runs its real experiments after the learner commits, and the reveal holds the
  // measured figures (no placeholder left), the verdict, and one stored run per experiment.
  void lessonRunsAndReveals() {
    mlui::LessonsPanel panel([this] { return db_; });
    panel.resize(1300, 900);
    panel.show();
    QVERIFY(panel.loadLessons(QStringLiteral(MIRRORLAB_SOURCE_DIR "/projects/lessons")));
    int index = -1;
    for (int i = 0; i < static_cast<int>(panel.lessons().size()); ++i)
      if (panel.lessons()[static_cast<size_t>(i)].id == "copies-and-shards") index = i;
    QVERIFY(index >= 0);
    panel.selectLesson(index);
    QVERIFY(!panel.commitAndRun());  // no answer yet: nothing runs
    const int correct = panel.lessons()[static_cast<size_t>(index)].question.correct;
    panel.chooseAnswer(correct);
    panel.setMaxSteps(12);
    QSignalSpy done(&panel, &mlui::LessonsPanel::lessonFinished);
    QVERIFY(panel.commitAndRun());
    QVERIFY(panel.isRunning());
    QVERIFY(done.wait(60000));
    QCOMPARE(done.front().front().toBool(), true);
    QVERIFY(panel.outcome().has_value());
    const auto& out = *panel.outcome();
    QCOMPARE(static_cast<int>(out.experiments.size()), 1);
    QCOMPARE(out.experiments[0].finished.steps, int64_t(12));
    QVERIFY(!panel.revealText().contains(QLatin1Char('{')));
    QVERIFY(panel.revealText().contains(QStringLiteral("16")));  // 64 samples split over 4 replicas
    QVERIFY(panel.verdictText().contains(QStringLiteral("right")));
    // Live chart: one graph per experiment with every step's loss.
    QCOMPARE(panel.lossChart()->graphCount(), 1);
    QCOMPARE(panel.lossChart()->graph(0)->dataCount(), 12);
    // The live diagram shows the last step's four shards and replicas.
    QCOMPARE(panel.liveDiagram()->replicaCount(), 4);
    for (int r = 0; r < 4; ++r) QCOMPARE(panel.liveDiagram()->step().replicas[static_cast<size_t>(r)].samples, int64_t(16));
    QVERIFY(out.experiments[0].runId.has_value());
    auto store = ml::RunStore::open(db_.toStdString());
    const auto detail = store.loadRun(*out.experiments[0].runId);
    QCOMPARE(detail.summary.replicas, 4);
    shot(&panel, "learn-lesson-done");
  }

  // A bad lesson file gives an error that names the file and the field.
  void badLessonFileIsNamed() {
    QTemporaryDir root;  // root/spirals.json and root/lessons/bad.json, as in projects/
    QVERIFY(QFile::copy(QStringLiteral(MIRRORLAB_SOURCE_DIR "/projects/spirals.json"),
                        root.filePath(QStringLiteral("spirals.json"))));
    QVERIFY(QDir(root.path()).mkdir(QStringLiteral("lessons")));
    const QString lessonsDir = root.filePath(QStringLiteral("lessons"));
    {
      std::ofstream f((lessonsDir + QStringLiteral("/bad.json")).toStdString());
      f << R"({"schema_version": 1, "id": "bad", "order": 1, "title": "t", "idea": "i", "project": "spirals.json",
               "experiments": [], "question": {"text": "q", "choices": ["a", "b"], "correct": 5, "explanation": "e"},
               "reveal": "r"})";
    }
    mlui::LessonsPanel panel([this] { return db_; });
    QSignalSpy errors(&panel, &mlui::LessonsPanel::errorOccurred);
    QVERIFY(!panel.loadLessons(lessonsDir));
    QCOMPARE(errors.count(), 1);
    QVERIFY2(panel.loadError().contains(QStringLiteral("bad.json")), qPrintable(panel.loadError()));
    QVERIFY2(panel.loadError().contains(QStringLiteral("experiments")) || panel.loadError().contains(QStringLiteral("correct")),
             qPrintable(panel.loadError()));
  }

  // One click runs one stored run per device count; the chart holds one point per count.
  void scalingExperimentRunsForReal() {
    auto cache = std::make_shared<mlui::DataCache>();
    const ml::Project project = uitest::spiralsProject("cpu:1", 3);
    mlui::ScalingPanel panel([project] { return project; }, cache, [this] { return db_; });
    panel.resize(1300, 850);
    panel.show();
    panel.setDevices(QStringLiteral("cpu:1,2"));
    panel.setKeep(ml::BatchPolicy::KeepGlobal);
    panel.setSteps(15);
    const auto before = ml::RunStore::open(db_.toStdString()).listRuns().size();
    QSignalSpy rows(&panel, &mlui::ScalingPanel::rowFinished);
    QSignalSpy done(&panel, &mlui::ScalingPanel::finished);
    QVERIFY(panel.start());
    QVERIFY(!panel.start());  // one experiment at a time
    QVERIFY(done.wait(60000));
    QCOMPARE(done.front().front().toBool(), true);
    QCOMPARE(rows.count(), 2);
    QCOMPARE(static_cast<int>(panel.rows().size()), 2);
    QCOMPARE(panel.measuredGraph()->dataCount(), 2);
    QCOMPARE(panel.idealGraph()->dataCount(), 2);
    QCOMPARE(panel.efficiencyBars()->data()->size(), 2);
    QCOMPARE(panel.syncBars()->data()->size(), 2);
    QCOMPARE(panel.table()->rowCount(), 2);
    // The plotted points are the measured rows: x = devices, y = samples/s against the first row.
    const auto& r = panel.rows();
    QCOMPARE(panel.measuredGraph()->data()->at(1)->key, 2.0);
    QCOMPARE(panel.measuredGraph()->data()->at(1)->value, r[1].samplesPerSecond / r[0].samplesPerSecond);
    QCOMPARE(panel.idealGraph()->data()->at(1)->value, 2.0);
    QCOMPARE(r[0].globalBatch, r[1].globalBatch);  // the global batch was kept
    QCOMPARE(r[1].perReplicaBatch, r[0].globalBatch / 2);
    QVERIFY(r[0].stepSeconds > 0 && r[1].stepSeconds > 0);
    QVERIFY(!panel.explanation().isEmpty());
    auto store = ml::RunStore::open(db_.toStdString());
    QCOMPARE(store.listRuns().size(), before + 2);
    for (const auto& row : r) {
      QVERIFY(row.runId.has_value());
      QCOMPARE(store.loadRun(*row.runId).summary.replicas, row.replicas);
      QCOMPARE(store.loadRun(*row.runId).summary.status, std::string("finished"));
    }
    shot(&panel, "learn-scaling");
  }

  // A real step of 3 replicas with the sharded optimizer update: the replay draws the all-gather
  // as its own span after the update, to its measured time, and at the end says that each replica
  // keeps 1/3 of Adam's state.
  void replayShowsTheShardedUpdatesAllGather() {
    ml::ModelSpec m;
    m.inputShape = {6};
    m.layers.push_back(ml::makeLayerSpec("Dense", {{"units", 32}, {"activation", "relu"}}));
    m.layers.push_back(ml::makeLayerSpec("Dense", {{"units", 4}, {"activation", "softmax"}}));
    ml::StrategyOptions so;
    so.devices = ml::parseDevices("cpu:3");
    so.shardOptimizer = true;
    ml::OptimizerSpec adam;
    adam.kind = ml::OptimizerKind::Adam;
    ml::MirroredStrategy s(m, ml::Loss::make(ml::LossKind::SparseCategoricalCrossentropy, false), ml::MetricKind::Accuracy, adam,
                           so);
    s.initialize(1);
    ml::Dataset data;
    data.sampleShape = {6};
    data.size = 60;
    data.numClasses = 4;
    for (int i = 0; i < 60 * 6; ++i) data.x.push_back(static_cast<float>((i * 7) % 11) / 11.0f);
    for (int i = 0; i < 60; ++i) data.y.push_back(static_cast<float>(i % 4));
    std::vector<int64_t> idx(60);
    for (int i = 0; i < 60; ++i) idx[static_cast<size_t>(i)] = i;
    const auto r = s.trainStep(data, idx, 1, 0.01f, 1);
    ml::StepEvent ev;
    ev.step = 1;
    ev.replicas = r.replicas;
    mlui::StepDiagram d;
    d.resize(1200, 500);
    d.setStep(ev, mlui::sceneInfoFromConfig(R"({"allreduce": "ring", "buckets": 1, "shard_optimizer": true})"));
    QVERIFY(d.info().shardedOptimizer);
    const double pps = d.pixelsPerSecond();
    for (int k = 0; k < 3; ++k) {
      const double gather = r.replicas[static_cast<size_t>(k)].phases.allgather;
      QVERIFY(gather > 0);
      QVERIFY(std::abs(d.segmentRect(k, mlui::Phase::AllGather).width() - gather * pps) < 0.01);
      QVERIFY(d.segmentRect(k, mlui::Phase::AllGather).left() >= d.segmentRect(k, mlui::Phase::Optimizer).right() - 1e-6);
      // The shard's input comes first, as long as it took, and the forward pass starts where it ends.
      const double input = r.replicas[static_cast<size_t>(k)].phases.input;
      QVERIFY(input > 0);
      QVERIFY(std::abs(d.segmentRect(k, mlui::Phase::Input).width() - input * pps) < 0.01);
      QVERIFY(std::abs(d.segmentRect(k, mlui::Phase::Forward).left() - d.segmentRect(k, mlui::Phase::Input).right()) < 1e-6);
    }
    d.setProgress(d.duration());
    QVERIFY2(d.currentActivity().contains(QStringLiteral("each replica keeps 1/3 of Adam's state")),
             qPrintable(d.currentActivity()));
  }

  // The live replay follows a training run without costing it: hidden, it only keeps the steps
  // (no diagram, no labels); shown again, it catches up to the newest step; shown, it follows at
  // most 4 times a second however often events arrive, and the newest step still arrives.
  void liveReplayFollowsOnlyWhenShown() {
    QWidget window;
    auto* v = new QVBoxLayout(&window);
    auto* panel = new mlui::StepReplayPanel([this] { return db_; }, &window);
    v->addWidget(panel);
    window.resize(1200, 600);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    ml::RunStarted started;
    started.configJson = R"({"allreduce": "ring", "buckets": 1})";
    panel->onLiveRunStarted(started);
    auto steps = [](int64_t from, int64_t count) {
      std::vector<ml::Event> events;
      for (int64_t s = from; s < from + count; ++s) {
        ml::StepEvent e;
        e.step = s;
        for (int r = 0; r < 2; ++r) {
          ml::ReplicaStep t;
          t.replica = r;
          t.samples = 32;
          t.phases.forward = 0.001 * (r + 1);
          t.phases.backward = 0.002;
          t.phases.allreduce = 0.0005;
          t.phases.optimizer = 0.0002;
          e.replicas.push_back(t);
        }
        events.emplace_back(e);
      }
      return events;
    };
    panel->hide();
    for (int batch = 0; batch < 10; ++batch) panel->onLiveEvents(steps(1 + batch * 5, 5));
    QVERIFY(panel->steps().empty());  // nothing followed while hidden
    QVERIFY(!panel->diagram()->hasStep());
    panel->show();
    QTRY_VERIFY(!panel->steps().empty());
    QCOMPARE(panel->steps().back().step, int64_t(50));  // caught up to the newest step
    QCOMPARE(panel->diagram()->step().step, int64_t(50));
    // Shown: 25 batches in a burst follow once at once, then the rest within 250 ms.
    for (int batch = 0; batch < 25; ++batch) panel->onLiveEvents(steps(51 + batch * 2, 2));
    QVERIFY(panel->steps().back().step < 100);  // not every batch laid the panel out
    QTRY_COMPARE_WITH_TIMEOUT(panel->steps().back().step, int64_t(100), 2000);
    QCOMPARE(panel->diagram()->step().step, int64_t(100));
  }

  // The replay draws a stored run's steps with widths proportional to the stored phase times, and
  // the playhead moves in slow motion.
  void replayDrawsMeasuredDurations() {
    const int64_t id = recordRun("cpu:3", 10, "replay me");
    QVERIFY(id > 0);
    mlui::StepReplayPanel panel([this] { return db_; });
    panel.resize(1400, 700);
    panel.show();
    QSignalSpy loaded(&panel, &mlui::StepReplayPanel::stepsLoaded);
    panel.loadRun(id);
    QVERIFY(loaded.wait(10000));
    QCOMPARE(static_cast<int>(panel.steps().size()), 10);
    auto* d = panel.diagram();
    QVERIFY(d->hasStep());
    QCOMPARE(d->replicaCount(), 3);
    // What the store holds for this step, read independently.
    const int64_t stepNo = d->step().step;
    const auto stored = ml::RunStore::open(db_.toStdString()).loadSteps(id, stepNo, stepNo);
    QCOMPARE(static_cast<int>(stored.size()), 1);
    const double pps = d->pixelsPerSecond();
    QVERIFY(pps > 0);
    double longest = 0;
    for (int r = 0; r < 3; ++r) {
      const auto& ph = stored[0].replicas[static_cast<size_t>(r)].phases;
      const std::pair<mlui::Phase, double> spans[] = {
          {mlui::Phase::Input, ph.input}, {mlui::Phase::Forward, ph.forward},     {mlui::Phase::Backward, ph.backward},
          {mlui::Phase::Wait, ph.wait},   {mlui::Phase::AllReduce, ph.allreduce}, {mlui::Phase::Optimizer, ph.optimizer}};
      double end = 0;
      for (const auto& [phase, secs] : spans) {
        QVERIFY2(std::abs(d->segmentRect(r, phase).width() - secs * pps) < 0.01,
                 qPrintable(QStringLiteral("replica %1 %2").arg(r).arg(mlui::phaseName(phase))));
        end = d->segmentRect(r, phase).right();
      }
      longest = std::max(longest, end);
      // Spans follow each other without overlap, in the order of the step.
      QVERIFY(d->segmentRect(r, mlui::Phase::Backward).left() >= d->segmentRect(r, mlui::Phase::Forward).right() - 1e-6);
      QVERIFY(d->segmentRect(r, mlui::Phase::Optimizer).left() >= d->segmentRect(r, mlui::Phase::AllReduce).right() - 1e-6);
    }
    double first = 1e18;
    for (int r = 0; r < 3; ++r)
      first = std::min(first, d->segmentRect(r, mlui::Phase::Input).left());  // the step starts with its input
    QVERIFY(std::abs((longest - first) - d->duration() * pps) < 0.01);        // the axis spans the measured step
    // Shards: each replica's shard is drawn in proportion to its samples (32 over 3: 11 + 11 + 10).
    const double total = d->shardRect(0).width() + d->shardRect(1).width() + d->shardRect(2).width();
    int64_t samples = 0;
    for (const auto& r : stored[0].replicas) samples += r.samples;
    QCOMPARE(samples, int64_t(32));
    for (int r = 0; r < 3; ++r) {
      const double share = static_cast<double>(stored[0].replicas[static_cast<size_t>(r)].samples) / 32.0;
      QVERIFY(share == 11.0 / 32 || share == 10.0 / 32);
      QVERIFY(std::abs(d->shardRect(r).width() / total - share) < 1e-9);
    }
    // Slow motion: half the replay time moves the playhead half-way through the step.
    QCOMPARE(d->progress(), 0.0);
    panel.advance(panel.secondsPerStep() / 2);
    QVERIFY(std::abs(d->progress() - d->duration() / 2) < 1e-9);
    // Single step: plays to the end of the step and stops there.
    QSignalSpy none(&panel, &mlui::StepReplayPanel::runsListed);
    panel.singleStep();
    QVERIFY(panel.isPlaying());
    QTRY_VERIFY_WITH_TIMEOUT(!panel.isPlaying(), 15000);
    QCOMPARE(d->progress(), d->duration());
    const int at = panel.currentIndex();
    panel.singleStep();  // the next one
    QCOMPARE(panel.currentIndex(), at + 1);
    panel.pause();
    shot(&panel, "learn-step");
  }

  // Modelled and measured stay apart: the estimate, the host timing and the what-if rows.
  void syncCostKeepsModelledApart() {
    const int64_t id = recordRun("cpu:2", 12, "sync me");
    mlui::SyncCostPanel panel([this] { return db_; });
    panel.resize(1300, 800);
    panel.show();
    QSignalSpy loaded(&panel, &mlui::SyncCostPanel::runLoaded);
    panel.setDeviceCounts(QStringLiteral("1,2,4,8"));
    panel.loadRun(id);
    QVERIFY(loaded.wait(20000));
    QVERIFY(panel.measured().has_value());
    const auto& m = *panel.measured();
    QCOMPARE(m.replicas, 2);
    QCOMPARE(m.profile.gradientBytes, int64_t((2 * 32 + 32 + 32 * 3 + 3) * 4));
    QVERIFY(m.host.seconds > 0);
    QVERIFY(!m.host.modelled);
    QVERIFY(m.stepSeconds > 0);
    panel.setLink(QStringLiteral("10gbe"));
    QVERIFY(panel.estimate().has_value());
    const auto est = *panel.estimate();
    QVERIFY(est.modelled);
    // Ring over 2 devices on 10 GbE: 2 alpha + bytes / bandwidth.
    const auto link = ml::linkPreset("10gbe");
    QVERIFY(std::abs(est.seconds - (2 * link.latency + static_cast<double>(m.profile.gradientBytes) / link.bandwidth)) < 1e-12);
    QVERIFY(panel.whatIf().has_value());
    QCOMPARE(panel.table()->rowCount(), 4);
    for (int r = 0; r < 4; ++r) QCOMPARE(panel.table()->item(r, 7)->text(), QStringLiteral("modelled"));
    QVERIFY(panel.comparisonLabel()->text().contains(QStringLiteral("modelled")));
    QVERIFY(panel.comparisonLabel()->text().contains(QStringLiteral("measured")));
    // Gradients sent as bfloat16: the estimate and the what-if carry two bytes per parameter.
    auto* wire = panel.findChild<QComboBox*>(QStringLiteral("wireDtype"));
    QVERIFY(wire);
    QCOMPARE(wire->currentData().toString(), QStringLiteral("float32"));  // the run's
    const double f32AllReduce = panel.whatIf()->rows.back().allreduceSeconds;
    wire->setCurrentIndex(1);
    const auto half = *panel.estimate();
    QCOMPARE(half.bytes, static_cast<double>(m.profile.gradientBytes) / 2);
    QVERIFY(std::abs(half.seconds - (2 * link.latency + static_cast<double>(m.profile.gradientBytes) / 2 / link.bandwidth)) <
            1e-12);
    QVERIFY(panel.whatIf()->rows.back().allreduceSeconds < f32AllReduce);
    QVERIFY(panel.comparisonLabel()->text().contains(QStringLiteral("bfloat16 gradients")));
    QVERIFY(panel.comparisonLabel()->text().contains(QStringLiteral("sent its gradients as float32")));
    wire->setCurrentIndex(0);
    // Across hosts: 2 hosts joined by calibrated 10 Gbit/s Ethernet add the calibrated ring, and
    // the calibration's figures, source and date are in view, with its latency called a parameter.
    const auto& cal = ml::shippedLinkCalibration();
    QVERIFY2(panel.calibrationLabel()->text().contains(QString::fromStdString(cal.date)),
             qPrintable(panel.calibrationLabel()->text()));
    QVERIFY(panel.calibrationLabel()->text().contains(QStringLiteral("bench/workers/cluster.sh")));
    QVERIFY(panel.calibrationLabel()->text().contains(QStringLiteral("parameter")));
    const double oneHost = panel.whatIf()->rows.front().allreduceSeconds;
    panel.setHosts(2, QStringLiteral("10gbit"));
    QVERIFY(panel.calibrationLabel()->text().startsWith(QStringLiteral("In use")));
    const auto& two = panel.whatIf()->rows.front();
    QCOMPARE(two.devices, 2);  // 1 device per host x 2 hosts
    const ml::LinkSample s{2, static_cast<double>(m.profile.gradientBytes), 1, 10e9, 0};
    QVERIFY(std::abs(two.crossSeconds - ml::predictCrossAllReduce(s, cal)) < 1e-12);
    QVERIFY(two.allreduceSeconds > oneHost);
    panel.setHosts(1, QStringLiteral("10gbit"));
    QVERIFY(!panel.calibrationLabel()->text().startsWith(QStringLiteral("In use")));
    shot(&panel, "learn-sync");
  }

  // Both programs are generated for the current project and Copy puts the shown one on the clipboard.
  void codePanelCopies() {
    mlui::CodePanel panel;
    panel.show();
    ml::Project p = uitest::spiralsProject("cpu:4", 3);
    panel.setProject(p);
    QVERIFY(panel.error().isEmpty());
    QVERIFY(panel.tensorFlowCode().contains(QStringLiteral("MirroredStrategy")));
    QVERIFY(panel.tensorFlowCode().contains(QStringLiteral("strategy.scope()")));
    QVERIFY(panel.pyTorchCode().contains(QStringLiteral("DistributedDataParallel")));
    panel.showFramework(1);
    panel.copyCurrent();
    QCOMPARE(QGuiApplication::clipboard()->text(), panel.pyTorchCode());
    // A model that does not build shows the reason instead of code.
    p.model.layers.push_back(ml::makeLayerSpec("Dense", {{"units", 0}}, "no_units"));
    panel.setProject(p);
    QVERIFY(!panel.error().isEmpty());
    QVERIFY(panel.tensorFlowCode().contains(QStringLiteral("no_units")));
  }

  // A stored run's timeline exports from the Runs screen as a Chrome trace, one track per device.
  void runsViewExportsTrace() {
    const int64_t id = recordRun("cpu:2", 6, "trace me");
    mlui::RunsView view([this] { return db_; });
    const QString path = dir_.filePath(QStringLiteral("run.trace.json"));
    QSignalSpy written(&view, &mlui::RunsView::traceExported);
    view.exportTrace(id, path);
    QVERIFY(written.wait(10000));
    std::ifstream in(path.toStdString());
    const auto j = nlohmann::json::parse(in);
    std::set<int> tids;
    std::map<std::string, int> spans;
    for (const auto& e : j["traceEvents"])
      if (e["ph"] == "X") {
        tids.insert(e["tid"].get<int>());
        ++spans[e["name"].get<std::string>()];
      }
    QCOMPARE(static_cast<int>(tids.size()), 2);
    for (const char* phase : {"forward", "backward", "wait", "all-reduce", "optimizer"}) QCOMPARE(spans[phase], 6 * 2);
    // The input: one span per replica step whose gather took a stored microsecond or more.
    QVERIFY(spans["input"] >= 1 && spans["input"] <= 6 * 2);
    QCOMPARE(static_cast<int>(spans.size()), 6);
  }
};

QTEST_MAIN(LearnTest)
#include "test_learnview.moc"
