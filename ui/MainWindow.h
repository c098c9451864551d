// The studio window: navigation on the left (Model, Data, Devices, Training, Dashboard, Runs, Learn),
// the File / Edit / Run / View menus, recent files, the unsaved-changes prompt and a status bar
// with the run state. Owns the document, the data cache and the training session.
#pragma once
#include <functional>
#include <memory>

#include <QElapsedTimer>
#include <QMainWindow>

#include "telemetry/Events.h"

class QLabel;
class QListWidget;
class QMenu;
class QProgressBar;
class QStackedWidget;

namespace mlui {

class DataCache;
class DashboardView;
class DataView;
class DevicesView;
class LearnView;
class ModelBuilderView;
class ProjectDocument;
class RunsView;
class SweepsView;
class TrainingSession;
class TrainingSettingsView;
class WelcomePage;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  enum Page { ModelPage, DataPage, DevicesPage, TrainingPage, DashboardPage, RunsPage, LearnPage, SweepsPage };

  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  // Opens the last project (QSettings), else projects/fashion-mlp.json, else a new project.
  void openInitialProject();
  // Shows the error in a dialog (and the status bar) and returns false when it cannot be opened.
  bool openProject(const QString& path);
  bool saveProject(const QString& path);
  void showPage(Page page);
  // The welcome page (not a screen of the navigation): opened on the first run and by Help > Welcome.
  void showWelcome();
  WelcomePage* welcomePage() const { return welcome_; }
  bool isWelcomeShown() const;
  Page currentPage() const;

  ProjectDocument* document() const { return doc_; }
  TrainingSession* session() const { return session_; }
  ModelBuilderView* modelBuilder() const { return model_; }
  DashboardView* dashboard() const { return dashboard_; }
  RunsView* runsView() const { return runs_; }
  LearnView* learnView() const { return learn_; }
  SweepsView* sweepsView() const { return sweeps_; }
  // Shows the Runs screen with run id selected (its curves in the overlay).
  void showRun(int64_t runId);
  DataView* dataView() const { return data_; }
  DevicesView* devicesView() const { return devices_; }
  TrainingSettingsView* trainingView() const { return training_; }
  // The run store: $MIRRORLAB_DB, else the user's data folder.
  static QString storePath();
  // fashion-mlp.json in the shipped examples (ml::findSharedData: build tree, install prefix, XDG
  // data folders), even when that file is missing; empty when no examples folder exists at all.
  static QString findDefaultProject();
  // The bundled examples (projects/ next to the program) are read-only: Save asks for a copy.
  static bool isExample(const QString& path);
  // Where Save As proposes to save: a file named after the project, next to the project file or,
  // for a new project or an example, in the user's documents folder.
  QString proposedSavePath() const;
  // Asks for a file name (a save dialog); tests replace it to answer without a dialog.
  std::function<QString(const QString& title, const QString& suggested)> askSavePath;
  // Asks whether to stop a run in progress and close; tests replace it.
  std::function<bool()> confirmCloseWhileTraining;
  bool save();
  bool saveAs();
  // A dialog that does not block (tests read its text); also written to the status bar.
  void showError(const QString& title, const QString& message);

 protected:
  void closeEvent(QCloseEvent* e) override;

 private:
  void buildMenus();
  void buildFaultMenu(QMenu* menu);
  void buildStatusBar();
  void updateTitle();
  void updateRecentMenu();
  void addRecent(const QString& path);
  bool maybeSave();
  void newProject();
  void open();
  void importCsv();
  void onRunEnded(const ml::RunFinished& f, std::optional<int64_t> runId);

  ProjectDocument* doc_;
  std::shared_ptr<DataCache> cache_;
  TrainingSession* session_;
  QListWidget* nav_;
  QStackedWidget* pages_;
  ModelBuilderView* model_;
  DataView* data_;
  DevicesView* devices_;
  TrainingSettingsView* training_;
  DashboardView* dashboard_;
  RunsView* runs_;
  LearnView* learn_;
  SweepsView* sweeps_;
  WelcomePage* welcome_;
  QMenu* recentMenu_;
  QLabel* runState_;
  QElapsedTimer stepShown_;  // since the status bar last named a step
  QLabel* projectInfo_;
  QProgressBar* busy_;
  bool closeWhenStopped_ = false;
};

}  // namespace mlui
