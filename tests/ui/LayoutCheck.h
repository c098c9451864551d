// What a person sees as a broken layout, checked on the widgets of one screen: a horizontal scroll
// bar, a label, button or combo box narrower than its text, a wrapped label shorter than its
// lines, a table header cut.
#pragma once
#include <QAbstractButton>
#include <QAbstractScrollArea>
#include <QComboBox>
#include <QHeaderView>
#include <QLabel>
#include <QScrollArea>
#include <QScrollBar>
#include <QStringList>
#include <QTableView>

namespace mlui {

inline QString describeWidget(const QWidget* w) {
  QString what = QString::fromLatin1(w->metaObject()->className());
  if (!w->objectName().isEmpty()) what += QLatin1Char(' ') + w->objectName();
  QString text;
  if (auto* l = qobject_cast<const QLabel*>(w)) text = l->text();
  if (auto* b = qobject_cast<const QAbstractButton*>(w)) text = b->text();
  if (auto* c = qobject_cast<const QComboBox*>(w)) text = c->currentText();
  text.remove(QRegularExpression(QStringLiteral("<[^>]*>")));
  if (!text.isEmpty()) what += QStringLiteral(" \"%1\"").arg(text.left(60));
  return what;
}

// wide: the window is at least 1280x800, where nothing may scroll sideways.
inline QStringList layoutProblems(QWidget* screen, bool wide, const QString& name) {
  QStringList out;
  auto problem = [&](const QWidget* w, const QString& what) { out << name + QStringLiteral(": ") + describeWidget(w) + what; };
  QList<QWidget*> all = screen->findChildren<QWidget*>();
  all.prepend(screen);
  for (QWidget* w : all) {
    if (!w->isVisibleTo(screen->window()) || w->width() <= 0) continue;
    if (auto* area = qobject_cast<QAbstractScrollArea*>(w)) {
      // A scroll area holding a page or a panel may never scroll sideways; the lists, tables and
      // text views inside may, below 1280x800.
      if (area->horizontalScrollBar()->isVisible() && (wide || qobject_cast<QScrollArea*>(w)))
        problem(w, QStringLiteral(" scrolls sideways (content %1 px in %2)")
                       .arg(area->horizontalScrollBar()->maximum() + area->viewport()->width())
                       .arg(area->viewport()->width()));
    }
    if (auto* l = qobject_cast<QLabel*>(w); l && !l->text().isEmpty() && l->pixmap().isNull()) {
      if (!l->wordWrap() && l->width() + 1 < l->sizeHint().width())
        problem(w, QStringLiteral(" is cut: %1 px for %2").arg(l->width()).arg(l->sizeHint().width()));
      if (l->wordWrap() && l->height() + 1 < l->heightForWidth(l->width()))
        problem(w, QStringLiteral(" is cut: %1 px high for %2").arg(l->height()).arg(l->heightForWidth(l->width())));
    }
    if (auto* b = qobject_cast<QAbstractButton*>(w); b && !b->text().isEmpty() && b->width() + 1 < b->sizeHint().width() &&
                                                     b->metaObject()->className() != QByteArray("QToolButton"))
      problem(w, QStringLiteral(" is cut: %1 px for %2").arg(b->width()).arg(b->sizeHint().width()));
    // A combo box's size hint is its longest choice, or the length it is set to show (a combo meant
    // to show the start of its choices says so with AdjustToMinimumContentsLength...).
    if (auto* c = qobject_cast<QComboBox*>(w); c && c->width() + 1 < c->sizeHint().width())
      problem(w, QStringLiteral(" is cut: %1 px for %2").arg(c->width()).arg(c->sizeHint().width()));
    if (auto* t = qobject_cast<QTableView*>(w)) {
      const QHeaderView* h = t->horizontalHeader();
      for (int i = 0; h->isVisible() && i < h->count(); ++i)
        if (!h->isSectionHidden(i) && h->sectionSize(i) + 1 < h->sectionSizeHint(i) &&
            (h->sectionResizeMode(i) == QHeaderView::Stretch || i != h->count() - 1 || !h->stretchLastSection()))
          problem(w, QStringLiteral(" header '%1' is cut: %2 px for %3")
                         .arg(t->model()->headerData(i, Qt::Horizontal).toString().replace(QLatin1Char('\n'), QLatin1Char(' ')))
                         .arg(h->sectionSize(i))
                         .arg(h->sectionSizeHint(i)));
    }
  }
  return out;
}

}  // namespace mlui
