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
QLabel* pageTitle(const QString& text, QWidget* parent = nullptr);
QLabel* pageHint(const QString& text, QWidget* parent = nullptr);
// A scrolling settings page inside `owner`: returns the page's vertical layout, already holding
// the title and the hint.
QVBoxLayout* scrollingPage(QWidget* owner, const QString& title, const QString& hint);
QLabel* sectionTitle(const QString& text, QWidget* parent = nullptr);

}  // namespace mlui
