// The welcome page: three cards (examples, the first lesson, a CSV import) under a one-line idea.
#include "welcome/WelcomePage.h"

#include <algorithm>

#include <QDebug>
#include <QFrame>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QVBoxLayout>

#include "Theme.h"
#include "learn/Lesson.h"
#include "project/SharedData.h"

namespace mlui {

static QString q(const std::string& s) { return QString::fromStdString(s); }

// A card: an icon and a title, a sentence, then the card's own content.
static QVBoxLayout* card(QHBoxLayout* row, const QString& iconName, const QString& title, const QString& text) {
  auto* f = new QFrame;
  setRole(f, "card");
  // Three cards fit beside each other in a 1024 px window: the examples card takes the width of
  // its longest name (refresh()), the other two give it room.
  f->setMinimumWidth(180);
  auto* v = new QVBoxLayout(f);
  v->setContentsMargins(22, 20, 22, 20);
  v->setSpacing(10);
  auto* head = new QHBoxLayout;
  auto* ic = new QLabel;
  ic->setPixmap(icon(iconName).pixmap(28, 28));
  head->addWidget(ic);
  head->addWidget(sectionTitle(title), 1);
  v->addLayout(head);
  auto* t = new QLabel(text);
  t->setWordWrap(true);
  setRole(t, "pageHint");
  t->ensurePolished();  // the role's font, before measuring
  // Room for every line at the card's narrowest: a layout sizes a wrapped label by its one-line
  // hint and would cut the last line when the card is narrower than that hint assumed.
  t->setMinimumHeight(t->heightForWidth(f->minimumWidth() - 44));
  v->addWidget(t);
  row->addWidget(f, 1);
  return v;
}

// Wrapped text centred at up to its maximum width: a centring alignment would give a wrapped label
// its narrowest width, a fixed width would not fit a narrow window.
static QHBoxLayout* centred(QWidget* w) {
  auto* h = new QHBoxLayout;
  h->addStretch(1);
  h->addWidget(w, 1000);
  h->addStretch(1);
  return h;
}

WelcomePage::WelcomePage(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("WelcomePage"));
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(32, 32, 32, 24);
  outer->addStretch(1);
  auto* logo = new QLabel(this);
  logo->setPixmap(icon(QStringLiteral("mirrorlab")).pixmap(72, 72));
  logo->setAlignment(Qt::AlignCenter);
  outer->addWidget(logo);
  auto* title = new QLabel(tr("Welcome to Mirrorlab"), this);
  title->setAlignment(Qt::AlignCenter);
  title->setStyleSheet(QStringLiteral("font-size: 22pt; font-weight: 600; color: #1f2d3d;"));
  outer->addWidget(title);
  auto* idea = new QLabel(tr("Mirrored training: every device holds the same copy of the model, each batch is split across the "
                             "devices, and their gradients are averaged so that the copies stay identical."),
                          this);
  idea->setObjectName(QStringLiteral("WelcomeIdea"));
  idea->setWordWrap(true);
  idea->setAlignment(Qt::AlignCenter);
  idea->setMaximumWidth(780);
  idea->setStyleSheet(QStringLiteral("font-size: 11.5pt; color: #44546a;"));
  outer->addLayout(centred(idea));
  outer->addSpacing(24);

