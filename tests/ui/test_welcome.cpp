// The first run opens the welcome page; its examples, its lesson button and File > Open Example
// open the real shipped files; a damaged example file is listed with its path, not opened.
#include <QMenu>
#include <QMenuBar>
#include <QPushButton>
#include <QStackedWidget>

#include "MainWindow.h"
#include "ProjectDocument.h"
#include "UiTestUtil.h"
#include "learn/LearnView.h"
#include "learn/LessonsPanel.h"
#include "project/SharedData.h"
#include "welcome/WelcomePage.h"

class WelcomeTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;

  static QList<QPushButton*> exampleButtons(mlui::MainWindow& w) {
    return w.welcomePage()->findChildren<QPushButton*>(QStringLiteral("WelcomeExample"));
  }

 private Q_SLOTS:
  void initTestCase() { uitest::isolate(dir_); }

  void theFirstRunOpensTheWelcomePageWithTheShippedExamples() {
    QSettings().clear();
    mlui::MainWindow w;
    w.openInitialProject();
    w.show();
    QVERIFY(w.isWelcomeShown());
    QVERIFY2(w.welcomePage()->problems().isEmpty(), qPrintable(w.welcomePage()->problems()));
    QStringList names;
    for (auto* b : exampleButtons(w)) names << b->text();
    // In file-name order: fashion-cnn-bn.json, fashion-cnn.json, fashion-mlp.json, ...
    QCOMPARE(names, QStringList({QStringLiteral("Fashion-MNIST CNN with BatchNorm"), QStringLiteral("Fashion-MNIST CNN"),
                                 QStringLiteral("Fashion-MNIST MLP"), QStringLiteral("Fashion-MNIST wide MLP"),
                                 QStringLiteral("Spirals")}));
    // The Spirals card opens the shipped file itself and shows its model.
    exampleButtons(w).at(4)->click();
    QCOMPARE(QFileInfo(w.document()->path()).canonicalFilePath(),
             QFileInfo(QStringLiteral(MIRRORLAB_SOURCE_DIR "/projects/spirals.json")).canonicalFilePath());
    QCOMPARE(w.document()->project().name, std::string("Spirals"));
    QCOMPARE(w.currentPage(), mlui::MainWindow::ModelPage);
  }

  void aLaterRunOpensTheLastProjectInstead() {
    QSettings().setValue(QStringLiteral("lastProject"), QStringLiteral(MIRRORLAB_SOURCE_DIR "/projects/spirals.json"));
    mlui::MainWindow w;
    w.openInitialProject();
    QVERIFY(!w.isWelcomeShown());
    QCOMPARE(w.document()->project().name, std::string("Spirals"));
  }

  void theLessonButtonOpensTheFirstLesson() {
    mlui::MainWindow w;
    w.showWelcome();
    w.welcomePage()->findChild<QPushButton*>(QStringLiteral("WelcomeLesson"))->click();
    QCOMPARE(w.currentPage(), mlui::MainWindow::LearnPage);
    QCOMPARE(w.learnView()->currentTab(), mlui::LearnView::LessonsTab);
    QVERIFY(!w.learnView()->lessons()->lessons().empty());
    QCOMPARE(w.learnView()->lessons()->lessons().front().id, std::string("copies-and-shards"));
  }

  void openExampleListsEveryShippedExample() {
    mlui::MainWindow w;
    QMenu* examples = nullptr;
    for (QAction* a : w.menuBar()->actions())
      for (QAction* b : a->menu()->actions())
        if (b->menu() && b->text().contains(QStringLiteral("E&xample"))) examples = b->menu();
    QVERIFY(examples);
    Q_EMIT examples->aboutToShow();
    QCOMPARE(examples->actions().size(), int(ml::listExampleProjects(ml::findSharedData().projectsDir).size()));
    QAction* spirals = nullptr;
    for (QAction* a : examples->actions())
      if (a->text() == QStringLiteral("Spirals")) spirals = a;
    QVERIFY2(spirals, "the Examples menu has no Spirals entry");
    spirals->trigger();
    QCOMPARE(w.document()->project().name, std::string("Spirals"));
  }
};

QTEST_MAIN(WelcomeTest)
#include "test_welcome.moc"
