// The Sweeps view against the store: a 2x2 sweep run by the real CLI shows in the heatmap with
// exactly the stored runs' final validation metrics, cell by cell; clicking a cell opens that
// run in the Runs screen; Cancel keeps finished points and marks the rest cancelled, Resume
// completes them; bad input gives one message and stores nothing.
#include <QLineEdit>
#include <QProcess>
#include <QSpinBox>
#include <QTableWidget>

#include <qcustomplot.h>

#include <cmath>
#include <map>

#include "MainWindow.h"
#include "ProjectDocument.h"
#include "RunsView.h"
#include "SweepsView.h"
#include "UiTestUtil.h"
#include "learn/Sweep.h"
#include "store/RunStore.h"
#include "store/SweepStore.h"

using namespace mlui;

namespace {

struct StoredPoint {
  int64_t runId;
  double finalMetric;
};

// (batch, base lr) -> the stored run of sweep id, read with the core's RunStore.
std::map<std::pair<int64_t, double>, StoredPoint> storedRuns(int64_t sweepId) {
  ml::RunStore store = ml::RunStore::open(MainWindow::storePath().toStdString());
  ml::RunFilter f;
  f.tag = ml::sweepTag(sweepId);
  std::map<std::pair<int64_t, double>, StoredPoint> out;
  for (const auto& r : store.listRuns(f)) {
    const auto d = store.loadRun(r.id);
    if (r.finalValMetric && d.baseLr) out[{r.globalBatch, *d.baseLr}] = {r.id, *r.finalValMetric};
  }
  return out;
}

// Every filled cell of heatmap 0 compared with the store; returns the number of filled cells.
int compareHeatmapWithStore(SweepsView* view, int64_t sweepId) {
  const auto stored = storedRuns(sweepId);
  auto* charts = view->charts();
  auto* data = charts->heatmap(0)->data();
  int filled = 0;
  for (int c = 0; c < data->keySize(); ++c)
    for (int r = 0; r < data->valueSize(); ++r) {
      const double v = data->cell(c, r);
      if (std::isnan(v)) continue;
      ++filled;
      const auto it = stored.find({charts->heatmapBatch(0, r), charts->heatmapLr(0, c)});
      if (it == stored.end()) {
        qWarning() << "cell" << c << r << "has no stored run";
        return -1;
      }
      if (v != it->second.finalMetric) {
        qWarning() << "cell" << c << r << v << "!= stored" << it->second.finalMetric;
        return -1;
      }
    }
  return filled;
}

}  // namespace