  auto* row = new QHBoxLayout;
  row->setSpacing(20);
  examples_ = card(row, QStringLiteral("open"), tr("Open an example"),
                   tr("A ready project: a model, its data and its devices. Spirals trains in seconds."));
  QVBoxLayout* lesson = card(row, QStringLiteral("learn"), tr("Start the first lesson"),
                             tr("Predict what happens on several devices, run it for real, and see the measured answer."));
  lessonTitle_ = new QLabel(this);
  lessonTitle_->setWordWrap(true);
  lesson->addWidget(lessonTitle_);
  lesson->addStretch(1);
  auto* start = new QPushButton(icon(QStringLiteral("play")), tr("Start the lesson"), this);
  start->setObjectName(QStringLiteral("WelcomeLesson"));
  lesson->addWidget(start);
  QVBoxLayout* csv = card(row, QStringLiteral("data"), tr("Import a CSV file"),
                          tr("Your own table: one row per sample, numeric columns, and a label column to predict."));
  csv->addStretch(1);
  auto* import = new QPushButton(icon(QStringLiteral("add")), tr("Choose a CSV file…"), this);
  import->setObjectName(QStringLiteral("WelcomeCsv"));
  csv->addWidget(import);
  auto* rowHolder = new QWidget(this);
  rowHolder->setLayout(row);
  rowHolder->setMaximumWidth(1100);
  outer->addWidget(rowHolder, 0, Qt::AlignHCenter);

  problemsLabel_ = new QLabel(this);
  problemsLabel_->setObjectName(QStringLiteral("WelcomeProblems"));
  problemsLabel_->setWordWrap(true);
  problemsLabel_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  problemsLabel_->setMaximumWidth(940);
  setRole(problemsLabel_, "warning");
  outer->addLayout(centred(problemsLabel_));
  outer->addStretch(2);
  auto* hint = new QLabel(tr("This page is always under Help > Welcome. The screens on the left are the whole studio."), this);
  setRole(hint, "caption");
  hint->setAlignment(Qt::AlignCenter);
  outer->addWidget(hint);

  connect(start, &QPushButton::clicked, this, &WelcomePage::firstLessonRequested);
  connect(import, &QPushButton::clicked, this, &WelcomePage::importCsvRequested);
  refresh();
}

void WelcomePage::refresh() {
  while (examples_->count() > 2) {  // keep the card's head and sentence
    QLayoutItem* item = examples_->takeAt(2);
    delete item->widget();
    delete item;
  }
  QStringList problems;
  const ml::SharedDataDir dir = ml::findSharedData();
  const auto list = ml::listExampleProjects(dir.projectsDir);
  int widest = 0;
  for (const auto& e : list) {
    if (!e.error.empty()) {
      problems << tr("Example %1 cannot be read: %2").arg(q(e.path), q(e.error));
      continue;
    }
    auto* b = new QPushButton(q(e.name), this);
    b->setObjectName(QStringLiteral("WelcomeExample"));
    b->setToolTip(q(e.path));
    b->setStyleSheet(QStringLiteral("text-align: left; padding: 6px 10px;"));
    b->setMinimumWidth(b->sizeHint().width());  // the whole name: the card widens instead of cutting it
    widest = std::max(widest, b->minimumWidth());
    connect(b, &QPushButton::clicked, this, [this, path = q(e.path)] { Q_EMIT openExampleRequested(path); });
    examples_->addWidget(b);
  }
  if (list.empty())
    problems << tr("No example projects were found. Searched:\n%1").arg(q(ml::describeSharedDataSearch()).trimmed());
  examples_->addStretch(1);
  const QMargins m = examples_->contentsMargins();
  examples_->parentWidget()->setMinimumWidth(std::max(180, widest + m.left() + m.right() + 4));  // + the card's border
  try {
    const auto lessons = ml::loadLessons(ml::defaultLessonsDir());
    lessonTitle_->setText(lessons.empty() ? tr("No lessons found.")
                                          : tr("<b>1. %1</b>").arg(q(lessons.front().title).toHtmlEscaped()));
  } catch (const std::exception& e) {
    lessonTitle_->setText(tr("The lessons cannot be loaded."));
    problems << tr("Lessons: %1").arg(q(e.what()));
  }
  problems_ = problems.join(QLatin1Char('\n'));
  if (!problems_.isEmpty()) qWarning().noquote() << problems_;  // also on stderr, for logs and scripts
  problemsLabel_->setText(problems_);
  problemsLabel_->setVisible(!problems_.isEmpty());
}

}  // namespace mlui
