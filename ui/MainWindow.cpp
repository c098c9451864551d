// The studio window: navigation, menus, project files and the run state.
#include "MainWindow.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QCoreApplication>
#include <QDebug>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QListWidget>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressBar>
#include <QRegularExpression>
#include <QScrollArea>
#include <QSettings>
#include <QStackedWidget>
#include <QStandardPaths>
#include <QStatusBar>
#include <QUndoStack>

#include "DashboardView.h"
#include "DataCache.h"
#include "DataView.h"
#include "DevicesView.h"
#include "Error.h"
#include "ExportModelDialog.h"
#include "FitBanner.h"
#include "HelpDialogs.h"
#include "KerasImportAction.h"
#include "ModelBuilderView.h"
#include "ProjectDocument.h"
#include "RunsView.h"
#include "SweepsView.h"
#include "Theme.h"
#include "TrainingSession.h"
#include "TrainingSettingsView.h"
#include "backend/DeviceList.h"
#include "learn/LearnView.h"
#include "learn/LessonsPanel.h"
#include "project/SharedData.h"
#include "store/RunStore.h"
#include "welcome/CsvImport.h"
#include "welcome/ExamplesMenu.h"
#include "welcome/WelcomePage.h"

namespace mlui {

static QString q(const std::string& s) { return QString::fromStdString(s); }
static constexpr int kMaxRecent = 8;

// Each screen sits in a scroll area of its own, so that no screen's content (a long table, a
// word-wrapped sentence in a narrow column) can raise the window's minimum size: a top-level
// window's layout makes its minimum the largest of its pages', and the window grew itself to it.
static QWidget* inScrollArea(QWidget* page, QWidget* parent) {
  auto* scroll = new QScrollArea(parent);
  scroll->setObjectName(QStringLiteral("PageScroll"));
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setWidget(page);
  return scroll;
}

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  doc_ = new ProjectDocument(this);
  cache_ = std::make_shared<DataCache>();
  session_ = new TrainingSession(cache_, this);

  auto* central = new QWidget(this);
  auto* h = new QHBoxLayout(central);
  h->setContentsMargins(0, 0, 0, 0);
  h->setSpacing(0);
  auto* navBar = new QWidget(central);
  navBar->setObjectName(QStringLiteral("NavBar"));
  navBar->setAttribute(Qt::WA_StyledBackground);
  auto* nv = new QVBoxLayout(navBar);
  nv->setContentsMargins(0, 4, 0, 8);
  auto* title = new QLabel(QStringLiteral("Mirrorlab"), navBar);
  title->setObjectName(QStringLiteral("NavTitle"));
  auto* subtitle = new QLabel(tr("mirrored training studio"), navBar);
  subtitle->setObjectName(QStringLiteral("NavSubtitle"));
  nav_ = new QListWidget(navBar);
  nav_->setObjectName(QStringLiteral("NavList"));
  nav_->setIconSize(QSize(22, 22));
  nav_->setAccessibleName(tr("Screens"));
  nav_->setFixedWidth(190);
  nv->addWidget(title);
  nv->addWidget(subtitle);
  nv->addWidget(nav_, 1);
  pages_ = new QStackedWidget(central);
  h->addWidget(navBar);
  h->addWidget(pages_, 1);
  setCentralWidget(central);

