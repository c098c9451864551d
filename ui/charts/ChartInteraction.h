// Makes a QCustomPlot feel like a chart: drag to pan, wheel to zoom, a tracer with a tooltip on
// hover, double-click to return to the live (auto-scaled) view, and a context menu to save a PNG.
#pragma once
#include <functional>

#include <QObject>
#include <QPointer>
#include <QString>

class QCustomPlot;
class QCPItemTracer;
class QCPAbstractPlottable;
class QMouseEvent;
class QWheelEvent;

namespace mlui {

class ChartInteraction : public QObject {
  Q_OBJECT
 public:
  using Formatter = std::function<QString(QCPAbstractPlottable*, double key, double value)>;
  // fileStem names the default PNG ("loss" -> loss.png).
  ChartInteraction(QCustomPlot* plot, QString fileStem);

  // While following, the owner rescales the axes on every update; zoom or pan stops it.
  bool following() const { return following_; }
  void setFormatter(Formatter f) { formatter_ = std::move(f); }
  void setRescale(std::function<void()> f) { rescale_ = std::move(f); }
  // For charts drawn with items (the timeline): the tooltip at a position, empty for none.
  void setItemTip(std::function<QString(const QPointF&)> f) { itemTip_ = std::move(f); }
  bool savePng(const QString& path);

 Q_SIGNALS:
  void followingChanged(bool following);

 protected:
  bool eventFilter(QObject* o, QEvent* e) override;

 private:
  void onMouseMove(QMouseEvent* e);
  void onUserMoved();
  void resetView();
  void showMenu(const QPoint& pos);

  QCustomPlot* plot_;
  QString stem_;
  QCPItemTracer* tracer_ = nullptr;
  bool following_ = true;
  Formatter formatter_;
  std::function<void()> rescale_;
  std::function<QString(const QPointF&)> itemTip_;
};

}  // namespace mlui
