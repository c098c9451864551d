// The Runs screen over a store written by the core directly (as the CLI does): it lists the run
// with its numbers, filters, sorts, renames and tags through the store.
// The trainer's headers first: core has a slots() member that Qt's `slots` macro would break,
// and this file also includes qcustomplot.h (which needs the macro).
#include "data/Dataset.h"
#include "store/Recorder.h"
#include "train/Trainer.h"

#include <QLineEdit>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTableView>

#include "MainWindow.h"
#include "RunTableModel.h"
#include "RunsView.h"
#include "UiTestUtil.h"

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
};

QTEST_MAIN(RunsViewTest)
#include "test_runsview.moc"