  model_ = new ModelBuilderView(doc_, pages_);
  data_ = new DataView(doc_, cache_, pages_);
  devices_ = new DevicesView(doc_, pages_);
  training_ = new TrainingSettingsView(doc_, cache_, pages_);
  dashboard_ = new DashboardView(doc_, session_, &MainWindow::storePath, pages_);
  runs_ = new RunsView(&MainWindow::storePath, pages_);
  learn_ = new LearnView(doc_, session_, cache_, &MainWindow::storePath, pages_);
  sweeps_ = new SweepsView(doc_, cache_, &MainWindow::storePath, pages_);
  const struct {
    QWidget* page;
    QString name, icon;
  } pages[] = {{model_, tr("Model"), QStringLiteral("model")},
               {data_, tr("Data"), QStringLiteral("data")},
               {devices_, tr("Devices"), QStringLiteral("devices")},
               {training_, tr("Training"), QStringLiteral("training")},
               {dashboard_, tr("Dashboard"), QStringLiteral("dashboard")},
               {runs_, tr("Runs"), QStringLiteral("runs")},
               {learn_, tr("Learn"), QStringLiteral("learn")},
               {sweeps_, tr("Sweeps"), QStringLiteral("sweeps")}};
  for (const auto& p : pages) {
    pages_->addWidget(inScrollArea(p.page, pages_));
    new QListWidgetItem(icon(p.icon), p.name, nav_);
  }
  welcome_ = new WelcomePage(pages_);
  pages_->addWidget(inScrollArea(welcome_, pages_));
  connect(welcome_, &WelcomePage::openExampleRequested, this, [this](const QString& path) {
    if (maybeSave() && openProject(path)) showPage(ModelPage);
  });
  connect(welcome_, &WelcomePage::firstLessonRequested, this, [this] {
    learn_->showTab(LearnView::LessonsTab);
    learn_->lessons()->selectLesson(0);
    showPage(LearnPage);
  });
  connect(welcome_, &WelcomePage::importCsvRequested, this, &MainWindow::importCsv);
  connect(nav_, &QListWidget::currentRowChanged, pages_, &QStackedWidget::setCurrentIndex);
  connect(pages_, &QStackedWidget::currentChanged, this, [this](int i) {
    if (i == RunsPage) runs_->refresh();
    if (i == SweepsPage && !sweeps_->isRunning()) sweeps_->refresh(sweeps_->shownSweep());
  });
  nav_->setCurrentRow(0);

  buildMenus();
  buildStatusBar();

  connect(data_, &DataView::dataLoaded, training_, &TrainingSettingsView::refresh);
  // The fit check compares the model with the data: live on the Model screen, and Train waits.
  connect(model_->fitBanner(), &FitBanner::checked, dashboard_, &DashboardView::setBlockedReason);
  model_->setDataCache(cache_);
  connect(data_, &DataView::dataLoaded, this, [this] { model_->setDataCache(cache_); });
  connect(doc_, &ProjectDocument::pathChanged, this, &MainWindow::updateTitle);
  connect(doc_, &ProjectDocument::modifiedChanged, this, &MainWindow::updateTitle);
  connect(doc_, &ProjectDocument::changed, this, &MainWindow::updateTitle);
  connect(session_, &TrainingSession::stateChanged, this, [this](TrainingSession::State s) {
    setSteadyText(runState_, TrainingSession::stateText(s));
    busy_->setVisible(s == TrainingSession::State::Preparing || s == TrainingSession::State::Stopping);
    if (s == TrainingSession::State::Preparing) showPage(DashboardPage);
    if (s == TrainingSession::State::Running) {
      statusBar()->clearMessage();
      // The run loaded the data (a CSV not previewed yet): the fit checks can now read its labels.
      model_->setDataCache(cache_);
      training_->refresh();
    }
  });
  connect(session_, &TrainingSession::statusMessage, this, [this](const QString& m) { statusBar()->showMessage(m); });
  connect(session_, &TrainingSession::runFailed, this, [this](const QString& m) { showError(tr("Training could not run"), m); });
  connect(session_, &TrainingSession::runEnded, this, &MainWindow::onRunEnded);
  // The status bar names the newest step, at most 4 times a second. It used to be set once per step
  // (2,000 times a second for a small model), each time a layout pass of the window.
  connect(session_, &TrainingSession::eventsArrived, this, [this](const std::vector<ml::Event>& events) {
    if (stepShown_.isValid() && stepShown_.elapsed() < 250) return;  // a counter: 4 times a second is plenty
    for (auto e = events.rbegin(); e != events.rend(); ++e)
      if (const auto* s = std::get_if<ml::StepEvent>(&*e)) {
        stepShown_.start();
        setSteadyText(
            runState_,
            tr("%1 · epoch %2 · step %3").arg(TrainingSession::stateText(session_->state())).arg(s->epoch).arg(s->step));
        return;
      }
  });
  connect(runs_, &RunsView::errorOccurred, this, &MainWindow::showError);
  connect(learn_, &LearnView::errorOccurred, this, &MainWindow::showError);
  connect(sweeps_, &SweepsView::errorOccurred, this, &MainWindow::showError);
  connect(sweeps_, &SweepsView::runRequested, this, &MainWindow::showRun);
  connect(sweeps_, &SweepsView::busyChanged, dashboard_, &DashboardView::setExternalRun);
  connect(learn_, &LearnView::busyChanged, dashboard_, &DashboardView::setExternalRun);
  connect(learn_, &LearnView::busyChanged, this, [this](bool busy) {
    setSteadyText(runState_, busy ? tr("Learn: experiment running") : TrainingSession::stateText(session_->state()));
  });
  connect(runs_, &RunsView::resumeRequested, this, [this](int64_t id) {
    if (session_->isActive()) {
      showError(tr("Resume"), tr("A run is training: stop it before resuming another."));
      return;
    }
    session_->resume(id, storePath());
  });
  connect(runs_, &RunsView::openProjectRequested, this, [this](const ml::Project& p, const QString& name) {
    if (!maybeSave()) return;
    doc_->reset(p);
    statusBar()->showMessage(tr("Opened the project of run “%1”: train it again or save it as a file.").arg(name), 8000);
    showPage(ModelPage);
  });
  resize(1480, 920);
  updateTitle();
}

