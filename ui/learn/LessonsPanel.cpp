// The guided lessons: predict, run, reveal.
#include "learn/LessonsPanel.h"

#include <QButtonGroup>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QListWidget>
#include <QMouseEvent>
#include <QProgressBar>
#include <QPushButton>
#include <QRadioButton>
#include <QResizeEvent>
#include <QScrollArea>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>

#include <qcustomplot.h>

#include "Theme.h"
#include "charts/FrameBudget.h"
#include "learn/StepDiagram.h"

namespace mlui {

namespace {
QString q(const std::string& s) { return QString::fromStdString(s); }
QColor experimentColor(int i) {
  // Okabe-Ito (colour-blind safe): blue, vermillion, bluish green, reddish purple, orange.
  static const QColor c[] = {QColor(0x00, 0x72, 0xB2), QColor(0xD5, 0x5E, 0x00), QColor(0x00, 0x9E, 0x73),
                             QColor(0xCC, 0x79, 0xA7), QColor(0xE6, 0x9F, 0x00)};
  return c[i % 5];
}
// An answer's text: clicking it chooses the answer, as a radio button's own text would.
class ClickableLabel : public QLabel {
  Q_OBJECT
 public:
  using QLabel::QLabel;
 Q_SIGNALS:
  void clicked();

 protected:
  void mouseReleaseEvent(QMouseEvent* e) override {
    QLabel::mouseReleaseEvent(e);
    if (rect().contains(e->position().toPoint())) Q_EMIT clicked();
  }
};
}  // namespace

LessonsPanel::LessonsPanel(std::function<QString()> storePath, QWidget* parent)
    : QWidget(parent), storePath_(std::move(storePath)) {
  auto* h = new QHBoxLayout(this);
  h->setContentsMargins(0, 0, 0, 0);
  auto* split = new QSplitter(Qt::Horizontal, this);
  h->addWidget(split);
  list_ = new QListWidget(split);
  list_->setAccessibleName(tr("Lessons"));
  list_->setMinimumWidth(230);
  list_->setMaximumWidth(320);
  list_->setWordWrap(true);
  list_->setSpacing(2);
  split->addWidget(list_);

  auto* scroll = new QScrollArea(split);
  scroll_ = scroll;
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  auto* page = new QWidget(scroll);
  scroll->setWidget(page);
  split->addWidget(scroll);
  split->setStretchFactor(1, 1);
  auto* v = new QVBoxLayout(page);
  v->setContentsMargins(16, 10, 16, 12);
  v->setSpacing(8);
  title_ = pageTitle(QString(), page);
  title_->setWordWrap(true);
  idea_ = pageHint(QString(), page);
  setup_ = new QLabel(page);
  setup_->setWordWrap(true);
  setRole(setup_, "caption");
  v->addWidget(title_);
  v->addWidget(idea_);
  v->addWidget(setup_);
  v->addWidget(sectionTitle(tr("Predict first"), page));
  question_ = new QLabel(page);
  question_->setWordWrap(true);
  v->addWidget(question_);
  choicesBox_ = new QWidget(page);
  choicesLayout_ = new QVBoxLayout(choicesBox_);
  choicesLayout_->setContentsMargins(8, 0, 0, 0);
  choices_ = new QButtonGroup(this);
  v->addWidget(choicesBox_);
  auto* runRow = new QHBoxLayout;
  run_ = new QPushButton(icon(QStringLiteral("play")), tr("Commit to my answer and run"), page);
  run_->setToolTip(tr("Choose an answer first: the experiments run once you have committed to it"));
  stop_ = new QPushButton(icon(QStringLiteral("stop")), tr("Stop"), page);
  runRow->addWidget(run_);
  runRow->addWidget(stop_);
  runRow->addStretch(1);
  v->addLayout(runRow);
  runRow = new QHBoxLayout;  // status and progress on their own row: the page fits a 1024 px window
  status_ = new QLabel(page);
  status_->setWordWrap(true);
  runRow->addWidget(status_, 1);
  progress_ = new QProgressBar(page);
  progress_->setFixedWidth(180);
  progress_->setRange(0, 1);
  progress_->setValue(0);
  runRow->addWidget(progress_);
  v->addLayout(runRow);

  auto* live = new QHBoxLayout;
  liveRow_ = live;
  loss_ = new QCustomPlot(page);
  styleChart(loss_, tr("Training loss, every experiment"), tr("step"), tr("loss"));
  loss_->setMinimumSize(300, 230);
  loss_->legend->setVisible(false);  // shown once there are curves
  loss_->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
  live->addWidget(loss_, 2);
  diagram_ = new StepDiagram(page);
  diagram_->setMinimumSize(440, 330);
  diagram_->setPlaceholder(
      tr("While the experiments run, the latest step appears here: the global batch cut into one "
         "shard per replica, and each replica's forward, backward, all-reduce and update, to scale."));
  live->addWidget(diagram_, 3);
  v->addLayout(live, 1);

  verdict_ = new QLabel(page);
  verdict_->setWordWrap(true);
  verdict_->setVisible(false);
  v->addWidget(verdict_);
  reveal_ = new QLabel(page);
  reveal_->setWordWrap(true);
  reveal_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  reveal_->setVisible(false);
  setRole(reveal_, "bannerInfo");
  v->addWidget(reveal_);
  figures_ = new QTableWidget(0, 7, page);
  figures_->setHorizontalHeaderLabels(
      {tr("experiment"), tr("status"), tr("steps"), tr("final accuracy"), tr("samples/s"), tr("sync share"), tr("stored run")});
  figures_->verticalHeader()->setVisible(false);
  figures_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  figures_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  figures_->setMinimumHeight(110);
  figures_->setVisible(false);
  v->addWidget(figures_);

  timer_.setInterval(40);
  connect(&timer_, &QTimer::timeout, this, &LessonsPanel::poll);
  connect(list_, &QListWidget::currentRowChanged, this, [this](int row) {
    if (running_ || row == current_) return;
    current_ = row;
    showLesson();
  });
  connect(choices_, &QButtonGroup::idClicked, this, [this](int id) {
    choice_ = id;
    updateButtons();
  });
  connect(run_, &QPushButton::clicked, this, [this] { commitAndRun(); });
  connect(stop_, &QPushButton::clicked, this, &LessonsPanel::stop);
  updateButtons();
}

LessonsPanel::~LessonsPanel() {
  if (runner_) runner_->requestCancel();
  if (worker_.joinable()) worker_.join();
}

bool LessonsPanel::loadLessons(const QString& dir) {
  loadError_.clear();
  lessons_.clear();
  try {
    lessons_ = ml::loadLessons(dir.isEmpty() ? ml::defaultLessonsDir() : dir.toStdString());
  } catch (const std::exception& e) {
    loadError_ = q(e.what());
  }
  {
    QSignalBlocker block(list_);
    list_->clear();
    for (size_t i = 0; i < lessons_.size(); ++i) list_->addItem(QStringLiteral("%1. %2").arg(i + 1).arg(q(lessons_[i].title)));
  }
  current_ = -1;
  if (!lessons_.empty()) {
    selectLesson(0);
  } else {
    title_->setText(tr("No lessons"));
    idea_->setText(loadError_.isEmpty()
                       ? tr("No lesson files were found in %1.").arg(dir.isEmpty() ? q(ml::defaultLessonsDir()) : dir)
                       : tr("The lessons could not be loaded: %1\nFix the file (the message names the field) "
                            "and reopen the Learn screen.")
                             .arg(loadError_));
  }
  if (!loadError_.isEmpty()) Q_EMIT errorOccurred(tr("Cannot load the lessons"), loadError_);
  return loadError_.isEmpty();
}

void LessonsPanel::resizeEvent(QResizeEvent* e) {
  QWidget::resizeEvent(e);
  if (liveRow_ && scroll_) liveRow_->setDirection(scroll_->width() < 950 ? QBoxLayout::TopToBottom : QBoxLayout::LeftToRight);
}

void LessonsPanel::selectLesson(int index) {
  if (running_ || index < 0 || index >= static_cast<int>(lessons_.size())) return;
  current_ = index;
  QSignalBlocker block(list_);
  list_->setCurrentRow(index);
  showLesson();
}

void LessonsPanel::showLesson() {
  const ml::Lesson& l = lessons_[static_cast<size_t>(current_)];
  title_->setText(tr("Lesson %1: %2").arg(current_ + 1).arg(q(l.title)));
  idea_->setText(q(l.idea));
  QStringList exps;
  for (const auto& e : l.experiments) {
    QString s = q(e.title) + QStringLiteral(" (") + q(e.devices.spec);
    if (e.batch > 0) s += tr(", %1 batch %2").arg(e.batchPolicy == "global" ? tr("global") : tr("per-device")).arg(e.batch);
    if (e.steps > 0) s += tr(", %1 steps").arg(e.steps);
    exps << s + QLatin1Char(')');
  }
  setup_->setText(tr("Project: %1 · experiments: %2").arg(q(l.project.name), exps.join(QStringLiteral("; "))));
  question_->setText(q(l.question.text));
  for (auto* b : choices_->buttons()) choices_->removeButton(b);
  while (QLayoutItem* item = choicesLayout_->takeAt(0)) {
    delete item->widget();
    delete item;
  }
  // A radio button beside a word-wrapped label: a radio button's own text never wraps, and a long
  // answer (lesson 9's) made the page scroll sideways with its end cut.
  for (size_t i = 0; i < l.question.choices.size(); ++i) {
    auto* row = new QWidget(choicesBox_);
    auto* h = new QHBoxLayout(row);
    h->setContentsMargins(0, 0, 0, 0);
    auto* b = new QRadioButton(row);
    b->setAccessibleName(q(l.question.choices[i]));
    auto* text = new ClickableLabel(q(l.question.choices[i]), row);
    text->setObjectName(QStringLiteral("AnswerText"));
    text->setWordWrap(true);
    connect(text, &ClickableLabel::clicked, b, &QRadioButton::click);
    h->addWidget(b, 0, Qt::AlignTop);
    h->addWidget(text, 1);
    choices_->addButton(b, static_cast<int>(i));
    choicesLayout_->addWidget(row);
  }
  choice_ = -1;
  status_->setText(tr("Choose an answer, then run the experiment to find out."));
  progress_->setRange(0, static_cast<int>(l.experiments.size()));
  progress_->setValue(0);
  loss_->clearGraphs();
  loss_->legend->setVisible(false);
  // An empty chart for a new lesson: the last lesson's step and loss ranges would say it had data.
  loss_->xAxis->setRange(0, 1);
  loss_->yAxis->setRange(0, 1);
  loss_->replot();
  diagram_->clear();
  verdict_->setVisible(false);
  reveal_->setVisible(false);
  figures_->setVisible(false);
  outcome_.reset();
  updateButtons();
}

void LessonsPanel::chooseAnswer(int choice) {
  if (auto* b = choices_->button(choice)) {
    b->setChecked(true);
    choice_ = choice;
    updateButtons();
  }
}

void LessonsPanel::setOtherRunActive(bool active) {
  otherActive_ = active;
  updateButtons();
}

void LessonsPanel::updateButtons() {
  const bool ready = current_ >= 0 && choice_ >= 0 && !running_ && !otherActive_;
  run_->setEnabled(ready);
  stop_->setEnabled(running_);
  list_->setEnabled(!running_);
  choicesBox_->setEnabled(!running_);
  if (otherActive_ && !running_)
    run_->setToolTip(tr("Another run is using the cores: wait for it to end"));
  else
    run_->setToolTip(tr("Choose an answer first: the experiments run once you have committed to it"));
}

bool LessonsPanel::commitAndRun() {
  if (running_ || current_ < 0 || choice_ < 0 || otherActive_) return false;
  if (worker_.joinable()) worker_.join();
  const ml::Lesson& l = lessons_[static_cast<size_t>(current_)];
  ml::LessonRunnerOptions o;
  o.storePath = storePath_().toStdString();
  o.maxSteps = maxSteps_;
  runner_ = std::make_unique<ml::LessonRunner>(l, o);
  channel_ = runner_->hub().subscribe(size_t{1} << 16);
  experimentIndex_ = -1;
  loss_->clearGraphs();
  diagram_->clear();
  verdict_->setVisible(false);
  reveal_->setVisible(false);
  figures_->setVisible(false);
  outcome_.reset();
  running_ = true;
  progress_->setValue(0);
  status_->setText(
      tr("Your answer: \u201c%1\u201d. Loading the data set…").arg(q(l.question.choices[static_cast<size_t>(choice_)])));
  updateButtons();
  Q_EMIT runningChanged(true);
  ml::LessonRunner* runner = runner_.get();
  worker_ = std::thread([this, runner] {
    std::optional<ml::LessonOutcome> out;
    QString error;
    try {
      out = runner->run();
    } catch (const std::exception& e) {
      error = q(e.what());
      runner->hub().closeAll();
    }
    QMetaObject::invokeMethod(
        this, [this, out, error] { onDone(out, error); }, Qt::QueuedConnection);
  });
  timer_.setInterval(FrameBudget::floorIntervalMs());  // the experiments measure speed: draw at the floor rate
  timer_.start();
  return true;
}

void LessonsPanel::stop() {
  if (!running_ || !runner_) return;
  runner_->requestCancel();
  status_->setText(tr("Stopping after the current step…"));
}

void LessonsPanel::poll() {
  if (!channel_) return;
  batch_.clear();
  if (channel_->drain(batch_) == 0) return;
  const ml::Lesson& l = lessons_[static_cast<size_t>(current_)];
  const ml::StepEvent* lastStep = nullptr;
  for (const auto& e : batch_) {
    if (const auto* s = std::get_if<ml::RunStarted>(&e)) {
      ++experimentIndex_;
      auto* g = loss_->addGraph();
      const size_t i = static_cast<size_t>(experimentIndex_);
      g->setName(i < l.experiments.size() ? q(l.experiments[i].title) : q(s->runName));
      g->setPen(QPen(experimentColor(experimentIndex_), 1.8));
      loss_->legend->setVisible(true);
      status_->setText(tr("Running %1 of %2: %3. %4")
                           .arg(experimentIndex_ + 1)
                           .arg(l.experiments.size())
                           .arg(g->name(), tr(FrameBudget::floorNote())));
      progress_->setValue(experimentIndex_);
      liveInfo_ = sceneInfoFromConfig(s->configJson);  // once per experiment, not per frame
    } else if (const auto* st = std::get_if<ml::StepEvent>(&e)) {
      if (experimentIndex_ >= 0 && experimentIndex_ < loss_->graphCount())
        loss_->graph(experimentIndex_)->addData(static_cast<double>(st->step), st->loss);
      if (!st->replicas.empty()) lastStep = st;
    }
  }
  if (lastStep) lastStep_ = *lastStep;
  if (!isVisible() || window()->isMinimized()) return;  // nobody sees it: only the data accumulates
  if (lastStep_) {
    diagram_->setStep(*lastStep_, liveInfo_);
    diagram_->setProgress(diagram_->duration());
    lastStep_.reset();
  }
  loss_->rescaleAxes();
  loss_->yAxis->setRangeLower(0);
  loss_->replot(QCustomPlot::rpQueuedReplot);
}

void LessonsPanel::onDone(std::optional<ml::LessonOutcome> out, const QString& error) {
  poll();
  timer_.stop();
  if (worker_.joinable()) worker_.join();
  channel_.reset();
  running_ = false;
  updateButtons();
  Q_EMIT runningChanged(false);
  const ml::Lesson& l = lessons_[static_cast<size_t>(current_)];
  if (!out) {
    status_->setText(tr("Could not run: %1").arg(error));
    Q_EMIT errorOccurred(tr("Cannot run the lesson"), error);
    Q_EMIT lessonFinished(false);
    return;
  }
  outcome_ = *out;
  progress_->setValue(static_cast<int>(out->experiments.size()));
  const bool right = choice_ == l.question.correct;
  verdict_->setText(right ? tr("<b>Your prediction was right.</b> %1").arg(q(l.question.explanation).toHtmlEscaped())
                          : tr("<b>Not quite:</b> the answer is \u201c%1\u201d. %2")
                                .arg(q(l.question.choices[static_cast<size_t>(l.question.correct)]).toHtmlEscaped(),
                                     q(l.question.explanation).toHtmlEscaped()));
  setRole(verdict_, right ? "syncOk" : "syncBad");
  verdict_->setVisible(true);
  if (out->completed) {
    status_->setText(
        tr("Done: %1 experiment(s), each stored as a run (see Runs). The measured result:").arg(out->experiments.size()));
    reveal_->setText(q(out->reveal));
  } else {
    status_->setText(tr("Stopped: %1").arg(q(out->message)));
    reveal_->setText(tr("Measured so far (the lesson did not finish, so some figures are missing): %1").arg(q(out->reveal)));
  }
  reveal_->setVisible(true);
  figures_->setRowCount(static_cast<int>(out->experiments.size()));
  for (int i = 0; i < static_cast<int>(out->experiments.size()); ++i) {
    const auto& e = out->experiments[static_cast<size_t>(i)];
    auto fig = [&](const std::string& name) {
      const auto it = out->figures.find(name + "_" + e.experiment.label);
      return it == out->figures.end() ? QStringLiteral("-") : q(it->second.text);
    };
    const QStringList cells = {q(e.experiment.title),
                               q(ml::toString(e.finished.status)),
                               QString::number(e.finished.steps),
                               fig("final_acc"),
                               fig("samples_per_sec"),
                               fig("sync_share"),
                               e.runId ? tr("run %1").arg(*e.runId) : tr("not stored")};
    for (int c = 0; c < cells.size(); ++c) figures_->setItem(i, c, new QTableWidgetItem(cells[c]));
  }
  figures_->setVisible(true);
  Q_EMIT lessonFinished(out->completed);
}

QString LessonsPanel::revealText() const { return reveal_->isVisible() ? reveal_->text() : QString(); }
QString LessonsPanel::verdictText() const { return verdict_->isVisible() ? verdict_->text() : QString(); }

}  // namespace mlui

#include "LessonsPanel.moc"
