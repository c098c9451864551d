// Colours, fonts and chart styling shared by every screen.
#include "Theme.h"

#include <algorithm>

#include <qcustomplot.h>
#include <QApplication>
#include <QFile>
#include <QFrame>
#include <QHash>
#include <QLabel>
#include <QScrollArea>
#include <QStyle>
#include <QVBoxLayout>

static void initStudioResources() { Q_INIT_RESOURCE(mirrorlab); }

namespace mlui {

QColor deviceColor(int device) {
  // Okabe-Ito: told apart with every common colour-vision deficiency (no red/green pair), then
  // a neutral grey and a dark blue for the 9th and 10th device.
  static const QColor colors[] = {QColor(0x00, 0x72, 0xB2), QColor(0xE6, 0x9F, 0x00), QColor(0x00, 0x9E, 0x73),
                                  QColor(0xCC, 0x79, 0xA7), QColor(0x56, 0xB4, 0xE9), QColor(0xD5, 0x5E, 0x00),
                                  QColor(0xC8, 0xB4, 0x00), QColor(0x33, 0x33, 0x33), QColor(0x99, 0x99, 0x99),
                                  QColor(0x1B, 0x3A, 0x6B)};
  const int n = static_cast<int>(sizeof colors / sizeof colors[0]);
  QColor c = colors[((device % n) + n) % n];
  if (device >= n) c = c.darker(100 + 25 * (device / n));
  return c;
}

QColor phaseColor(Phase p) {
  switch (p) {
    case Phase::Forward: return QColor(0x5B, 0x8F, 0xD9);
    case Phase::Backward: return QColor(0x3E, 0xB4, 0x89);
    case Phase::AllReduce: return QColor(0xF0, 0xA2, 0x02);
    case Phase::Wait: return QColor(0xC4, 0xCA, 0xD3);
    case Phase::Optimizer: return QColor(0x93, 0x6F, 0xC9);
    case Phase::AllGather: return QColor(0xD9, 0x6C, 0x3B);
    case Phase::Network: return QColor(0xC2, 0x3B, 0x7A);
    case Phase::Input: return QColor(0x8A, 0x9B, 0xA8);
  }
  return Qt::gray;
}

QString phaseName(Phase p) {
  switch (p) {
    case Phase::Forward: return QStringLiteral("forward");
    case Phase::Backward: return QStringLiteral("backward");
    case Phase::AllReduce: return QStringLiteral("all-reduce");
    case Phase::Wait: return QStringLiteral("wait");
    case Phase::Optimizer: return QStringLiteral("optimizer");
    case Phase::AllGather: return QStringLiteral("all-gather");
    case Phase::Network: return QStringLiteral("network");
    case Phase::Input: return QStringLiteral("input");
  }
  return {};
}

QColor accentColor() { return QColor(0x2F, 0x6F, 0xB0); }
// Blue against orange (Okabe-Ito): train and validation stay apart for colour-blind readers.
QColor trainColor() { return QColor(0x00, 0x72, 0xB2); }
QColor validationColor() { return QColor(0xE6, 0x9F, 0x00); }

void applyStudioTheme(QApplication& app) {
  initStudioResources();
  QFile qss(QStringLiteral(":/studio.qss"));
  if (qss.open(QIODevice::ReadOnly)) app.setStyleSheet(QString::fromUtf8(qss.readAll()));
  app.setWindowIcon(icon(QStringLiteral("mirrorlab")));
}

QIcon icon(const QString& name) {
  // SVG renders crisply at any device pixel ratio when the Qt SVG icon engine is installed;
  // without it the icon is empty and every action still shows its text. Each name is parsed
  // once (a play/pause button that changes state would otherwise parse its SVG every time).
  static QHash<QString, QIcon> cache;
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.insert(name, QIcon(QStringLiteral(":/icons/%1.svg").arg(name)));
  return *it;
}

namespace {
// Fits a chart's axes to its size as the window changes: about one tick label per 70 px across and
// per 45 px up (at 1024 px the wall-time labels ran into each other), and a y label longer than
// the axis ("ms per step (last 20 steps)" on a short chart) elided instead of cut at the edges.
// A label the code sets later is the new full one.
class ChartFitter : public QObject {
 public:
  explicit ChartFitter(QCustomPlot* plot) : QObject(plot), plot_(plot) { plot->installEventFilter(this); }
  bool eventFilter(QObject*, QEvent* e) override {
    if (e->type() == QEvent::Resize) fit();
    return false;
  }

