// Project files: a bad file gives an error dialog naming the problem, saving round-trips and
// clears the modified mark, the file goes into the recent list.
#include <QSettings>

#include "MainWindow.h"
#include "ModelBuilderView.h"
#include "ProjectDocument.h"
#include "UiTestUtil.h"

class ProjectFilesTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;

 private Q_SLOTS:
  void initTestCase() { uitest::isolate(dir_); }

  void aBadProjectFileShowsTheErrorDialog() {
    const QString path = dir_.filePath(QStringLiteral("broken.json"));
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("{ \"schema_version\": 1, \"name\": \"no model\", \"training\": {\"epochs\": 3} }");
    f.close();
    mlui::MainWindow w;
    w.openInitialProject();
    w.show();
    const auto before = w.document()->path();
    QVERIFY(!w.openProject(path));
    const QString text = uitest::errorDialogText(&w);
    QVERIFY2(!text.isEmpty(), "no error dialog");
    // The core's message names the file and the missing part.
    QVERIFY2(text.contains(QStringLiteral("broken.json")) && text.contains(QStringLiteral("model")), qPrintable(text));
    QCOMPARE(w.document()->path(), before);  // the open project is kept
  }

  void notJsonAtAll() {
    const QString path = dir_.filePath(QStringLiteral("garbage.json"));
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("this is not json");
    f.close();
    mlui::MainWindow w;
    w.show();
    QVERIFY(!w.openProject(path));
    QVERIFY(uitest::errorDialogText(&w).contains(QStringLiteral("garbage.json")));
  }

  void savesAndReopens() {
    mlui::MainWindow w;
    w.openInitialProject();
    w.show();
    w.modelBuilder()->addLayer(QStringLiteral("Dropout"), 2);
    QVERIFY(w.document()->isModified());
    QVERIFY(w.isWindowModified());
    const QString path = dir_.filePath(QStringLiteral("saved.json"));
    QVERIFY(w.saveProject(path));
    QVERIFY(!w.document()->isModified());
    QCOMPARE(QSettings().value(QStringLiteral("recentProjects")).toStringList().value(0), QFileInfo(path).absoluteFilePath());

    mlui::MainWindow again;
    QVERIFY(again.openProject(path));
    QCOMPARE(again.document()->project().model.layers.size(), size_t(4));
    QCOMPARE(std::string(again.document()->project().model.layers[2].type()), std::string("Dropout"));
    QCOMPARE(again.modelBuilder()->analysis().totalParams, int64_t(101770));
  }
};

QTEST_MAIN(ProjectFilesTest)
#include "test_projectfiles.moc"
