// The main window opens on the example project with its model summary, and the dashboard can be
// saved as a picture; its timeline and step breakdown draw the network phase of a multi-worker run
// only when a step spent time on it, and a run stored across two hosts has one lane group per host.
// The user guide follows its links into docs/ and back.
#include <QLabel>
#include <QListWidget>
#include <QPushButton>
#include <QTableWidget>
#include <QTextBlock>
#include <QTextBrowser>

#include "DashboardView.h"
#include "HelpDialogs.h"
#include "MainWindow.h"
#include "ModelBuilderView.h"
#include "ProjectDocument.h"
#include "UiTestUtil.h"
#include "WorkersLauncher.h"
#include "charts/DeviceCharts.h"
#include "charts/TimelineChart.h"
#include "store/Recorder.h"
#include "store/RunStore.h"

class MainWindowTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;

 private Q_SLOTS:
  void initTestCase() { uitest::isolate(dir_); }

  void opensTheDefaultProjectWithItsSummary() {
    mlui::MainWindow w;
    w.openInitialProject();
    w.show();
    QVERIFY(w.document()->path().endsWith(QStringLiteral("fashion-mlp.json")));
    QCOMPARE(w.document()->project().model.layers.size(), size_t(3));
    auto* table = w.modelBuilder()->summaryTable();
    QCOMPARE(table->rowCount(), 3);
    QCOMPARE(table->item(0, 0)->text(), QStringLiteral("flatten (Flatten)"));
    QCOMPARE(table->item(0, 1)->text(), QStringLiteral("(None, 784)"));
    QCOMPARE(table->item(1, 2)->text(), QStringLiteral("100,480"));
    QCOMPARE(table->item(2, 2)->text(), QStringLiteral("1,290"));
    QCOMPARE(w.modelBuilder()->analysis().totalParams, int64_t(101770));
    QVERIFY2(w.modelBuilder()->totalsText().contains(QStringLiteral("101,770")), qPrintable(w.modelBuilder()->totalsText()));
    auto* stack = w.findChild<QListWidget*>(QStringLiteral("LayerStack"));
    QCOMPARE(stack->count(), 3);
    QVERIFY(!w.windowTitle().isEmpty());
  }

  void navigatesWithTheKeyboard() {
    mlui::MainWindow w;
    w.openInitialProject();
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QTest::keyClick(&w, Qt::Key_5, Qt::ControlModifier);
    QCOMPARE(w.currentPage(), mlui::MainWindow::DashboardPage);
    QTest::keyClick(&w, Qt::Key_1, Qt::ControlModifier);
    QCOMPARE(w.currentPage(), mlui::MainWindow::ModelPage);
  }

  // The timeline draws the network phase (several workers: the cross-worker hop of the all-reduce)
  // with its own colour and legend entry, only when a step spent time on it.
  void timelineShowsTheNetworkPhaseOnlyWhenNonZero() {
    mlui::MainWindow w;
    w.openInitialProject();
    w.show();
    auto* dash = w.dashboard();
    auto run = [&](int workers) {
      ml::RunStarted s;
      s.runName = "timeline";
      s.replicas = 4;
      s.workers = workers;
      for (int r = 0; r < 4; ++r) s.devices.push_back("cpu:" + std::to_string(r));
      s.totalSteps = 3;
      std::vector<ml::Event> events{s};
      for (int i = 1; i <= 3; ++i) {
        ml::StepEvent e;
        e.step = i;
        e.epoch = 1;
        e.samples = 64;
        e.stepTime = 0.02;
        e.wallTime = 0.02 * i;
        for (int r = 0; r < 4; ++r) {
          ml::ReplicaStep rs;
          rs.replica = r;
          rs.start = e.wallTime - e.stepTime;
          // forward, backward, all-reduce, wait, optimizer, all-gather (none), network: the hop on
          // local replica 0 of each of two workers (replicas 0 and 2), which the others wait for.
          const bool hop = workers == 2 && r % 2 == 0;
          rs.phases = {0.005, 0.007, 0.002, hop ? 0.0 : 0.004, 0.002, 0.0, hop ? 0.004 : 0.0};
          e.replicas.push_back(rs);
        }
        events.push_back(e);
      }
      dash->onEvents(events);
      dash->render();
    };
    auto* timeline = dash->timelineChart();
    run(2);
    QCOMPARE(timeline->barCount(mlui::Phase::Network), 3 * 2);  // 3 steps x replicas 0 and 2
    QCOMPARE(timeline->barCount(mlui::Phase::Wait), 3 * 2);     // replicas 1 and 3 wait for the hop
    QCOMPARE(timeline->barCount(mlui::Phase::AllReduce), 3 * 4);
    QCOMPARE(timeline->barCount(mlui::Phase::AllGather), 0);
    QCOMPARE(timeline->barCount(), 3 * 4 * 5);  // forward, backward, all-reduce, optimizer + network or wait
    const QString network = QStringLiteral("color:%1'>&#9632;</span> network").arg(mlui::phaseColor(mlui::Phase::Network).name());
    QVERIFY2(dash->phaseLegend()->text().contains(network), qPrintable(dash->phaseLegend()->text()));
    QVERIFY(mlui::phaseColor(mlui::Phase::Network) != mlui::phaseColor(mlui::Phase::AllReduce));
    // The step breakdown stacks it per device: 4 ms a step on replicas 0 and 2, none on 1 and 3;
    // 2 x 4 ms of the 4 x 20 ms of replica step time is network.
    auto* breakdown = dash->breakdownChart();
    auto net = breakdown->networkBars()->data();
    QCOMPARE(net->size(), 4);
    QVERIFY(qAbs(net->at(0)->value - 4.0) < 1e-9);
    QCOMPARE(net->at(1)->value, 0.0);
    QVERIFY(qAbs(net->at(2)->value - 4.0) < 1e-9);
    QVERIFY(qAbs(breakdown->networkShare() - 0.1) < 1e-9);
    QVERIFY(qAbs(breakdown->computeShare() - 0.7) < 1e-9);
    QVERIFY(breakdown->legend->hasItemWithPlottable(breakdown->networkBars()));

    run(1);  // one worker: no network time, no network bar, no legend entry
    QCOMPARE(timeline->barCount(mlui::Phase::Network), 0);
    QCOMPARE(timeline->barCount(mlui::Phase::Wait), 3 * 4);
    QCOMPARE(timeline->barCount(), 3 * 4 * 5);
    QVERIFY2(!dash->phaseLegend()->text().contains(QStringLiteral("network")), qPrintable(dash->phaseLegend()->text()));
    QVERIFY(dash->phaseLegend()->text().contains(QStringLiteral("all-reduce")));
    QCOMPARE(breakdown->networkShare(), 0.0);
    QVERIFY(!breakdown->legend->hasItemWithPlottable(breakdown->networkBars()));
  }

  // Help › User Guide shows the README; a click on its link to the command-line reference opens that
  // page of docs/ inside the guide, Back returns, and a link to a source file says where it lives.
  void theUserGuideFollowsItsLinksIntoTheDocs() {
    mlui::MainWindow w;
    w.show();
    mlui::showUserGuide(&w);
    auto* d = w.findChild<QDialog*>(QStringLiteral("UserGuide"));
    QVERIFY(d);
    QVERIFY(QTest::qWaitForWindowExposed(d));
    auto* text = d->findChild<QTextBrowser*>(QStringLiteral("guideText"));
    auto* back = d->findChild<QPushButton*>(QStringLiteral("guideBack"));
    QVERIFY(text && back);
    QVERIFY(!back->isEnabled());
    QFile readme(QStringLiteral(MIRRORLAB_SOURCE_DIR "/README.md"));
    QVERIFY(readme.open(QIODevice::ReadOnly));
    const QString firstLine = QString::fromUtf8(readme.readLine()).remove(QLatin1Char('#')).trimmed();
    QVERIFY2(text->toPlainText().startsWith(firstLine), qPrintable(text->toPlainText().left(80)));
    // Find the README's link to docs/CLI.md and click it where it is drawn.
    QTextCursor link;
    for (QTextBlock b = text->document()->begin(); b.isValid() && link.isNull(); b = b.next())
      for (auto it = b.begin(); !it.atEnd(); ++it)
        if (it.fragment().charFormat().anchorHref() == QLatin1String("docs/CLI.md")) {
          link = QTextCursor(text->document());
          link.setPosition(it.fragment().position() + 1);
          break;
        }
    QVERIFY2(!link.isNull(), "the README links to docs/CLI.md");
    text->setTextCursor(link);
    text->ensureCursorVisible();
    QTest::mouseClick(text->viewport(), Qt::LeftButton, {}, text->cursorRect(link).center());
    QTRY_COMPARE(text->source().path(), QStringLiteral("/guide/docs/CLI.md"));
    QFile cli(QStringLiteral(MIRRORLAB_SOURCE_DIR "/docs/CLI.md"));
    QVERIFY(cli.open(QIODevice::ReadOnly));
    const QString cliTitle = QString::fromUtf8(cli.readLine()).remove(QLatin1Char('#')).trimmed();
    QVERIFY2(text->toPlainText().startsWith(cliTitle), qPrintable(text->toPlainText().left(80)));
    QVERIFY(d->windowTitle().endsWith(QStringLiteral("docs/CLI.md")));
    QVERIFY(back->isEnabled());
    QTest::mouseClick(back, Qt::LeftButton);
    QCOMPARE(text->source().path(), QStringLiteral("/guide/README.md"));
    QVERIFY(text->toPlainText().startsWith(firstLine));
    // Every page the README links to is in the guide (none falls back to "Not in this guide").
    QStringList pages;
    for (QTextBlock b = text->document()->begin(); b.isValid(); b = b.next())
      for (auto it = b.begin(); !it.atEnd(); ++it) {
        const QString href = it.fragment().charFormat().anchorHref();
        if (href.endsWith(QLatin1String(".md")) && !href.contains(QLatin1Char(':'))) pages << href;
      }
    QVERIFY2(pages.size() >= 12, qPrintable(pages.join(QLatin1Char(' '))));
    for (const QString& page : pages) {
      text->setSource(QUrl(QStringLiteral("qrc:/guide/README.md")).resolved(QUrl(page)));
      QVERIFY2(!text->toPlainText().startsWith(QStringLiteral("Not in this guide")), qPrintable(page));
      text->backward();
    }
    text->setSource(QUrl(QStringLiteral("qrc:/guide/docs/CLI.md")).resolved(QUrl(QStringLiteral("../core/Format.h"))));
    QVERIFY2(text->toPlainText().contains(QStringLiteral("core/Format.h")), qPrintable(text->toPlainText()));
    d->close();
  }

  // A run of 2 hosts x 1 worker x 2 replicas, recorded as worker 1 records it and read back from the
  // store as the studio follows a multi-worker run: the timeline has one lane group per host, each
  // named, with its two lanes labelled by worker and device and a gap between the groups.
  void timelineHasOneLaneGroupPerHostOfAStoredRun() {
    const std::string db = dir_.filePath(QStringLiteral("hosts.sqlite")).toStdString();
    recordTwoHostRun(db);
    auto store = ml::RunStore::open(db);
    const ml::RunDetail detail = store.loadRun(1);
    std::vector<ml::Event> events{mlui::startedFromStore(detail)};
    for (const auto& st : store.loadSteps(1, 1, 3)) events.push_back(st);
    QCOMPARE(events.size(), size_t(4));

    mlui::MainWindow w;
    w.openInitialProject();
    w.resize(1400, 900);
    w.show();
    w.showPage(mlui::MainWindow::DashboardPage);
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    auto* dash = w.dashboard();
    dash->onEvents(events);
    dash->render();
    auto* timeline = dash->timelineChart();
    QCOMPARE(timeline->hostGroups(), QStringList({QStringLiteral("mlhost1"), QStringLiteral("mlhost2")}));
    QCOMPARE(timeline->laneGroup(0), 0);
    QCOMPARE(timeline->laneGroup(1), 0);
    QCOMPARE(timeline->laneGroup(2), 1);
    QCOMPARE(timeline->laneGroup(3), 1);
    // Lanes within a host one apart, the two hosts' groups further apart.
    QCOMPARE(timeline->lanePosition(1) - timeline->lanePosition(0), 1.0);
    QVERIFY(timeline->lanePosition(2) - timeline->lanePosition(1) > 1.5);
    auto* ticker = dynamic_cast<QCPAxisTickerText*>(timeline->yAxis->ticker().data());
    QVERIFY(ticker);
    QCOMPARE(ticker->ticks().value(timeline->lanePosition(3)), QStringLiteral("worker2/cpu:1"));
    QCOMPARE(timeline->barCount(), 3 * 4 * 5);
    QCOMPARE(timeline->barCount(mlui::Phase::Network), 3 * 2);  // one hop per host and step
    // The groups are drawn: a name per host, over its band.
    int names = 0;
    for (int i = 0; i < timeline->itemCount(); ++i)
      if (auto* text = qobject_cast<QCPItemText*>(timeline->item(i)))
        names += text->text() == QStringLiteral("host mlhost1") || text->text() == QStringLiteral("host mlhost2");
    QCOMPARE(names, 2);
    const QImage img = timeline->grab().toImage();
    QVERIFY(img.width() > 300);
    QVERIFY(uitest::distinctColors(img) > 5);

    // A run on one host keeps one group and the lanes without the host.
    ml::RunStarted one = mlui::startedFromStore(detail);
    one.hosts = {"vm", "vm"};
    for (auto& d : one.devices) d = "vm" + d.substr(d.find('/'));
    dash->onEvents({one});
    dash->render();
    QVERIFY(timeline->hostGroups().isEmpty());
    QCOMPARE(timeline->lanePosition(2), 2.0);
  }

  void dashboardSavesAPicture() {
    mlui::MainWindow w;
    w.openInitialProject();
    w.resize(1400, 900);
    w.show();
    w.showPage(mlui::MainWindow::DashboardPage);
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    const QString path = dir_.filePath(QStringLiteral("dashboard.png"));
    QVERIFY(w.dashboard()->grab().save(path));
    QFileInfo f(path);
    QVERIFY(f.exists());
    QVERIFY(f.size() > 10000);
    const QImage img(path);
    QVERIFY(img.width() > 800);
    QVERIFY(uitest::distinctColors(img) > 10);
  }

 private:
  // 3 steps of 2 hosts x 1 worker x 2 replicas through the Recorder, as worker 1 records them.
  static void recordTwoHostRun(const std::string& db) {
    auto ch = std::make_shared<ml::Channel>();
    ml::Recorder rec(db, ch);
    ml::RunStarted s;
    s.runName = "two hosts";
    s.projectJson = R"({"name":"two hosts"})";
    s.configJson = R"({"devices":"cpu:2","workers":2})";
    s.replicas = 4;
    s.workers = 2;
    s.hosts = {"mlhost1", "mlhost2"};
    for (int r = 0; r < 4; ++r)
      s.devices.push_back(s.hosts[static_cast<size_t>(r / 2)] + "/worker" + std::to_string(r / 2 + 1) +
                          "/cpu:" + std::to_string(r % 2) + " (simulated)");
    s.globalBatch = 64;
    s.perReplicaBatch = 16;
    s.epochs = 1;
    s.stepsPerEpoch = s.totalSteps = 3;
    ch->tryPush(s);
    for (int i = 1; i <= 3; ++i) {
      ml::StepEvent e;
      e.step = e.stepInEpoch = i;
      e.epoch = 1;
      e.stepsPerEpoch = 3;
      e.samples = 64;
      e.stepTime = 0.02;
      e.wallTime = 0.02 * i;
      for (int r = 0; r < 4; ++r) {
        ml::ReplicaStep rs;
        rs.replica = r;
        rs.samples = 16;
        rs.start = e.wallTime - e.stepTime;
        const bool hop = r % 2 == 0;  // local replica 0 of each host carries the cross-host hop
        rs.phases = {0.005, 0.007, 0.002, hop ? 0.0 : 0.004, 0.002, 0.0, hop ? 0.004 : 0.0};
        e.replicas.push_back(rs);
      }
      ch->tryPush(e);
    }
    ch->tryPush(ml::RunFinished{ml::RunStatus::Finished, "", 0.06, 3, 0.5, 0.75});
    rec.stop();
    QVERIFY2(rec.error().empty() && rec.runId(), rec.error().c_str());
  }
};

QTEST_MAIN(MainWindowTest)
#include "test_mainwindow.moc"
