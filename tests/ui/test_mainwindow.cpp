// The main window opens on the example project with its model summary, and the dashboard can be
// saved as a picture.
#include <QListWidget>
#include <QTableWidget>

#include "DashboardView.h"
#include "MainWindow.h"
#include "ModelBuilderView.h"
#include "ProjectDocument.h"
#include "UiTestUtil.h"

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
};

QTEST_MAIN(MainWindowTest)
#include "test_mainwindow.moc"