MainWindow::~MainWindow() = default;

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* a = file->addAction(icon(QStringLiteral("new")), tr("&New Project"), this, &MainWindow::newProject);
  a->setShortcut(QKeySequence::New);
  a = file->addAction(icon(QStringLiteral("open")), tr("&Open Project…"), this, &MainWindow::open);
  a->setShortcut(QKeySequence::Open);
  recentMenu_ = file->addMenu(tr("Open &Recent"));
  setUpExamplesMenu(
      file->addMenu(icon(QStringLiteral("open")), tr("Open E&xample")),
      [this](const QString& path) {
        if (maybeSave()) openProject(path);
      },
      [this](const QString& title, const QString& message) { showError(title, message); });
  file->addSeparator();
  a = file->addAction(icon(QStringLiteral("save")), tr("&Save"), this, &MainWindow::save);
  a->setShortcut(QKeySequence::Save);
  a = file->addAction(tr("Save &As…"), this, &MainWindow::saveAs);
  a->setShortcut(QKeySequence::SaveAs);
  file->addSeparator();
  file->addAction(icon(QStringLiteral("export")), tr("&Export Model…"), this,
                  [this] { openProjectExportDialog(this, doc_->project(), storePath(), session_->lastRunId()); });
  file->addAction(icon(QStringLiteral("open")), tr("&Import Keras Model…"), this,
                  [this] {
                    if (!maybeSave()) return;
                    importKerasModel(
                        this, [this](const QString& path) { openProject(path); },
                        [this](const QString& title, const QString& message) { showError(title, message); });
                  })
      ->setObjectName(QStringLiteral("ImportKerasModel"));
  file->addSeparator();
  a = file->addAction(tr("&Quit"), this, &QWidget::close);
  a->setShortcut(QKeySequence::Quit);
  updateRecentMenu();

  QMenu* edit = menuBar()->addMenu(tr("&Edit"));
  QAction* undo = doc_->undoStack()->createUndoAction(this, tr("&Undo"));
  undo->setIcon(icon(QStringLiteral("undo")));
  undo->setShortcut(QKeySequence::Undo);
  QAction* redo = doc_->undoStack()->createRedoAction(this, tr("&Redo"));
  redo->setIcon(icon(QStringLiteral("redo")));
  redo->setShortcuts({QKeySequence::Redo, QKeySequence(Qt::CTRL | Qt::Key_Y)});
  edit->addAction(undo);
  edit->addAction(redo);

  QMenu* run = menuBar()->addMenu(tr("&Run"));
  run->addAction(dashboard_->trainAction());
  run->addAction(dashboard_->pauseAction());
  run->addAction(dashboard_->stopAction());
  run->addSeparator();
  buildFaultMenu(run->addMenu(tr("&Inject a Fault")));

  QMenu* view = menuBar()->addMenu(tr("&View"));
  for (int i = 0; i < nav_->count(); ++i) {
    QAction* go =
        view->addAction(nav_->item(i)->icon(), nav_->item(i)->text(), this, [this, i] { showPage(static_cast<Page>(i)); });
    go->setShortcut(QKeySequence(Qt::CTRL | static_cast<Qt::Key>(Qt::Key_1 + i)));
  }
  QMenu* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(icon(QStringLiteral("mirrorlab")), tr("&Welcome"), this, &MainWindow::showWelcome);
  help->addAction(tr("&User Guide"), this, [this] { showUserGuide(this); })->setShortcut(QKeySequence::HelpContents);
  help->addAction(tr("&Keyboard Shortcuts"), this, [this] { showShortcuts(this, menuBar()); });
  help->addSeparator();
  help->addAction(tr("&About Mirrorlab"), this, [this] {
    QMessageBox::about(this, tr("About Mirrorlab"),
                       tr("<h3>Mirrorlab %1</h3><p>A studio for synchronous data-parallel (\"mirrored\") training: "
                          "every device holds a copy of the model, each batch is split across them and the gradients "
                          "are all-reduced so the copies stay identical.</p><p>Charts by QCustomPlot (GPL-3.0).</p>")
                           .arg(QStringLiteral(MIRRORLAB_VERSION)));
  });
}

