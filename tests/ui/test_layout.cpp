// The window's size is the user's: every screen (each Learn tab and the welcome page included)
// lays out inside a 1024x700 window, after the runs, sweeps and experiments that fill them, and
// the window never resizes itself; at 1280x800 and above no screen needs horizontal scrolling, and
// no label is cut. ui.test_layout_wm runs it under Xvfb with the openbox window manager
// (tests/ui/run_under_wm.sh), where a minimum size above the window's would make the window
// manager refuse it; ui.test_layout runs it offscreen. MIRRORLAB_SHOTS=DIR keeps a picture of
// every screen at every size.
#include <QAbstractScrollArea>
#include <QComboBox>
#include <QLabel>
#include <QProgressBar>
#include <QScrollArea>
#include <QScrollBar>
#include <QSignalSpy>
#include <QStackedWidget>
#include <QTabBar>
#include <QTableWidget>

#include "LayoutCheck.h"
#include "MainWindow.h"
#include "ProjectDocument.h"
#include "RunsView.h"
#include "SweepsView.h"
#include "UiTestUtil.h"
#include "learn/LearnView.h"
#include "learn/LessonsPanel.h"
#include "learn/ScalingPanel.h"

class LayoutTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  QString db_;
  std::unique_ptr<mlui::MainWindow> w_;

  // A window manager manages the window: it draws a frame (a title bar) around the client area.
  static bool managed(const QWidget& w) { return w.frameGeometry().height() > w.geometry().height(); }

  void resizeTo(const QSize& size) {
    w_->resize(size);
    QTRY_COMPARE_WITH_TIMEOUT(w_->size(), size, 5000);
  }

  QWidget* currentScreen() {
    auto* pages = w_->centralWidget()->findChild<QStackedWidget*>(QString(), Qt::FindDirectChildrenOnly);
    auto* scroll = qobject_cast<QScrollArea*>(pages->currentWidget());
    return scroll ? scroll : pages->currentWidget();
  }

  void shot(const QString& name) {
    const QByteArray d = qgetenv("MIRRORLAB_SHOTS");
    if (d.isEmpty()) return;
    w_->grab().save(QString::fromUtf8(d) + QLatin1Char('/') + name + QStringLiteral(".png"));
  }

  // Shows one screen at the window's size and checks it; returns the problems found.
  QStringList checkScreen(const QString& name, const QSize& size) {
    QTest::qWait(150);  // layouts settle, charts replot
    QStringList problems;
    if (w_->size() != size)
      problems << QStringLiteral("%1: the window is %2x%3, not %4x%5 as the user left it")
                      .arg(name)
                      .arg(w_->width())
                      .arg(w_->height())
                      .arg(size.width())
                      .arg(size.height());
    const QSize minimum = w_->minimumSize().expandedTo(w_->minimumSizeHint());
    if (minimum.width() > 1024 || minimum.height() > 700)
      problems
          << QStringLiteral("%1: the window declares a minimum of %2x%3").arg(name).arg(minimum.width()).arg(minimum.height());
    const bool wide = size.width() >= 1280 && size.height() >= 800;
    problems << mlui::layoutProblems(currentScreen(), wide, name);
    shot(QStringLiteral("%1-%2x%3").arg(name).arg(size.width()).arg(size.height()));
    return problems;
  }

 private Q_SLOTS:
  void initTestCase() {
    uitest::isolate(dir_);
    db_ = dir_.filePath(QStringLiteral("layout.sqlite"));
    qputenv("MIRRORLAB_DB", db_.toUtf8());
    // Stored runs for the Runs screen, the replay and the sync panel.
    QVERIFY(uitest::recordRun(db_, "cpu:1", 2, 40, "one device") > 0);
    QVERIFY(uitest::recordRun(db_, "cpu:3", 2, 40, "three devices with a long name that the table elides") > 0);
    w_ = std::make_unique<mlui::MainWindow>();
    w_->openProject(QStringLiteral(MIRRORLAB_SOURCE_DIR "/projects/fashion-cnn-bn.json"));
    w_->resize(1024, 700);
    w_->show();
    QVERIFY(QTest::qWaitForWindowExposed(w_.get()));
    if (qEnvironmentVariableIsSet("MIRRORLAB_REQUIRE_WM")) QTRY_VERIFY2(managed(*w_), "no window manager framed the window");
  }

  // What fills the screens most: a finished scaling experiment on Learn (its table and charts), a
  // finished sweep, and lesson 9 with its answer chosen.
  void fillTheScreens() {
    w_->document()->reset(uitest::spiralsProject("cpu:3", 2));
    QCOMPARE(uitest::trainInWindow(*w_, 30).status, ml::RunStatus::Finished);
    w_->document()->reset(uitest::spiralsProject("cpu:1", 1));
    auto* scaling = w_->learnView()->scaling();
    scaling->setDevices(QStringLiteral("cpu:1,2,4"));
    scaling->setSteps(6);
    QSignalSpy done(scaling, &mlui::ScalingPanel::finished);
    QSignalSpy error(scaling, &mlui::ScalingPanel::errorOccurred);
    QVERIFY2(scaling->start(), error.isEmpty() ? "" : qPrintable(error.front().at(1).toString()));
    QVERIFY(done.wait(60000));
    auto* sweeps = w_->sweepsView();
    sweeps->fillFromProject();
    sweeps->batchField()->setText(QStringLiteral("16, 32"));
    sweeps->lrField()->setText(QStringLiteral("0.01, 0.003"));
    sweeps->stepsField()->setValue(5);
    QVERIFY(sweeps->start());
    QTRY_VERIFY_WITH_TIMEOUT(!sweeps->isRunning(), 60000);
    // A finished point's bar says the steps its run took (it said "1 / 1 steps").
    QTRY_COMPARE(sweeps->pointTable()->rowCount(), 4);
    for (int row = 0; row < 4; ++row)  // the stored results come after the run ends
      QTRY_COMPARE_WITH_TIMEOUT(qobject_cast<QProgressBar*>(sweeps->pointTable()->cellWidget(row, 6))->text(),
                                QStringLiteral("5 steps"), 20000);
    auto* lessons = w_->learnView()->lessons();
    w_->showPage(mlui::MainWindow::LearnPage);
    QTRY_VERIFY(!lessons->lessons().empty());
    lessons->selectLesson(static_cast<int>(lessons->lessons().size()) - 1);
    lessons->chooseAnswer(0);
    w_->openProject(QStringLiteral(MIRRORLAB_SOURCE_DIR "/projects/fashion-cnn-bn.json"));
  }

  void everyScreenFits_data() {
    QTest::addColumn<QSize>("size");
    QTest::newRow("1024x700") << QSize(1024, 700);
    QTest::newRow("1280x800") << QSize(1280, 800);
    QTest::newRow("1600x1000") << QSize(1600, 1000);
  }

  void everyScreenFits() {
    QFETCH(QSize, size);
    resizeTo(size);
    QStringList problems;
    const char* names[] = {"model", "data", "devices", "training", "dashboard", "runs", "learn", "sweeps"};
    for (int p = 0; p <= mlui::MainWindow::SweepsPage; ++p) {
      w_->showPage(static_cast<mlui::MainWindow::Page>(p));
      if (p == mlui::MainWindow::RunsPage) {
        QSignalSpy refreshed(w_->runsView(), &mlui::RunsView::refreshed);
        QVERIFY(refreshed.wait(10000));
        w_->runsView()->selectRuns({1, 2});
      }
      if (p != mlui::MainWindow::LearnPage) {
        problems << checkScreen(QString::fromLatin1(names[p]), size);
        continue;
      }
      const char* tabs[] = {"lessons", "step", "scaling", "sync", "code"};
      for (int t = 0; t <= mlui::LearnView::CodeTab; ++t) {
        w_->learnView()->showTab(static_cast<mlui::LearnView::Tab>(t));
        problems << checkScreen(QStringLiteral("learn-%1").arg(QString::fromLatin1(tabs[t])), size);
      }
    }
    w_->showWelcome();
    problems << checkScreen(QStringLiteral("welcome"), size);
    QVERIFY2(problems.isEmpty(), qPrintable(problems.join(QLatin1Char('\n'))));
  }

  void cleanupTestCase() { w_.reset(); }
};

QTEST_MAIN(LayoutTest)
#include "test_layout.moc"
