// The user guide and the keyboard shortcuts, in dialogs.
#include "HelpDialogs.h"

#include <QDialog>
#include <QDialogButtonBox>
#include <QFile>
#include <QMenu>
#include <QMenuBar>
#include <QRegularExpression>
#include <QTextBrowser>
#include <QVBoxLayout>

namespace mlui {

QString userGuideMarkdown() {
  QFile f(QStringLiteral(":/README.md"));
  if (!f.open(QIODevice::ReadOnly)) return QStringLiteral("# Mirrorlab\n\nThe user guide is missing from this build.");
  QString md = QString::fromUtf8(f.readAll());
  // Images point into the source tree, which an installed studio does not have: leave them out.
  static const QRegularExpression image(QStringLiteral("!\\[[^\\]]*\\]\\([^)]*\\)\\n?"));
  md.remove(image);
  return md;
}

static void showText(QWidget* parent, const QString& title, const QString& markdown, const char* name) {
  auto* d = new QDialog(parent);
  d->setObjectName(QString::fromLatin1(name));
  d->setWindowTitle(title);
  d->setAttribute(Qt::WA_DeleteOnClose);
  auto* v = new QVBoxLayout(d);
  auto* text = new QTextBrowser(d);
  text->setOpenExternalLinks(true);
  text->setMarkdown(markdown);
  v->addWidget(text, 1);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, d);
  QObject::connect(buttons, &QDialogButtonBox::rejected, d, &QDialog::close);
  v->addWidget(buttons);
  d->resize(820, 640);
  d->show();
}

void showUserGuide(QWidget* parent) { showText(parent, QObject::tr("Mirrorlab user guide"), userGuideMarkdown(), "UserGuide"); }

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
