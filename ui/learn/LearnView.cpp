// The Learn screen: five panels over the same project, store and training session.
#include "learn/LearnView.h"

#include <QLabel>
#include <QTabWidget>
#include <QVBoxLayout>

#include "ProjectDocument.h"
#include "Theme.h"
#include "TrainingSession.h"
#include "learn/CodePanel.h"
#include "learn/LessonsPanel.h"
#include "learn/ScalingPanel.h"
#include "learn/StepReplayPanel.h"
#include "learn/SyncCostPanel.h"

namespace mlui {

LearnView::LearnView(ProjectDocument* doc, TrainingSession* session, std::shared_ptr<DataCache> cache,
                     std::function<QString()> storePath, QWidget* parent)
    : QWidget(parent), doc_(doc), session_(session) {
  auto* v = new QVBoxLayout(this);
  v->setContentsMargins(0, 8, 0, 0);
  auto* head = new QVBoxLayout;
  head->setContentsMargins(16, 4, 16, 0);
  head->addWidget(pageTitle(tr("Learn mirrored training"), this));
  v->addLayout(head);
  tabs_ = new QTabWidget(this);
  tabs_->setDocumentMode(true);
  lessons_ = new LessonsPanel(storePath, tabs_);
  replay_ = new StepReplayPanel(storePath, tabs_);
  scaling_ = new ScalingPanel([doc] { return doc->project(); }, std::move(cache), storePath, tabs_);
  sync_ = new SyncCostPanel(storePath, tabs_);
  code_ = new CodePanel(tabs_);
  tabs_->addTab(lessons_, tr("Lessons"));
  tabs_->addTab(replay_, tr("The mirrored step"));
  tabs_->addTab(scaling_, tr("Scaling experiment"));
  tabs_->addTab(sync_, tr("Sync cost and what-if"));
  tabs_->addTab(code_, tr("Equivalent code"));
  v->addWidget(tabs_, 1);

  connect(tabs_, &QTabWidget::currentChanged, this, &LearnView::onTabChanged);
  connect(doc_, &ProjectDocument::changed, this, [this] {
    if (tabs_->currentWidget() == code_) code_->setProject(doc_->project());
  });
  connect(session_, &TrainingSession::eventsArrived, this, [this](const std::vector<ml::Event>& events) {
    for (const auto& e : events)
      if (const auto* s = std::get_if<ml::RunStarted>(&e)) replay_->onLiveRunStarted(*s);
    replay_->onLiveEvents(events);
  });
  connect(session_, &TrainingSession::stateChanged, this, &LearnView::updateExclusion);
  connect(session_, &TrainingSession::runEnded, this, [this] {
    replayListed_ = syncListed_ = false;  // a new stored run to list
  });
  connect(lessons_, &LessonsPanel::runningChanged, this, &LearnView::updateExclusion);
  connect(scaling_, &ScalingPanel::runningChanged, this, &LearnView::updateExclusion);
  connect(lessons_, &LessonsPanel::lessonFinished, this, [this] {
    replayListed_ = syncListed_ = false;
    Q_EMIT runsChanged();
  });
  connect(scaling_, &ScalingPanel::finished, this, [this] {
    replayListed_ = syncListed_ = false;
    Q_EMIT runsChanged();
  });
  for (auto* w : std::initializer_list<QObject*>{lessons_, replay_, scaling_, sync_, code_}) {
    if (auto* p = qobject_cast<LessonsPanel*>(w)) connect(p, &LessonsPanel::errorOccurred, this, &LearnView::errorOccurred);
    if (auto* p = qobject_cast<StepReplayPanel*>(w)) connect(p, &StepReplayPanel::errorOccurred, this, &LearnView::errorOccurred);
    if (auto* p = qobject_cast<ScalingPanel*>(w)) connect(p, &ScalingPanel::errorOccurred, this, &LearnView::errorOccurred);
    if (auto* p = qobject_cast<SyncCostPanel*>(w)) connect(p, &SyncCostPanel::errorOccurred, this, &LearnView::errorOccurred);
    if (auto* p = qobject_cast<CodePanel*>(w)) connect(p, &CodePanel::errorOccurred, this, &LearnView::errorOccurred);
  }
  onTabChanged(0);
}

void LearnView::showTab(Tab t) {
  tabs_->setCurrentIndex(static_cast<int>(t));
  onTabChanged(static_cast<int>(t));
}
LearnView::Tab LearnView::currentTab() const { return static_cast<Tab>(tabs_->currentIndex()); }
bool LearnView::isBusy() const { return lessons_->isRunning() || scaling_->isRunning(); }

void LearnView::onTabChanged(int index) {
  // Panels load what they show when first opened (the lessons read files, the others the store).
  switch (static_cast<Tab>(index)) {
    case LessonsTab:
      if (!lessonsLoaded_) {
        lessonsLoaded_ = true;
        lessons_->loadLessons();
      }
      break;
    case StepTab:
      if (!replayListed_) {
        if (!replayVisited_) replay_->setAutoPlay(true);  // the first visit shows the step moving
        replayListed_ = replayVisited_ = true;
        replay_->refreshRuns();
      }
      break;
    case SyncTab:
      if (!syncListed_) {
        syncListed_ = true;
        sync_->refreshRuns();
      }
      break;
    case CodeTab: code_->setProject(doc_->project()); break;
    case ScalingTab: break;
  }
}

void LearnView::updateExclusion() {
  const bool training = session_->isActive();
  lessons_->setOtherRunActive(training || scaling_->isRunning());
  scaling_->setOtherRunActive(training || lessons_->isRunning());
  Q_EMIT busyChanged(isBusy());
}

}  // namespace mlui
