// The studio's look in one place: the device colours (one per replica, the same on every chart
// and card), the phase colours of the timeline and breakdown, chart styling and icons.
#pragma once
#include <QColor>
#include <QIcon>
#include <QString>

class QApplication;
class QCustomPlot;
class QCPAxisRect;
class QWidget;
class QLabel;

class QVBoxLayout;

namespace mlui {

// Network: several workers (processes), the cross-worker hop of the all-reduce.
enum class Phase { Forward, Backward, AllReduce, Wait, Optimizer, AllGather, Network };

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
QLabel* pageTitle(const QString& text, QWidget* parent = nullptr);
QLabel* pageHint(const QString& text, QWidget* parent = nullptr);
// A scrolling settings page inside `owner`: returns the page's vertical layout, already holding
// the title and the hint.
QVBoxLayout* scrollingPage(QWidget* owner, const QString& title, const QString& hint);
QLabel* sectionTitle(const QString& text, QWidget* parent = nullptr);

}  // namespace mlui