 private:
  void fit() {
    plot_->xAxis->ticker()->setTickCount(std::clamp(plot_->width() / 70, 2, 8));
    plot_->yAxis->ticker()->setTickCount(std::clamp(plot_->height() / 45, 2, 8));
    QCPAxis* y = plot_->yAxis;
    if (y->label() != elided_) full_ = y->label();
    const int room = std::max(40, plot_->height() - 70);  // less the title and the x axis
    elided_ = QFontMetrics(y->labelFont()).elidedText(full_, Qt::ElideRight, room);
    if (y->label() != elided_) y->setLabel(elided_);
  }
  QCustomPlot* plot_;
  QString full_, elided_;
};
}  // namespace

void styleChart(QCustomPlot* plot, const QString& title, const QString& xLabel, const QString& yLabel) {
  plot->setBackground(Qt::white);
  plot->setNotAntialiasedElements(QCP::aeAll);
  plot->setAntialiasedElements(QCP::aeNone);
  plot->setPlottingHint(QCP::phFastPolylines, true);
  plot->setPlottingHint(QCP::phCacheLabels, true);
  // A replot paints with the window's next paint, not at once: QCustomPlot's default repaint()
  // per replot meant a paint and a backing-store flush per chart, six a frame on the dashboard.
  plot->setPlottingHint(QCP::phImmediateRefresh, false);
  QFont base = plot->font();
  QFont tick = base;
  tick.setPointSizeF(base.pointSizeF() * 0.88);
  QFont label = base;
  label.setPointSizeF(base.pointSizeF() * 0.92);
  if (plot->plotLayout()->rowCount() == 1 || !qobject_cast<QCPTextElement*>(plot->plotLayout()->element(0, 0))) {
    plot->plotLayout()->insertRow(0);
    QFont tf = base;
    tf.setBold(true);
    auto* t = new QCPTextElement(plot, title, tf);
    t->setTextColor(QColor(0x1f, 0x2d, 0x3d));
    t->setMargins(QMargins(0, 6, 0, 0));
    plot->plotLayout()->addElement(0, 0, t);
  } else {
    qobject_cast<QCPTextElement*>(plot->plotLayout()->element(0, 0))->setText(title);
  }
  const QColor axisColor(0x8a, 0x96, 0xa3), gridColor(0xe9, 0xed, 0xf2), text(0x3b, 0x4a, 0x5a);
  for (QCPAxis* a : {plot->xAxis, plot->yAxis}) {
    a->setBasePen(QPen(axisColor, 1));
    a->setTickPen(QPen(axisColor, 1));
    a->setSubTickPen(QPen(axisColor, 1));
    a->setSubTicks(false);
    a->setTickLength(0, 4);
    a->setTickLabelFont(tick);
    a->setTickLabelColor(text);
    a->setLabelFont(label);
    a->setLabelColor(text);
    a->grid()->setPen(QPen(gridColor, 1, Qt::SolidLine));
    a->grid()->setZeroLinePen(Qt::NoPen);
  }
  plot->xAxis->setLabel(xLabel);
  plot->yAxis->setLabel(yLabel);
  plot->axisRect()->setupFullAxesBox(false);
  plot->xAxis2->setVisible(false);
  plot->yAxis2->setVisible(false);
  plot->legend->setFont(tick);
  plot->legend->setBrush(QColor(255, 255, 255, 230));
  plot->legend->setBorderPen(QPen(QColor(0xdd, 0xe3, 0xea)));
  plot->legend->setIconSize(14, 8);
  plot->legend->setRowSpacing(-2);
  if (!plot->property("axesFitted").toBool()) {  // once, though a chart may be styled again
    plot->setProperty("axesFitted", true);
    new ChartFitter(plot);
  }
}

void setSteadyText(QLabel* label, const QString& text) {
  if (label->text() == text) return;
  const bool fixed = label->minimumSize() == label->maximumSize();
  label->setText(text);  // with a fixed size: a repaint, no layout pass (Qt skips the invalidation)
  const QSize need = label->sizeHint();
  if (!fixed || need.width() > label->width() || need.height() > label->height())
    label->setFixedSize(need.expandedTo(fixed ? label->size() : QSize()));
}

void releaseSteadyText(QLabel* label) {
  label->setMinimumSize(0, 0);
  label->setMaximumSize(QWIDGETSIZE_MAX, QWIDGETSIZE_MAX);
}

SteadyLabelHolder::SteadyLabelHolder(QLabel* label, QWidget* parent) : QWidget(parent), label_(label) {
  label_->setParent(this);
  label_->move(0, 0);
  QSizePolicy p(QSizePolicy::Preferred, QSizePolicy::Preferred);
  p.setHeightForWidth(true);
  setSizePolicy(p);
  label_->installEventFilter(this);  // a new role (stylesheet padding) or font changes the height
  label_->show();
}

QSize SteadyLabelHolder::sizeHint() const {
  const QSize s = label_->sizeHint();
  return {s.width(), heightForWidth(s.width())};
}

QSize SteadyLabelHolder::minimumSizeHint() const { return {0, 0}; }

int SteadyLabelHolder::heightForWidth(int w) const { return label_->heightForWidth(w); }

void SteadyLabelHolder::resizeEvent(QResizeEvent* e) {
  QWidget::resizeEvent(e);
  fit();
}

bool SteadyLabelHolder::eventFilter(QObject* o, QEvent* e) {
  if (o == label_ && (e->type() == QEvent::StyleChange || e->type() == QEvent::FontChange)) {
    fit();
    updateGeometry();
  }
  return QWidget::eventFilter(o, e);
}

// The label at the holder's width and the height its text needs there. The label is not in a
// layout: its own geometry updates (QLabel::setText asks for one) go to this holder, which has no
// layout to invalidate, instead of to the window's.
void SteadyLabelHolder::fit() {
  const int w = std::max(1, width());
  label_->setGeometry(0, 0, w, std::max(1, label_->heightForWidth(w)));
}

void SteadyLabelHolder::setText(const QString& text) {
  if (label_->text() == text) return;
  label_->setText(text);  // a repaint, and a layout request to this holder only
  const int w = std::max(1, width()), h = std::max(1, label_->heightForWidth(w));
  if (h == label_->height()) return;
  label_->resize(w, h);
  updateGeometry();  // a different number of lines: the window's layout gives the holder its new height
}

void setSteadyWrappedText(QLabel* label, const QString& text) {
  if (auto* holder = dynamic_cast<SteadyLabelHolder*>(label->parentWidget()))
    holder->setText(text);
  else
    label->setText(text);
}

void setRole(QWidget* w, const char* role) {
  // Polishing again costs a style pass and a layout pass of the window: only when the role changes.
  if (w->property("role").toString() == QLatin1String(role)) return;
  w->setProperty("role", QString::fromLatin1(role));
  w->style()->unpolish(w);
  w->style()->polish(w);
}

static QLabel* labelWithRole(const QString& text, const char* role, QWidget* parent) {
  auto* l = new QLabel(text, parent);
  l->setProperty("role", QString::fromLatin1(role));
  l->setWordWrap(true);
  return l;
}
QLabel* pageTitle(const QString& text, QWidget* parent) { return labelWithRole(text, "pageTitle", parent); }
QLabel* pageHint(const QString& text, QWidget* parent) { return labelWithRole(text, "pageHint", parent); }
QLabel* sectionTitle(const QString& text, QWidget* parent) { return labelWithRole(text, "sectionTitle", parent); }

QVBoxLayout* scrollingPage(QWidget* owner, const QString& title, const QString& hint) {
  auto* outer = new QVBoxLayout(owner);
  outer->setContentsMargins(0, 0, 0, 0);
  auto* scroll = new QScrollArea(owner);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  outer->addWidget(scroll);
  auto* page = new QWidget(scroll);
  scroll->setWidget(page);
  auto* v = new QVBoxLayout(page);
  v->setContentsMargins(16, 12, 16, 12);
  v->setSpacing(10);
  v->addWidget(pageTitle(title));
  v->addWidget(pageHint(hint));
  return v;
}

}  // namespace mlui