class TestSweepsView : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;

 private Q_SLOTS:
  void initTestCase() { uitest::isolate(dir_); }

  void heatmapHoldsTheStoredValuesOfACliSweep() {
    QProcess cli;
    cli.start(QStringLiteral(MIRRORLAB_CLI),
              {QStringLiteral("sweep"), QStringLiteral("projects/spirals.json"), QStringLiteral("--batch-size"),
               QStringLiteral("32,64"), QStringLiteral("--lr"), QStringLiteral("3e-3,1e-2"), QStringLiteral("--devices"),
               QStringLiteral("cpu:1"), QStringLiteral("--epochs"), QStringLiteral("3"), QStringLiteral("--target"),
               QStringLiteral("0.6")});
    QVERIFY(cli.waitForFinished(120000));
    QCOMPARE(cli.exitCode(), 0);
    QVERIFY2(cli.readAllStandardOutput().contains("* best: #"), "the CLI table marks the best point");
    const auto stored = storedRuns(1);
    QCOMPARE(stored.size(), size_t{4});

    MainWindow w;
    w.show();
    SweepsView* view = w.sweepsView();
    QSignalSpy loaded(view, &SweepsView::resultsLoaded);
    w.showPage(MainWindow::SweepsPage);
    QVERIFY(loaded.wait(20000));
    QCOMPARE(view->shownSweep(), int64_t{1});
    QCOMPARE(view->charts()->heatmapCount(), 1);
    QCOMPARE(compareHeatmapWithStore(view, 1), 4);
    QCOMPARE(view->pointTable()->rowCount(), 4);
    // The scatter shows the same four values.
    int dots = 0;
    for (int g = 0; g < view->charts()->scatter()->graphCount(); ++g) dots += view->charts()->scatter()->graph(g)->dataCount();
    QCOMPARE(dots, 4);

    // Clicking the cell of batch 64, lr 0.01 opens that stored run in the Runs screen.
    auto* plot = view->charts()->heatmapPlot(0);
    const int col = view->charts()->heatmapLr(0, 1) == 1e-2 ? 1 : 0;
    const int row = view->charts()->heatmapBatch(0, 1) == 64 ? 1 : 0;
    const QPoint at(static_cast<int>(plot->xAxis->coordToPixel(col)), static_cast<int>(plot->yAxis->coordToPixel(row)));
    QSignalSpy requested(view, &SweepsView::runRequested);
    QSignalSpy refreshed(w.runsView(), &RunsView::refreshed);
    QTest::mouseClick(plot, Qt::LeftButton, {}, at);
    QCOMPARE(requested.count(), 1);
    const int64_t want = stored.at({64, 1e-2}).runId;
    QCOMPARE(requested.first().first().toLongLong(), want);
    QVERIFY(refreshed.wait(10000));
    QCOMPARE(w.currentPage(), MainWindow::RunsPage);
    QTRY_COMPARE(w.runsView()->selectedIds(), std::vector<int64_t>{want});
  }

  void cancelKeepsFinishedPointsAndResumeCompletesThem() {
    MainWindow w;
    QVERIFY(w.openProject(QStringLiteral("projects/spirals.json")));
    SweepsView* view = w.sweepsView();
    w.showPage(MainWindow::SweepsPage);
    view->batchField()->setText(QStringLiteral("32, 64"));
    view->lrField()->setText(QStringLiteral("0.003,0.01"));
    view->devicesField()->setText(QStringLiteral("cpu:1"));
    view->scalingField()->setText(QStringLiteral("none"));
    view->epochsField()->setValue(20);  // long enough that the later points still run when the first ends
    QSignalSpy finished(view, &SweepsView::pointFinished);
    QSignalSpy ended(view, &SweepsView::sweepEnded);
    QSignalSpy loaded(view, &SweepsView::resultsLoaded);
    QVERIFY(view->start());
    QVERIFY(view->isRunning());
    QVERIFY(finished.wait(180000));  // a loaded 2-core machine trains slowly; the figures do not depend on it
    // The finished point is in the heatmap while the sweep still runs.
    QTRY_VERIFY_WITH_TIMEOUT(compareHeatmapWithStore(view, view->shownSweep()) >= 1, 10000);
    QVERIFY(view->isRunning());
    view->cancelButton()->click();
    QTRY_VERIFY_WITH_TIMEOUT(ended.count() == 1, 60000);
    QCOMPARE(ended.first().first().toString(), QStringLiteral("cancelled"));
    const int64_t id = view->shownSweep();
    {
      ml::RunStore store = ml::RunStore::open(MainWindow::storePath().toStdString());
      const auto rec = ml::loadSweep(store, id);
      QCOMPARE(rec.status, std::string("cancelled"));
      int done = 0, cancelled = 0;
      for (const auto& p : rec.points) {
        done += p.status == "finished";
        cancelled += p.status == "cancelled";
        if (p.status == "finished") QCOMPARE(store.loadRun(*p.runId).summary.status, std::string("finished"));
      }
      QVERIFY(done >= 1);
      QCOMPARE(done + cancelled, 4);
      QVERIFY(cancelled >= 1);
      QCOMPARE(compareHeatmapWithStore(view, id), done);
    }
    ended.clear();
    QVERIFY(view->resume());
    QTRY_VERIFY_WITH_TIMEOUT(ended.count() == 1, 120000);
    QCOMPARE(ended.first().first().toString(), QStringLiteral("finished"));
    ml::RunStore store = ml::RunStore::open(MainWindow::storePath().toStdString());
    QCOMPARE(ml::loadSweep(store, id).finishedPoints(), 4);
    QCOMPARE(compareHeatmapWithStore(view, id), 4);
    // Progress bars of finished points are full.
    for (int r = 0; r < 4; ++r) {
      auto* bar = qobject_cast<QProgressBar*>(view->pointTable()->cellWidget(r, 6));
      QVERIFY(bar);
      QCOMPARE(bar->value(), bar->maximum());
    }
  }

  // A sweep in which every point fails (a fault fails each run at step 2) ends failed, with one
  // message that gives the first point's reason and the way on; the store says the same.
  void aSweepInWhichNoPointTrainedSaysSoOnce() {
    MainWindow w;
    QVERIFY(w.openProject(QStringLiteral("projects/spirals.json")));
    ml::Project p = w.document()->project();
    p.distribute.faults = {ml::parseFault("fail:cpu:0@step=2")};
    w.document()->edit(QStringLiteral("Inject a fault"), p);
    SweepsView* view = w.sweepsView();
    w.showPage(MainWindow::SweepsPage);
    view->batchField()->setText(QStringLiteral("32, 64"));
    view->lrField()->setText(QStringLiteral("0.01"));
    view->devicesField()->setText(QStringLiteral("cpu:1"));
    view->scalingField()->setText(QStringLiteral("none"));
    view->epochsField()->setValue(1);
    QSignalSpy ended(view, &SweepsView::sweepEnded);
    QSignalSpy errors(view, &SweepsView::errorOccurred);
    QVERIFY(view->start());
    QTRY_VERIFY_WITH_TIMEOUT(ended.count() == 1, 120000);
    QCOMPARE(ended.first().first().toString(), QStringLiteral("failed"));
    QCOMPARE(errors.count(), 1);
    QCOMPARE(errors.first().at(0).toString(), QStringLiteral("No point of the sweep trained"));
    const QString message = errors.first().at(1).toString();
    QVERIFY2(message.contains(QStringLiteral("in step 2 (fail fault)")), qPrintable(message));
    QVERIFY2(message.contains(QStringLiteral("press Resume")), qPrintable(message));
    ml::RunStore store = ml::RunStore::open(MainWindow::storePath().toStdString());
    const auto rec = ml::loadSweep(store, view->shownSweep());
    QCOMPARE(rec.status, std::string("failed"));
    QCOMPARE(rec.points.size(), size_t{2});
    for (const auto& pt : rec.points) QCOMPARE(pt.status, std::string("failed"));
  }

  void badInputGivesOneMessageAndStoresNothing() {
    MainWindow w;
    QVERIFY(w.openProject(QStringLiteral("projects/spirals.json")));
    SweepsView* view = w.sweepsView();
    int64_t before = 0;
    {
      ml::RunStore store = ml::RunStore::open(MainWindow::storePath().toStdString());
      before = static_cast<int64_t>(ml::listSweeps(store).size());
    }
    QSignalSpy errors(view, &SweepsView::errorOccurred);
    const struct {
      QString batches, lrs, devices;
      int maxPoints;
      QString expect;
    } cases[] = {
        {QString(), QStringLiteral("0.01"), QStringLiteral("cpu:1"), 64, QStringLiteral("the list is empty")},
        {QStringLiteral("32"), QStringLiteral("0.01,fast"), QStringLiteral("cpu:1"), 64,
         QStringLiteral("'fast' is not a number")},
        {QStringLiteral("32,64,128"), QStringLiteral("0.01,0.1"), QStringLiteral("cpu:1"), 4,
         QStringLiteral("the grid has 6 points")},
        {QStringLiteral("1,32"), QStringLiteral("0.01"), QStringLiteral("cpu:2"), 64,
         QStringLiteral("cannot be split across the 2 replicas")},
    };
    for (const auto& c : cases) {
      view->batchField()->setText(c.batches);
      view->lrField()->setText(c.lrs);
      view->devicesField()->setText(c.devices);
      view->maxPointsField()->setValue(c.maxPoints);
      errors.clear();
      QVERIFY(!view->start());
      QVERIFY(!view->isRunning());
      QCOMPARE(errors.count(), 1);
      QVERIFY2(errors.first().at(1).toString().contains(c.expect), qPrintable(errors.first().at(1).toString()));
    }
    ml::RunStore store = ml::RunStore::open(MainWindow::storePath().toStdString());
    QCOMPARE(static_cast<int64_t>(ml::listSweeps(store).size()), before);
  }
};

QTEST_MAIN(TestSweepsView)
#include "test_sweepsview.moc"