void MainWindow::buildStatusBar() {
  runState_ = new QLabel(TrainingSession::stateText(TrainingSession::State::Idle), this);
  runState_->setObjectName(QStringLiteral("RunState"));
  busy_ = new QProgressBar(this);
  busy_->setRange(0, 0);
  busy_->setMaximumWidth(120);
  busy_->setMaximumHeight(12);
  busy_->hide();
  projectInfo_ = new QLabel(this);
  setRole(projectInfo_, "caption");
  statusBar()->addPermanentWidget(projectInfo_);
  statusBar()->addPermanentWidget(busy_);
  statusBar()->addPermanentWidget(runState_);
}

void MainWindow::showPage(Page page) {
  if (nav_->currentRow() == page) pages_->setCurrentIndex(page);  // back from the welcome page
  nav_->setCurrentRow(page);
}

void MainWindow::showWelcome() {
  welcome_->refresh();
  nav_->clearSelection();
  pages_->setCurrentIndex(pages_->count() - 1);  // the welcome page's scroll area, added last
}

void MainWindow::importCsv() {
  if (!maybeSave()) return;
  const QString path =
      QFileDialog::getOpenFileName(this, tr("Import a CSV file"), QDir::homePath(), tr("CSV files (*.csv);;All files (*)"));
  if (path.isEmpty()) return;
  try {
    doc_->reset(csvProject(path));
  } catch (const std::exception& e) {
    showError(tr("Cannot import the CSV file"), q(e.what()));
    return;
  }
  statusBar()->showMessage(tr("Imported %1: check the label column, then train.").arg(path), 8000);
  showPage(DataPage);
}

