// The Runs screen over a store written by the core directly (as the CLI does): it lists the run
// with its numbers, filters, sorts, renames and tags through the store.
// The trainer's headers first: core has a slots() member that Qt's `slots` macro would break,
// and this file also includes qcustomplot.h (which needs the macro).
#include "data/Dataset.h"
#include "project/WeightsFile.h"
#include "store/Recorder.h"
#include "store/RunStore.h"
#include "train/RecordedRun.h"
#include "train/Trainer.h"

#include <QLineEdit>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QTableWidget>

#include "MainWindow.h"
#include "RunHeadline.h"
#include "RunTableModel.h"
#include "RunsView.h"
#include "TrainingSession.h"
#include "UiTestUtil.h"
#include "charts/MetricChart.h"

class RunsViewTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  QString db_;

  int64_t recordRun(const std::string& devices, const std::string& name) { return uitest::recordRun(db_, devices, 2, 0, name); }

 private Q_SLOTS:
  void initTestCase() {
    db_ = dir_.filePath(QStringLiteral("store.sqlite"));
    uitest::isolate(dir_);
    qputenv("MIRRORLAB_DB", db_.toUtf8());
  }

  void listsARecordedRun() {
    const int64_t id = recordRun("cpu:2", "recorded-by-core");
    QVERIFY(id > 0);
    mlui::RunsView view([this] { return db_; });
    view.resize(1200, 800);
    view.show();
    QSignalSpy refreshed(&view, &mlui::RunsView::refreshed);
    view.refresh();
    QVERIFY(refreshed.wait(10000));
    auto* model = view.model();
    QCOMPARE(model->rowCount(), 1);
    const auto* r = model->run(0);
    QCOMPARE(r->id, id);
    QCOMPARE(r->name, std::string("recorded-by-core"));
    QCOMPARE(r->replicas, 2);
    QCOMPARE(r->globalBatch, int64_t(32));
    QCOMPARE(r->epochsDone, 2);
    QCOMPARE(model->data(model->index(0, mlui::RunTableModel::Status), Qt::DisplayRole).toString(), QStringLiteral("finished"));
    QCOMPARE(model->data(model->index(0, mlui::RunTableModel::Devices), Qt::DisplayRole).toString(), QStringLiteral("cpu:2"));
    QVERIFY(r->finalValMetric.has_value());
    QVERIFY(*r->finalValMetric > 0.3);  // better than chance (1/3) after two epochs
  }

  void sortsAndFilters() {
    recordRun("cpu:1", "second");
    mlui::RunsView view([this] { return db_; });
    view.show();
    QSignalSpy refreshed(&view, &mlui::RunsView::refreshed);
    view.refresh();
    QVERIFY(refreshed.wait(10000));
    auto* proxy = qobject_cast<QSortFilterProxyModel*>(view.table()->model());
    QCOMPARE(proxy->rowCount(), 2);
    view.table()->sortByColumn(mlui::RunTableModel::Replicas, Qt::AscendingOrder);
    QCOMPARE(proxy->index(0, mlui::RunTableModel::Replicas).data().toInt(), 1);
    view.table()->sortByColumn(mlui::RunTableModel::Replicas, Qt::DescendingOrder);
    QCOMPARE(proxy->index(0, mlui::RunTableModel::Replicas).data().toInt(), 2);
    auto* filter = view.findChild<QLineEdit*>();
    filter->setText(QStringLiteral("second"));
    QCOMPARE(proxy->rowCount(), 1);
    QCOMPARE(proxy->index(0, mlui::RunTableModel::Name).data().toString(), QStringLiteral("second"));
  }

  // A run stopped by an injected kill after step 75 (epoch 2; a checkpoint after epoch 1) is
  // offered Resume; pressing it continues the same stored run to the end: finished, every step
  // once, and its weights bit-identical to an uninterrupted run's.
  // A run of 2 workers (rank 0 recorded it) opened in the Runs screen: its row in the scaling
  // table names the workers and their hosts; a one-worker run's row does not.
  void showsTheWorkersOfAMultiWorkerRun() {
    const QString db = dir_.filePath(QStringLiteral("workers.sqlite"));
    int64_t two = 0, one = 0;
    {
      auto store = ml::RunStore::open(db.toStdString());
      for (int workers : {2, 1}) {
        ml::RunStarted s;
        s.runName = workers == 2 ? "across hosts" : "one process";
        s.projectJson = "{}";
        s.configJson = R"({"devices":"cpu:2"})";
        s.replicas = 4;
        s.workers = workers;
        if (workers == 2) s.hosts = {"a", "b"};
        for (int r = 0; r < 4; ++r) s.devices.push_back("cpu:" + std::to_string(r));
        s.globalBatch = 64;
        s.epochs = 1;
        const int64_t id = store.createRun(s, {});
        ml::EpochEvent e;
        e.epoch = 1;
        e.seconds = 0.5;
        e.samplesPerSec = 1000;
        store.appendEpochs(id, std::span<const ml::EpochEvent>(&e, 1));
        store.finishRun(id, ml::RunFinished{ml::RunStatus::Finished, "", 0.5, 10, 0.5, 0.8});
        (workers == 2 ? two : one) = id;
      }
    }
    mlui::RunsView view([db] { return db; });
    view.resize(1200, 800);
    view.show();
    QSignalSpy refreshed(&view, &mlui::RunsView::refreshed);
    view.refresh();
    QVERIFY(refreshed.wait(10000));
    QSignalSpy loaded(&view, &mlui::RunsView::comparisonLoaded);
    view.selectRuns({two, one});
    QVERIFY(loaded.wait(10000) || !loaded.isEmpty());
    auto* scaling = view.findChild<QTableWidget*>(QStringLiteral("ScalingTable"));
    QVERIFY(scaling);
    QTRY_COMPARE_WITH_TIMEOUT(scaling->rowCount(), 2, 5000);
    int rowTwo = -1, rowOne = -1;
    for (int r = 0; r < 2; ++r) (scaling->item(r, 0)->text().contains(QStringLiteral("across hosts")) ? rowTwo : rowOne) = r;
    QVERIFY(rowTwo >= 0 && rowOne >= 0);
    QVERIFY2(scaling->item(rowTwo, 0)->text().endsWith(QStringLiteral(" · 2 workers on a, b (2 replicas each)")),
             qPrintable(scaling->item(rowTwo, 0)->text()));
    QCOMPARE(scaling->item(rowTwo, 1)->text(), QStringLiteral("4"));
    QCOMPARE(scaling->item(rowTwo, 1)->toolTip(), QStringLiteral("2 workers on a, b (2 replicas each)"));
    QVERIFY2(!scaling->item(rowOne, 0)->text().contains(QStringLiteral("worker")), qPrintable(scaling->item(rowOne, 0)->text()));
    QCOMPARE(scaling->item(rowOne, 1)->toolTip(), QString());
  }

  void resumesAnInterruptedRun() {
    const QString db = dir_.filePath(QStringLiteral("resume.sqlite"));
    ml::Project p = uitest::spiralsProject("cpu:2", 3);
    p.data.samples = 1500;  // 1200 training samples / 32 = 38 steps per epoch
    auto data = std::make_shared<const ml::DataSplit>(ml::loadData(p.data));
    auto train = [&](ml::Project proj, std::optional<int64_t>* id) {
      ml::RecordedRunOptions o;
      o.storePath = db.toStdString();
      o.trainer.killEndsRunWith = "killed";
      ml::RecordedRun run(proj, data, o);
      const auto r = run.run();
      if (id) *id = r.runId;
      const auto w = run.trainer().strategy().model(0).params();
      return std::vector<float>(w.begin(), w.end());
    };
    const std::vector<float> straight = train(p, nullptr);
    ml::Project killed = p;
    killed.distribute.faults = {ml::parseFault("kill@step=50")};
    std::optional<int64_t> id;
    train(killed, &id);
    QVERIFY(id.has_value());

    mlui::MainWindow w;
    w.show();
    auto* runs = w.findChild<mlui::RunsView*>();
    QVERIFY(runs);
    // The studio records into $MIRRORLAB_DB: point it at this store for the window's lifetime.
    const QByteArray old = qgetenv("MIRRORLAB_DB");
    qputenv("MIRRORLAB_DB", db.toUtf8());
    QSignalSpy refreshed(runs, &mlui::RunsView::refreshed);
    runs->refresh();
    QVERIFY(refreshed.wait(10000));
    runs->selectRuns({});  // the view may have selected the newest run itself
    QTRY_VERIFY_WITH_TIMEOUT(!runs->resumeAction()->isEnabled(), 5000);
    runs->selectRuns({*id});
    QTRY_VERIFY_WITH_TIMEOUT(runs->resumeAction()->isEnabled(), 5000);
    bool ended = false;
    ml::RunFinished fin;
    std::optional<int64_t> resumedId;
    connect(w.session(), &mlui::TrainingSession::runEnded, this, [&](const ml::RunFinished& f, std::optional<int64_t> rid) {
      fin = f;
      resumedId = rid;
      ended = true;
    });
    runs->resumeAction()->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(ended, 60000);
    qputenv("MIRRORLAB_DB", old);
    QCOMPARE(int(fin.status), int(ml::RunStatus::Finished));
    QVERIFY(resumedId == id);
    // The dashboard shows the whole run, the stored steps before the checkpoint included: every
    // step's loss, the three epochs' validation, and figures over all 114 steps.
    auto* dash = w.dashboard();
    QCOMPARE(dash->lossChart()->stepCount(), size_t(114));
    QCOMPARE(dash->lossChart()->validationGraph()->dataCount(), 3);
    QCOMPARE(dash->headline()->figures().steps, int64_t(114));
    QVERIFY2(dash->headline()->title()->text().contains(QStringLiteral("resumed after step 38")),
             qPrintable(dash->headline()->title()->text()));
    auto store = ml::RunStore::open(db.toStdString());
    const auto detail = store.loadRun(*id);
    QCOMPARE(detail.summary.status, std::string("finished"));
    QCOMPARE(detail.epochs.size(), size_t(3));
    const auto curves = store.loadCurves(*id);
    QCOMPARE(curves.size(), size_t(114));
    for (size_t i = 0; i < curves.size(); ++i) QCOMPARE(curves[i].step, int64_t(i + 1));
    // The resumed weights, kept with the finished run, equal the uninterrupted run's bit for bit.
    bool compared = false;
    for (const auto& a : detail.artifacts)
      if (a.kind == "weights") {
        ml::Sequential m(p.model);
        ml::loadWeights(m, a.path);
        const auto got = m.params();
        QVERIFY(std::equal(got.begin(), got.end(), straight.begin(), straight.end()));
        compared = true;
      }
    QVERIFY2(compared, "the resumed run kept no weights to compare");
  }
};

QTEST_MAIN(RunsViewTest)
#include "test_runsview.moc"
