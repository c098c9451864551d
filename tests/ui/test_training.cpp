// A real short training from the studio on 2 simulated devices: the charts hold the points,
// the sync check reports equal checksums, the run is stored and listed, two runs overlay, and
// Stop ends a run as cancelled.
#include <QAction>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QSignalSpy>
#include <QStatusBar>
#include <QTableView>
#include <QTableWidget>

#include "DashboardView.h"
#include "MainWindow.h"
#include "ProjectDocument.h"
#include "RunTableModel.h"
#include "RunsView.h"
#include "TrainingSession.h"
#include "UiTestUtil.h"
#include "charts/DeviceCharts.h"
#include "charts/LossScaleChart.h"
#include "charts/MetricChart.h"
#include "charts/TimelineChart.h"
#include "export/ExportJob.h"
#include "project/WeightsFile.h"
#include "store/RunStore.h"

Q_DECLARE_METATYPE(ml::RunFinished)

class TrainingTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;

 private Q_SLOTS:
  void initTestCase() { uitest::isolate(dir_); }
  // Every test function has its own run store: none depends on what an earlier one recorded.
  void init() {
    qputenv("MIRRORLAB_DB",
            dir_.filePath(QStringLiteral("runs-%1.sqlite").arg(QLatin1String(QTest::currentTestFunction()))).toUtf8());
  }

  // The sharded optimizer's all-gather is sync overhead, shown as its own bar in the step breakdown
  // and its own share in the sentence below it, and counted in the Sync overhead card; the share is
  // what the stored run's phases of the same last 20 steps say.
  void aShardedRunShowsItsAllGather() {
    mlui::MainWindow w;
    ml::Project p = uitest::spiralsProject("cpu:2", 2);
    p.distribute.shardOptimizer = true;
    // Wide enough that each phase lasts many microseconds, the store's unit.
    p.model.layers = {ml::makeLayerSpec("Dense", {{"units", 512}, {"activation", "relu"}}),
                      ml::makeLayerSpec("Dense", {{"units", 512}, {"activation", "relu"}}),
                      ml::makeLayerSpec("Dense", {{"units", 3}, {"activation", "softmax"}})};
    QVERIFY(w.openProject(uitest::writeProject(dir_, p, QStringLiteral("sharded.json"))));
    w.resize(1400, 900);
    w.show();
    std::optional<int64_t> id;
    const auto f = uitest::trainInWindow(w, 0, &id);
    QCOMPARE(f.status, ml::RunStatus::Finished);
    QVERIFY(id.has_value());
    auto* d = w.dashboard();
    d->render();
    auto* b = d->breakdownChart();
    QCOMPARE(b->allgatherBars()->dataCount(), 2);
    QVERIFY(b->legend->hasItemWithPlottable(b->allgatherBars()));
    auto store = ml::RunStore::open(qEnvironmentVariable("MIRRORLAB_DB").toStdString());
    const auto steps = store.loadSteps(*id, f.steps - 19, f.steps);
    QCOMPARE(steps.size(), size_t(20));
    double ag = 0, ar = 0, wait = 0, in = 0, total = 0;
    for (const auto& s : steps)
      for (const auto& r : s.replicas) {
        in += r.phases.input;
        ag += r.phases.allgather;
        ar += r.phases.allreduce;
        wait += r.phases.wait;
        total += r.phases.total();
      }
    QVERIFY(ag > 0);
    // Stored in whole microseconds: the shares agree to a fraction of a percent.
    QVERIFY2(qAbs(b->allgatherShare() - ag / total) < 0.005,
             qPrintable(QStringLiteral("%1 against %2").arg(b->allgatherShare()).arg(ag / total)));
    // The rows each micro-batch gathers are timed on their own. The store keeps whole microseconds,
    // and 16 rows of 2 features gather in less than half of one on a fast machine, so the stored sum
    // may be 0: the chart's unrounded share is the one that must show the input.
    QVERIFY2(b->inputShare() > 0, qPrintable(QString::number(b->inputShare())));
    QVERIFY(qAbs(b->inputShare() - in / total) < 0.005);
    QVERIFY(qAbs(b->computeShare() - (1 - (in + ag + ar + wait) / total)) < 0.005);
    QVERIFY(b->legend->hasItemWithPlottable(b->inputBars()));
    const QString card = d->syncShareLabel()->text();
    QVERIFY2(qAbs(card.chopped(1).toDouble() - 100 * (ag + ar + wait) / total) < 0.5, qPrintable(card));
    const QString sentence = d->shareNumbersLabel()->text();
    QVERIFY2(sentence.contains(QStringLiteral("all-gather %1%").arg(100 * b->allgatherShare(), 0, 'f', 1)), qPrintable(sentence));
    QVERIFY2(sentence.contains(QStringLiteral("input %1%").arg(100 * b->inputShare(), 0, 'f', 1)), qPrintable(sentence));
  }

  void trainsAndFillsTheCharts() {
    mlui::MainWindow w;
    QVERIFY(w.openProject(uitest::writeProject(dir_, uitest::spiralsProject(), QStringLiteral("spirals.json"))));
    w.resize(1400, 900);
    w.show();
    const auto f = uitest::trainInWindow(w);
    QCOMPARE(f.status, ml::RunStatus::Finished);
    // 2400 samples, 20% held out: 1920 / 32 = 60 steps per epoch, 12 epochs.
    QCOMPARE(f.steps, int64_t(720));
    auto* d = w.dashboard();
    QCOMPARE(d->lossChart()->trainGraph()->dataCount(), 720);
    QCOMPARE(d->lossChart()->validationGraph()->dataCount(), 12);
    QCOMPARE(d->accuracyChart()->trainGraph()->dataCount(), 720);
    QVERIFY(d->throughputChart()->trainGraph()->dataCount() > 0);
    // The loss went down: last smoothed value well below the first step's.
    const double first = d->lossChart()->trainGraph()->data()->at(0)->value;
    QVERIFY2(d->lossChart()->lastSmoothed() < first * 0.7, qPrintable(QString::number(d->lossChart()->lastSmoothed())));
    QCOMPARE(d->utilizationChart()->deviceCount(), 2);
    QVERIFY(d->utilizationChart()->deviceGraph(0)->dataCount() > 0);
    QVERIFY(d->utilizationChart()->deviceGraph(1)->dataCount() > 0);
    QCOMPARE(d->breakdownChart()->computeBars()->dataCount(), 2);
    QVERIFY(d->breakdownChart()->computeShare() > 0);
    QCOMPARE(d->timelineChart()->barCount() > 10 * 2 * 2, true);  // 10 steps x 2 lanes x >= 2 phases
    const QString sync = d->syncLabel()->text();
    QVERIFY2(sync.contains(QStringLiteral("in sync")) && sync.contains(QStringLiteral("equal")), qPrintable(sync));
    QVERIFY(sync.contains(QStringLiteral("epoch 12")));

    // The window during/after training is not blank: many colours in the chart area.
    const QImage img = d->grab().toImage();
    QVERIFY(uitest::distinctColors(img) > 40);
    QVERIFY(img.save(dir_.filePath(QStringLiteral("dashboard-trained.png"))));

    // The run is in the store, and the Runs screen lists it.
    auto store = ml::RunStore::open(qEnvironmentVariable("MIRRORLAB_DB").toStdString());
    const auto runs = store.listRuns();
    QCOMPARE(runs.size(), size_t(1));
    QCOMPARE(runs[0].status, std::string("finished"));
    QCOMPARE(runs[0].replicas, 2);
    QCOMPARE(runs[0].epochsDone, 12);
    QCOMPARE(w.session()->lastRunId().value_or(-1), runs[0].id);
    w.showPage(mlui::MainWindow::RunsPage);
    QTRY_COMPARE_WITH_TIMEOUT(w.runsView()->model()->rowCount(), 1, 10000);
    QCOMPARE(w.runsView()->model()->run(0)->status, std::string("finished"));
  }

  void precisionChoiceTrainsWithLossScaling() {
    // The Training screen's Precision choice reaches the project and the run: mixed_float16 from a
    // loss scale that overflows stores skipped steps with halving scales, as they happened.
    mlui::MainWindow w;
    QVERIFY(w.openProject(uitest::writeProject(dir_, uitest::spiralsProject(), QStringLiteral("spirals.json"))));
    w.resize(1400, 900);
    w.show();
    auto* precision = w.findChild<QComboBox*>(QStringLiteral("Precision"));
    auto* scale = w.findChild<QDoubleSpinBox*>(QStringLiteral("LossScale"));
    QVERIFY(precision && scale);
    QVERIFY(scale->isHidden());  // float32: no loss-scale rows
    precision->setCurrentIndex(precision->findData(QStringLiteral("mixed_float16")));
    QVERIFY(w.document()->project().training.precision == ml::Precision::MixedFloat16);
    QVERIFY(!scale->isHidden());
    scale->setValue(16777216.0);
    QCOMPARE(w.document()->project().training.lossScale, 16777216.0);
    const auto f = uitest::trainInWindow(w, 30);
    QCOMPARE(f.status, ml::RunStatus::Finished);
    auto store = ml::RunStore::open(qEnvironmentVariable("MIRRORLAB_DB").toStdString());
    const auto steps = store.loadSteps(w.session()->lastRunId().value_or(-1), 1, 30);
    QCOMPARE(steps.size(), size_t(30));
    QCOMPARE(steps[0].lossScale, 16777216.0);
    QVERIFY(steps[0].skipped);
    QCOMPARE(steps[1].lossScale, 8388608.0);
    int skipped = 0;
    for (const auto& s : steps) skipped += s.skipped ? 1 : 0;
    QVERIFY2(skipped >= 3 && skipped < 30, qPrintable(QString::number(skipped)));
    // The dashboard's loss-scale chart shows what the store holds: the scales as a step line from
    // 2^24 to the last step's scale, and a mark at each skipped step, at its step and scale.
    auto* chart = w.dashboard()->lossScaleChart();
    w.showPage(mlui::MainWindow::DashboardPage);
    QVERIFY(chart->isVisible());
    w.dashboard()->render();
    QCOMPARE(chart->skippedCount(), skipped);
    QCOMPARE(chart->skippedGraph()->dataCount(), skipped);
    int mark = 0;
    for (const auto& s : steps) {
      if (!s.skipped) continue;
      const auto p = chart->skippedGraph()->data()->at(mark++);
      QCOMPARE(p->key, static_cast<double>(s.step));
      QCOMPARE(p->value, s.lossScale);
    }
    const auto* line = chart->scaleGraph()->data().data();
    QCOMPARE(line->at(0)->value, 16777216.0);
    QCOMPARE((line->constEnd() - 1)->key, static_cast<double>(steps.back().step));
    QCOMPARE((line->constEnd() - 1)->value, steps.back().lossScale);
    precision->setCurrentIndex(precision->findData(QStringLiteral("mixed_bfloat16")));
    QVERIFY(scale->isHidden());  // bfloat16 needs no loss scaling
    QCOMPARE(uitest::trainInWindow(w, 5).status, ml::RunStatus::Finished);
    QVERIFY(chart->isHidden());  // nor a loss-scale chart
  }

  void overlaysTwoRuns() {
    // A run on 2 devices recorded as the CLI does, then one on 1 device trained in the window.
    QVERIFY(uitest::recordRun(qEnvironmentVariable("MIRRORLAB_DB"), "cpu:2", 12, 0, "spirals on 2") > 0);
    mlui::MainWindow w;
    QVERIFY(w.openProject(uitest::writeProject(dir_, uitest::spiralsProject("cpu:1", 3), QStringLiteral("one.json"))));
    w.show();
    QCOMPARE(uitest::trainInWindow(w).status, ml::RunStatus::Finished);
    w.showPage(mlui::MainWindow::RunsPage);
    auto* runs = w.runsView();
    QTRY_COMPARE_WITH_TIMEOUT(runs->model()->rowCount(), 2, 10000);
    std::vector<int64_t> ids;
    for (const auto& r : runs->model()->runs()) ids.push_back(r.id);
    QSignalSpy loaded(runs, &mlui::RunsView::comparisonLoaded);
    runs->selectRuns(ids);
    QVERIFY(loaded.wait(10000));
    QCOMPARE(runs->overlay()->graphCount(), 2);
    QVERIFY(runs->overlay()->graph(0)->dataCount() > 0);
    QVERIFY(runs->overlay()->graph(1)->dataCount() > 0);
    QCOMPARE(runs->scalingTable()->rowCount(), 2);
    QVERIFY(runs->scalingTable()->item(0, 0)->text().contains(QStringLiteral("baseline")));
    QCOMPARE(runs->scalingTable()->item(0, 4)->text(), QStringLiteral("1.00×"));
    // The configurations differ in the devices (cpu:2 vs cpu:1) and the epochs, and only there.
    QStringList keys;
    for (int r = 0; r < runs->diffTable()->rowCount(); ++r) keys << runs->diffTable()->item(r, 0)->text();
    QVERIFY2(keys.join(QLatin1Char(' ')).contains(QStringLiteral("devices")), qPrintable(keys.join(QLatin1Char(' '))));
    QVERIFY(!keys.contains(QStringLiteral("optimizer.name")));
  }

  void stopEndsTheRunAsCancelled() {
    mlui::MainWindow w;
    QVERIFY(w.openProject(uitest::writeProject(dir_, uitest::spiralsProject("cpu:2", 500), QStringLiteral("long.json"))));
    w.show();
    ml::RunFinished out;
    bool ended = false;
    connect(w.session(), &mlui::TrainingSession::runEnded, this, [&](const ml::RunFinished& f, std::optional<int64_t>) {
      out = f;
      ended = true;
    });
    w.dashboard()->trainAction()->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(w.dashboard()->lossChart()->trainGraph()->dataCount() > 20, 30000);
    w.dashboard()->stopAction()->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(ended, 30000);
    QCOMPARE(out.status, ml::RunStatus::Cancelled);
    auto store = ml::RunStore::open(qEnvironmentVariable("MIRRORLAB_DB").toStdString());
    QCOMPARE(store.loadRun(*w.session()->lastRunId()).summary.status, std::string("cancelled"));
  }

  void pauseHoldsTheRunAndResumeContinues() {
    mlui::MainWindow w;
    QVERIFY(w.openProject(uitest::writeProject(dir_, uitest::spiralsProject("cpu:2", 500), QStringLiteral("pause.json"))));
    w.show();
    bool ended = false;
    connect(w.session(), &mlui::TrainingSession::runEnded, this, [&] { ended = true; });
    w.dashboard()->trainAction()->trigger();
    auto* graph = w.dashboard()->lossChart()->trainGraph();
    QTRY_VERIFY_WITH_TIMEOUT(graph->dataCount() > 10, 30000);
    w.dashboard()->pauseAction()->trigger();
    QCOMPARE(w.session()->state(), mlui::TrainingSession::State::Paused);
    // The step in flight arrives, and the dashboard draws what it holds: frames come at the redraw
    // budget's rate, at least 4 per second, so after 700 ms nothing drawn can be pending.
    QTest::qWait(700);
    const int held = graph->dataCount();
    QTest::qWait(400);
    QCOMPARE(graph->dataCount(), held);  // no step while paused
    w.dashboard()->pauseAction()->trigger();
    QCOMPARE(w.session()->state(), mlui::TrainingSession::State::Running);
    QTRY_VERIFY_WITH_TIMEOUT(graph->dataCount() > held + 5, 10000);
    w.dashboard()->stopAction()->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(ended, 30000);
  }

  void closingDuringTrainingStopsAndRecordsCancelled() {
    auto* w = new mlui::MainWindow;
    QVERIFY(w->openProject(uitest::writeProject(dir_, uitest::spiralsProject("cpu:2", 500), QStringLiteral("close.json"))));
    w->show();
    std::optional<int64_t> runId;
    bool ended = false;
    connect(w->session(), &mlui::TrainingSession::runEnded, this, [&](const ml::RunFinished&, std::optional<int64_t> id) {
      runId = id;
      ended = true;
    });
    w->dashboard()->trainAction()->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(w->dashboard()->lossChart()->trainGraph()->dataCount() > 10, 30000);
    int asked = 0;
    w->confirmCloseWhileTraining = [&] { return ++asked == 2; };  // "No" first, then "Yes"
    QVERIFY(!w->close());                                         // "No": training goes on
    QCOMPARE(w->session()->state(), mlui::TrainingSession::State::Running);
    QVERIFY(!w->close());  // "Yes": refused for now, the run is being stopped
    QCOMPARE(asked, 2);
    QCOMPARE(w->session()->state(), mlui::TrainingSession::State::Stopping);
    QTRY_VERIFY_WITH_TIMEOUT(ended, 30000);
    QTRY_VERIFY_WITH_TIMEOUT(!w->isVisible(), 5000);  // and then the window closes by itself
    QVERIFY(runId.has_value());
    auto store = ml::RunStore::open(qEnvironmentVariable("MIRRORLAB_DB").toStdString());
    QCOMPARE(store.loadRun(*runId).summary.status, std::string("cancelled"));
    delete w;
  }

  // A project of 2 workers: the studio has mirrorlab-cli start them under mpirun and shows the run
  // live from worker 1's events: 4 replicas named by worker, every step on the charts, the run
  // finished, its id the stored one, the weights in sync. Pause is off and says why (the workers
  // cannot pause together), and the run keeps its final weights like any studio run, so Runs >
  // Export finds the trained model.
  void aProjectOfTwoWorkersTrainsUnderMpirunAndIsShownLive() {
    qputenv("MIRRORLAB_CLI", MIRRORLAB_CLI);
    qputenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none");  // containers: no ptrace
    mlui::MainWindow w;
    ml::Project p = uitest::spiralsProject("cpu:2", 2);
    p.distribute.workers = 2;
    QVERIFY(w.openProject(uitest::writeProject(dir_, p, QStringLiteral("workers.json"))));
    w.resize(1400, 900);
    w.show();
    bool seen = false, pauseEnabled = true;
    QString pauseTip, status;
    auto stateAfterPause = mlui::TrainingSession::State::Idle;
    auto watch = connect(w.session(), &mlui::TrainingSession::eventsArrived, &w, [&](const std::vector<ml::Event>& events) {
      const bool step =
          std::any_of(events.begin(), events.end(), [](const ml::Event& e) { return std::holds_alternative<ml::StepEvent>(e); });
      if (seen || !step || w.session()->state() != mlui::TrainingSession::State::Running) return;
      seen = true;
      pauseEnabled = w.dashboard()->pauseAction()->isEnabled();
      pauseTip = w.dashboard()->pauseAction()->toolTip();
      status = w.statusBar()->currentMessage();
      w.session()->setPaused(true);  // as a shortcut would try: refused, the run goes on
      stateAfterPause = w.session()->state();
    });
    std::optional<int64_t> runId;
    const auto f = uitest::trainInWindow(w, 0, &runId);
    disconnect(watch);
    QVERIFY2(f.status == ml::RunStatus::Finished, f.message.c_str());
    QCOMPARE(f.steps, int64_t(120));  // 1920 / 32 = 60 steps per epoch, 2 epochs
    QVERIFY(seen);
    QVERIFY(!pauseEnabled);
    QVERIFY2(pauseTip.contains(QStringLiteral("multi-worker run")), qPrintable(pauseTip));
    QVERIFY2(status.contains(QStringLiteral("Pause is off")), qPrintable(status));
    QCOMPARE(stateAfterPause, mlui::TrainingSession::State::Running);
    QVERIFY(w.dashboard()->pauseAction()->toolTip() == w.dashboard()->pauseAction()->text());  // a local run may pause again
    auto* d = w.dashboard();
    QCOMPARE(d->lossChart()->trainGraph()->dataCount(), 120);
    QCOMPARE(d->lossChart()->validationGraph()->dataCount(), 2);
    QCOMPARE(d->breakdownChart()->computeBars()->dataCount(), 4);  // every worker's replicas
    QCOMPARE(d->utilizationChart()->deviceCount(), 4);
    QVERIFY(d->utilizationChart()->deviceGraph(3)->dataCount() > 0);
    QVERIFY(runId.has_value());
    auto store = ml::RunStore::open(qEnvironmentVariable("MIRRORLAB_DB").toStdString());
    const ml::RunDetail run = store.loadRun(*runId);
    QCOMPARE(run.summary.status, std::string("finished"));
    QCOMPARE(run.workers, 2);
    QCOMPARE(run.deviceNames.size(), size_t(4));
    QVERIFY2(run.deviceNames[2].find("/worker2/cpu:0") != std::string::npos, run.deviceNames[2].c_str());
    QVERIFY(!run.epochs.empty() && run.epochs.back().inSync);
    // The weights Runs > Export takes are the trained ones: their checksum is the last epoch's.
    const ml::StoredWeights kept = ml::storedWeights(store, *runId);
    ml::Sequential model(kept.project.model);
    ml::loadWeights(model, kept.weights);
    QCOMPARE(model.checksum(), run.epochs.back().checksums.at(0));
  }

  // A replica stuck for good (no release reaches it): the watchdog names it, the studio records the
  // run failed with the diagnosis 5 s later, leaves the thread behind and trains again.
  void aReplicaStuckForGoodDoesNotBlockTheNextRun() {
    mlui::MainWindow w;
    ml::Project p = uitest::spiralsProject("cpu:2", 2);
    p.distribute.faults = {ml::parseFault("stuck:cpu:1@step=3")};
    p.distribute.hangSeconds = 0.5;
    QVERIFY(w.openProject(uitest::writeProject(dir_, p, QStringLiteral("stuck.json"))));
    w.show();
    std::optional<int64_t> runId;
    const auto f = uitest::trainInWindow(w, 0, &runId);
    QCOMPARE(f.status, ml::RunStatus::Failed);
    QVERIFY2(f.message.find("replica 1 (cpu:1) has not finished backward of step 3") != std::string::npos, f.message.c_str());
    QVERIFY2(f.message.find("its thread is left behind") != std::string::npos, f.message.c_str());
    QCOMPARE(w.session()->state(), mlui::TrainingSession::State::Idle);
    QVERIFY(runId.has_value());
    // The store says failed, with the diagnosis (the recorder still running in the stuck thread wrote it).
    auto store = ml::RunStore::open(qEnvironmentVariable("MIRRORLAB_DB").toStdString());
    QVERIFY(QTest::qWaitFor([&] { return store.loadRun(*runId).summary.status == "failed"; }, 5000));
    QVERIFY(store.loadRun(*runId).error.find("has not finished backward of step 3") != std::string::npos);
    // The studio trains again: the next run (without the fault) finishes.
    ml::Project ok = p;
    ok.distribute.faults.clear();
    w.document()->edit(QStringLiteral("no fault"), ok);
    const auto g = uitest::trainInWindow(w);
    QVERIFY2(g.status == ml::RunStatus::Finished, g.message.c_str());
    QCOMPARE(g.steps, int64_t(120));
  }

  void aMissingDataSetIsShownInADialog() {
    mlui::MainWindow w;
    ml::Project p = uitest::spiralsProject();
    p.data.kind = ml::DataKind::Csv;
    p.data.path = "/nonexistent/data.csv";
    QVERIFY(w.openProject(uitest::writeProject(dir_, p, QStringLiteral("missing.json"))));
    w.show();
    QSignalSpy failed(w.session(), &mlui::TrainingSession::runFailed);
    w.dashboard()->trainAction()->trigger();
    QVERIFY(failed.wait(20000));
    const QString text = uitest::errorDialogText(&w);
    QVERIFY2(text.contains(QStringLiteral("/nonexistent/data.csv")), qPrintable(text));
    QCOMPARE(w.session()->state(), mlui::TrainingSession::State::Idle);
  }
};

QTEST_MAIN(TrainingTest)
#include "test_training.moc"