void MainWindow::showRun(int64_t runId) {
  // The list reloads asynchronously: select the run once it has.
  auto* once = new QObject(this);
  connect(runs_, &RunsView::refreshed, once, [this, once, runId] {
    runs_->selectRuns({runId});
    once->deleteLater();
  });
  const bool already = currentPage() == RunsPage;
  showPage(RunsPage);  // switching pages refreshes the list
  if (already) runs_->refresh();
}

bool MainWindow::isWelcomeShown() const { return pages_->currentIndex() == pages_->count() - 1; }

MainWindow::Page MainWindow::currentPage() const { return static_cast<Page>(pages_->currentIndex()); }

// Fault injection for teaching and tests: each entry adds one fault to the project's
// distribute.faults (an undoable edit); the run is tagged "fault injected" in the store.
void MainWindow::buildFaultMenu(QMenu* menu) {
  menu->setObjectName(QStringLiteral("InjectFaultMenu"));
  menu->setToolTipsVisible(true);
  auto add = [this, menu](const QString& text, const QString& tip, std::function<std::string(const ml::Project&)> spec) {
    QAction* a = menu->addAction(text, this, [this, text, spec] {
      ml::Project p = doc_->project();
      p.distribute.faults.push_back(ml::parseFault(spec(p)));
      doc_->edit(tr("Inject a fault: %1").arg(text), p);
      statusBar()->showMessage(
          tr("Fault added: %1. The next run is tagged \"fault injected\".").arg(q(p.distribute.faults.back().text)), 8000);
    });
    a->setToolTip(tip);
  };
  // The last device of the project's list: on cpu:N, cpu:(N-1); always a device of the run.
  auto lastDevice = [](const ml::Project& p) { return p.distribute.devices.devices.back().label(); };
  add(tr("Slow Device (3x)"), tr("The last device's compute takes 3 times longer: every other replica waits for it"),
      [lastDevice](const ml::Project& p) { return "slow:" + lastDevice(p) + "=3x"; });
  add(tr("Hang at Step 50"), tr("The last device stops in backward of step 50: the watchdog stops the run with a diagnosis"),
      [lastDevice](const ml::Project& p) { return "hang:" + lastDevice(p) + "@step=50"; });
  add(tr("NaN Gradient at Step 20"), tr("The last device's gradient becomes NaN at step 20: the run ends diverged, naming it"),
      [lastDevice](const ml::Project& p) { return "nan:" + lastDevice(p) + "@step=20"; });
  add(tr("Kill at Step 30"), tr("The run stops after step 30 as if its process had died; resume it from the Runs screen"),
      [](const ml::Project&) { return std::string("kill@step=30"); });
  menu->addSeparator();
  menu->addAction(tr("Remove All Faults"), this, [this] {
    ml::Project p = doc_->project();
    if (p.distribute.faults.empty()) return;
    p.distribute.faults.clear();
    doc_->edit(tr("Remove injected faults"), p);
  });
}

QString MainWindow::storePath() { return q(ml::defaultStorePath()); }

QString MainWindow::findDefaultProject() {
  const ml::SharedDataDir shared = ml::findSharedData();
  if (shared.origin.empty()) return {};  // nothing installed anywhere: start from a new project
  // Where the default example must be, even when it is missing: opening it then names that path.
  const QFileInfo f(q(shared.projectsDir) + QStringLiteral("/fashion-mlp.json"));
  return f.exists() ? f.canonicalFilePath() : f.absoluteFilePath();
}

void MainWindow::openInitialProject() {
  // No settings at all: the first run of the studio for this user, which opens on the welcome page.
  if (QSettings().allKeys().isEmpty()) showWelcome();
  const QString last = QSettings().value(QStringLiteral("lastProject")).toString();
  if (!last.isEmpty() && QFileInfo::exists(last)) {
    try {
      doc_->load(last);
      return;
    } catch (const std::exception&) {
      // fall through to the example project; the user did not ask for this file now
    }
  }
  const QString def = findDefaultProject();
  if (!def.isEmpty()) {
    try {
      doc_->load(def);
      return;
    } catch (const std::exception& e) {
      showError(tr("Cannot open the example project"), q(e.what()));
    }
  }
  doc_->reset(mlui::newProject());
}

