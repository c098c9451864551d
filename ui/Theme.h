// The studio's look in one place: the device colours (one per replica, the same on every chart
// and card), the phase colours of the timeline and breakdown, chart styling and icons.
#pragma once
#include <QColor>
#include <QIcon>
#include <QString>
#include <QWidget>

class QApplication;
class QCustomPlot;
class QCPAxisRect;
class QLabel;
class QVBoxLayout;

namespace mlui {

// Network: several workers (processes), the cross-worker hop of the all-reduce.
enum class Phase { Forward, Backward, AllReduce, Wait, Optimizer, AllGather, Network, Input };

QColor deviceColor(int device);
QColor phaseColor(Phase p);
QString phaseName(Phase p);
QColor accentColor();
QColor trainColor();       // the raw per-step curves
QColor validationColor();  // validation points

// Loads the resources, the stylesheet and the application icon.
void applyStudioTheme(QApplication& app);
QIcon icon(const QString& name);

// A light, readable chart: title, axis labels with units, soft grid, no antialiasing for dense data.
void styleChart(QCustomPlot* plot, const QString& title, const QString& xLabel, const QString& yLabel);
// Sets a dynamic property used by the stylesheet (role="card", ...) and re-polishes the widget.
void setRole(QWidget* w, const char* role);
// Sets a one-line label's text without a layout pass when the text still fits: the label keeps a
// fixed size that only grows. A label updated several times a second otherwise invalidates its
// window's layout each time, and one pass over the dashboard's word-wrapped labels cost more CPU
// than a frame of its charts (and, on a machine whose cores all train, slowed the run by several
// percent). releaseSteadyText() lets the label shrink again (at the start of a run).
void setSteadyText(QLabel* label, const QString& text);
void releaseSteadyText(QLabel* label);
// The same for a word-wrapped sentence that changes while a run trains (the sync check after each
// epoch, the share of the step each second): the label sits outside any layout inside this
// holder, which places it itself and asks its window for a layout pass only when the sentence
// needs a different height. Put the holder where the label would go; set the text with
// setSteadyWrappedText (or the holder's setText).
class SteadyLabelHolder : public QWidget {
 public:
  explicit SteadyLabelHolder(QLabel* label, QWidget* parent = nullptr);
  QLabel* label() const { return label_; }
  void setText(const QString& text);
  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;
  bool hasHeightForWidth() const override { return true; }
  int heightForWidth(int w) const override;

 protected:
  void resizeEvent(QResizeEvent* e) override;
  bool eventFilter(QObject* o, QEvent* e) override;

 private:
  void fit();
  QLabel* label_;
};
// Sets the text through the label's SteadyLabelHolder, or plainly when it has none.
void setSteadyWrappedText(QLabel* label, const QString& text);
QLabel* pageTitle(const QString& text, QWidget* parent = nullptr);
QLabel* pageHint(const QString& text, QWidget* parent = nullptr);
// A scrolling settings page inside `owner`: returns the page's vertical layout, already holding
// the title and the hint.
QVBoxLayout* scrollingPage(QWidget* owner, const QString& title, const QString& hint);
QLabel* sectionTitle(const QString& text, QWidget* parent = nullptr);

}  // namespace mlui
