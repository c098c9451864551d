// mirrorlab: the studio. Opens the last project (or projects/fashion-mlp.json) in the main window.
#include <QAction>
#include <QApplication>
#include <QCommandLineParser>
#include <QScreen>

#include <algorithm>

#include "DashboardView.h"
#include "MainWindow.h"
#include "Theme.h"
#include "learn/LearnView.h"
#include "project/ScreenWords.h"

int main(int argc, char** argv) {
  // Core's messages name fields as these screens show them (project/ScreenWords.h), before any thread.
  ml::setFieldWords(&ml::screenWords());
  QApplication app(argc, argv);
  QApplication::setApplicationName(QStringLiteral("Mirrorlab"));
  QApplication::setOrganizationName(QStringLiteral("Mirrorlab"));
  QApplication::setApplicationVersion(QStringLiteral(MIRRORLAB_VERSION));
  QApplication::setDesktopFileName(QStringLiteral("mirrorlab"));
  mlui::applyStudioTheme(app);

  QCommandLineParser cli;
  cli.setApplicationDescription(QStringLiteral("Mirrorlab studio: synchronous data-parallel training you can watch"));
  cli.addHelpOption();
  cli.addVersionOption();
  cli.addPositionalArgument(QStringLiteral("project"), QStringLiteral("A project file (.json) to open"));
  QCommandLineOption page(QStringLiteral("page"),
                          QStringLiteral("Screen to show first: model, data, devices, training, dashboard, runs, learn, sweeps"),
                          QStringLiteral("name"));
  QCommandLineOption train(QStringLiteral("train"), QStringLiteral("Start training right away"));
  QCommandLineOption steps(QStringLiteral("max-steps"), QStringLiteral("Stop training after N steps"), QStringLiteral("N"));
  QCommandLineOption learnTab(QStringLiteral("learn-tab"), QStringLiteral("Learn screen tab: lessons, step, scaling, sync, code"),
                              QStringLiteral("name"));
  cli.addOptions({page, train, steps, learnTab});
  cli.process(app);

  mlui::MainWindow window;
  if (!cli.positionalArguments().isEmpty()) {
    if (!window.openProject(cli.positionalArguments().front())) window.openInitialProject();
  } else {
    window.openInitialProject();
  }
  const QStringList pages = {QStringLiteral("model"),    QStringLiteral("data"),      QStringLiteral("devices"),
                             QStringLiteral("training"), QStringLiteral("dashboard"), QStringLiteral("runs"),
                             QStringLiteral("learn"),    QStringLiteral("sweeps")};
  if (cli.isSet(page) && pages.contains(cli.value(page)))
    window.showPage(static_cast<mlui::MainWindow::Page>(pages.indexOf(cli.value(page))));
  const QStringList tabs = {QStringLiteral("lessons"), QStringLiteral("step"), QStringLiteral("scaling"), QStringLiteral("sync"),
                            QStringLiteral("code")};
  if (cli.isSet(learnTab) && tabs.contains(cli.value(learnTab))) {
    window.showPage(mlui::MainWindow::LearnPage);
    window.learnView()->showTab(static_cast<mlui::LearnView::Tab>(tabs.indexOf(cli.value(learnTab))));
  }
  if (cli.isSet(steps)) window.dashboard()->setMaxSteps(cli.value(steps).toInt());
  // A small screen (1024x700) gets a window that fits it, not the default 1480x920 cut off.
  if (const QScreen* screen = window.screen()) {
    const QRect room = screen->availableGeometry();
    if (window.width() > room.width() || window.height() > room.height())
      window.resize(std::min(window.width(), room.width()), std::min(window.height(), room.height() - 30));
  }
  window.show();
  if (cli.isSet(train)) window.dashboard()->trainAction()->trigger();
  return app.exec();
}