bool MainWindow::openProject(const QString& path) {
  try {
    doc_->load(path);
  } catch (const std::exception& e) {
    showError(tr("Cannot open the project"), q(e.what()));
    return false;
  }
  addRecent(doc_->path());
  statusBar()->showMessage(tr("Opened %1").arg(path), 5000);
  return true;
}

bool MainWindow::saveProject(const QString& path) {
  try {
    doc_->save(path);
  } catch (const std::exception& e) {
    showError(tr("Cannot save the project"), q(e.what()));
    return false;
  }
  addRecent(doc_->path());
  statusBar()->showMessage(tr("Saved %1").arg(path), 5000);
  return true;
}

void MainWindow::showError(const QString& title, const QString& message) {
  qWarning().noquote() << title + QStringLiteral(": ") + message;  // also on stderr, for logs and scripts
  statusBar()->showMessage(title + QStringLiteral(": ") + message, 15000);
  auto* box = new QMessageBox(QMessageBox::Critical, title, message, QMessageBox::Ok, this);
  box->setObjectName(QStringLiteral("ErrorDialog"));
  box->setAttribute(Qt::WA_DeleteOnClose);
  box->setTextInteractionFlags(Qt::TextSelectableByMouse);
  box->open();  // window-modal, does not block the event loop (training keeps drawing)
}

void MainWindow::newProject() {
  if (!maybeSave()) return;
  doc_->reset(mlui::newProject());
  showPage(ModelPage);
}

void MainWindow::open() {
  if (!maybeSave()) return;
  const QString dir =
      doc_->path().isEmpty() ? QFileInfo(findDefaultProject()).absolutePath() : QFileInfo(doc_->path()).absolutePath();
  const QString path =
      QFileDialog::getOpenFileName(this, tr("Open project"), dir, tr("Mirrorlab projects (*.json);;All files (*)"));
  if (!path.isEmpty()) openProject(path);
}

bool MainWindow::isExample(const QString& path) {
  if (path.isEmpty()) return false;
  const QString def = findDefaultProject();
  if (def.isEmpty()) return false;
  const QString examples = QFileInfo(def).canonicalPath() + QLatin1Char('/');
  return QFileInfo(path).canonicalFilePath().startsWith(examples);
}

QString MainWindow::proposedSavePath() const {
  QString base = q(doc_->project().name).toLower();
  base.replace(QRegularExpression(QStringLiteral("[^a-z0-9]+")), QStringLiteral("-"));
  base.remove(QRegularExpression(QStringLiteral("^-+|-+$")));
  if (base.isEmpty()) base = QStringLiteral("project");
  QString dir = QStandardPaths::writableLocation(QStandardPaths::DocumentsLocation);
  if (dir.isEmpty()) dir = QDir::homePath();
  if (!doc_->path().isEmpty() && !isExample(doc_->path())) dir = QFileInfo(doc_->path()).absolutePath();
  return dir + QLatin1Char('/') + base + QStringLiteral(".json");
}

bool MainWindow::save() {
  // Never overwrite a bundled example: save a copy where the user keeps files.
  if (doc_->path().isEmpty() || isExample(doc_->path())) return saveAs();
  return saveProject(doc_->path());
}

bool MainWindow::saveAs() {
  const QString title = isExample(doc_->path()) ? tr("Save a copy of the example project") : tr("Save project as");
  const QString path = askSavePath
                           ? askSavePath(title, proposedSavePath())
                           : QFileDialog::getSaveFileName(this, title, proposedSavePath(), tr("Mirrorlab projects (*.json)"));
  if (path.isEmpty()) return false;
  if (isExample(path)) {
    showError(tr("Cannot save the project"), tr("%1 is one of the bundled examples, which stay as they are: choose a file "
                                                "outside %2.")
                                                 .arg(path, QFileInfo(path).absolutePath()));
    return false;
  }
  return saveProject(path);
}

