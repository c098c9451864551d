// The user guide (the README and docs/, linked as in the source tree) and the keyboard shortcuts.
#include "HelpDialogs.h"

#include <QDialog>
#include <QDialogButtonBox>
#include <QFile>
#include <QHBoxLayout>
#include <QMenu>
#include <QMenuBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QTextBrowser>
#include <QVBoxLayout>

namespace mlui {

namespace {

const QUrl kGuideHome(QStringLiteral("qrc:/guide/README.md"));

// The guide's pages sit under :/guide as they do in the source tree, so the README's links
// (docs/CLI.md, bench/RESULTS.md) and the docs' own links resolve as they do on disk.
QString guidePage(const QUrl& url) {
  const QString path = QLatin1Char(':') + url.path();
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly))
    return QObject::tr(
               "# Not in this guide\n\n`%1` is a file of Mirrorlab's source tree; the studio carries only "
               "the README, docs/ and bench/RESULTS.md. Read it in the source tree, or go **Back**.")
        .arg(url.path().mid(QStringLiteral("/guide/").size()));
  QString md = QString::fromUtf8(f.readAll());
  // Images point into the source tree, which an installed studio does not have: leave them out.
  static const QRegularExpression image(QStringLiteral("!\\[[^\\]]*\\]\\([^)]*\\)\\n?"));
  md.remove(image);
  return md;
}

// Follows the guide's relative links inside the resources; web links open in the browser.
class GuideBrowser : public QTextBrowser {
 public:
  using QTextBrowser::QTextBrowser;

 protected:
  QVariant loadResource(int type, const QUrl& url) override {
    if (url.scheme() == QLatin1String("qrc") && url.path().startsWith(QLatin1String("/guide/")) &&
        (type == QTextDocument::MarkdownResource || type == QTextDocument::HtmlResource ||
         url.path().endsWith(QLatin1String(".md")) || !QFile::exists(QLatin1Char(':') + url.path())))
      return guidePage(url);
    return QTextBrowser::loadResource(type, url);
  }
};

QDialog* makeDialog(QWidget* parent, const QString& title, const char* name) {
  auto* d = new QDialog(parent);
  d->setObjectName(QString::fromLatin1(name));
  d->setWindowTitle(title);
  d->setAttribute(Qt::WA_DeleteOnClose);
  d->resize(820, 640);
  return d;
}

void addCloseButton(QDialog* d, QVBoxLayout* v) {
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, d);
  QObject::connect(buttons, &QDialogButtonBox::rejected, d, &QDialog::close);
  v->addWidget(buttons);
}

}  // namespace

QString userGuideMarkdown() { return guidePage(kGuideHome); }

static void showText(QWidget* parent, const QString& title, const QString& markdown, const char* name) {
  auto* d = makeDialog(parent, title, name);
  auto* v = new QVBoxLayout(d);
  auto* text = new QTextBrowser(d);
  text->setOpenExternalLinks(true);
  text->setMarkdown(markdown);
  v->addWidget(text, 1);
  addCloseButton(d, v);
  d->show();
}

void showUserGuide(QWidget* parent) {
  auto* d = makeDialog(parent, QObject::tr("Mirrorlab user guide"), "UserGuide");
  auto* v = new QVBoxLayout(d);
  auto* bar = new QHBoxLayout;
  auto* back = new QPushButton(QObject::tr("Back"), d);
  back->setObjectName(QStringLiteral("guideBack"));
  back->setEnabled(false);
  auto* home = new QPushButton(QObject::tr("Contents"), d);
  home->setObjectName(QStringLiteral("guideHome"));
  bar->addWidget(back);
  bar->addWidget(home);
  bar->addStretch(1);
  v->addLayout(bar);
  auto* text = new GuideBrowser(d);
  text->setObjectName(QStringLiteral("guideText"));
  text->setOpenExternalLinks(true);
  text->setSource(kGuideHome, QTextDocument::MarkdownResource);
  QObject::connect(back, &QPushButton::clicked, text, &QTextBrowser::backward);
  QObject::connect(home, &QPushButton::clicked, text, &QTextBrowser::home);
  QObject::connect(text, &QTextBrowser::backwardAvailable, back, &QPushButton::setEnabled);
  QObject::connect(text, &QTextBrowser::sourceChanged, d, [d](const QUrl& url) {
    const QString page = url.path().mid(QStringLiteral("/guide/").size());
    d->setWindowTitle(page == QLatin1String("README.md") ? QObject::tr("Mirrorlab user guide")
                                                         : QObject::tr("Mirrorlab user guide — %1").arg(page));
  });
  v->addWidget(text, 1);
  addCloseButton(d, v);
  d->show();
}

static void collect(const QMenu* menu, const QString& path, QStringList& rows) {
  for (QAction* a : menu->actions()) {
    if (a->menu())
      collect(a->menu(), path + QStringLiteral(" › ") + a->menu()->title().remove(QLatin1Char('&')), rows);
    else if (!a->shortcut().isEmpty())
      rows << QStringLiteral("| %1 › %2 | %3 |")
                  .arg(path, a->text().remove(QLatin1Char('&')),
                       a->shortcuts().size() > 1 ? QKeySequence::listToString(a->shortcuts(), QKeySequence::NativeText)
                                                       .replace(QStringLiteral("; "), QStringLiteral(" or "))
                                                 : a->shortcut().toString(QKeySequence::NativeText));
  }
}

QString shortcutsText(const QMenuBar* bar) {
  QStringList rows{QStringLiteral("| Action | Keys |"), QStringLiteral("|---|---|")};
  for (QAction* a : bar->actions())
    if (a->menu()) collect(a->menu(), a->menu()->title().remove(QLatin1Char('&')), rows);
  return rows.join(QLatin1Char('\n'));
}

void showShortcuts(QWidget* parent, const QMenuBar* bar) {
  showText(parent, QObject::tr("Keyboard shortcuts"), QStringLiteral("## Keyboard shortcuts\n\n") + shortcutsText(bar),
           "Shortcuts");
}

}  // namespace mlui