bool MainWindow::maybeSave() {
  if (!doc_->isModified()) return true;
  const auto answer = QMessageBox::warning(this, tr("Unsaved changes"),
                                           tr("The project “%1” has unsaved changes. Save them?").arg(doc_->displayName()),
                                           QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel);
  if (answer == QMessageBox::Save) return save();
  return answer == QMessageBox::Discard;
}

void MainWindow::addRecent(const QString& path) {
  QSettings s;
  QStringList recent = s.value(QStringLiteral("recentProjects")).toStringList();
  recent.removeAll(path);
  recent.prepend(path);
  while (recent.size() > kMaxRecent) recent.removeLast();
  s.setValue(QStringLiteral("recentProjects"), recent);
  s.setValue(QStringLiteral("lastProject"), path);
  updateRecentMenu();
}

void MainWindow::updateRecentMenu() {
  recentMenu_->clear();
  const QStringList recent = QSettings().value(QStringLiteral("recentProjects")).toStringList();
  for (const QString& path : recent)
    recentMenu_
        ->addAction(QFileInfo(path).fileName(), this,
                    [this, path] {
                      if (maybeSave()) openProject(path);
                    })
        ->setToolTip(path);
  recentMenu_->setEnabled(!recent.isEmpty());
}

void MainWindow::updateTitle() {
  setWindowTitle(QStringLiteral("%1[*] — Mirrorlab").arg(doc_->displayName()));
  setWindowModified(doc_->isModified());
  const auto& p = doc_->project();
  projectInfo_->setText(
      tr("%1 · %2 · %3").arg(q(p.name), QLatin1String(ml::toString(p.data.kind)), q(p.distribute.devices.spec)));
}

void MainWindow::onRunEnded(const ml::RunFinished& f, std::optional<int64_t> runId) {
  const QString status = q(ml::toString(f.status));
  const QString took = f.seconds < 1 ? tr("%1 ms").arg(f.seconds * 1000, 0, 'f', 0) : tr("%1 s").arg(f.seconds, 0, 'f', 1);
  QString msg = tr("Run %1 after %2 steps (%3 of training)").arg(status).arg(f.steps).arg(took);
  if (runId) msg += tr(" — stored as run #%1").arg(*runId);
  statusBar()->showMessage(msg, 15000);
  setSteadyText(runState_, tr("Ready · last run %1").arg(status));
  if (f.status == ml::RunStatus::Failed || f.status == ml::RunStatus::Diverged)
    showError(f.status == ml::RunStatus::Diverged ? tr("Training diverged") : tr("Training failed"), q(f.message));
  if (currentPage() == RunsPage) runs_->refresh();
  if (closeWhenStopped_) close();
}

void MainWindow::closeEvent(QCloseEvent* e) {
  // Ask about unsaved changes first (once), then stop a running training cleanly: the run is
  // stored as cancelled and the window closes when the worker is done.
  if (!closeWhenStopped_ && !maybeSave()) {
    e->ignore();
    return;
  }
  if (session_->isActive() && !closeWhenStopped_) {
    const bool stop =
        confirmCloseWhileTraining
            ? confirmCloseWhileTraining()
            : QMessageBox::question(this, tr("Training is running"),
                                    tr("A run is in progress. Stop it (it is kept as cancelled) and close Mirrorlab?"),
                                    QMessageBox::Yes | QMessageBox::No, QMessageBox::No) == QMessageBox::Yes;
    if (!stop) {
      e->ignore();
      return;
    }
  }
  if (session_->isActive()) {
    closeWhenStopped_ = true;
    session_->stop();
    e->ignore();
    return;
  }
  if (!doc_->path().isEmpty()) QSettings().setValue(QStringLiteral("lastProject"), doc_->path());
  e->accept();
}

}  // namespace mlui
