// Base of the dashboard's charts: a styled QCustomPlot with hover, zoom, pan, PNG export, and a
// refresh() that rescales (while the user has not zoomed) and queues one replot. drawFrame() is the
// budgeted path: it draws only when the chart can be seen and catches up when it is shown again.
// Cheap frames: what changes every frame (the graphs, the timeline's bars) sits on layers buffered
// on their own, and the axis ranges of a following chart move in steps (a range that already holds
// the data stays), so most frames redraw only those layers; the axes, grid, title and legend are
// drawn again only when a range or a label changes.
#pragma once
#include <qcustomplot.h>

#include "charts/ChartInteraction.h"
#include "charts/Decimator.h"

namespace mlui {

// A graph for live charts: its solid lines are drawn as 1-pixel polylines, the raster engine's
// fast path, and a pen wider than 1 pixel as 1-pixel copies side by side. QCustomPlot draws each
// segment on its own (and a 2-pixel pen through the stroker, several times slower); a dense live
// curve is most of what a frame costs.
class LiveGraph : public QCPGraph {
  Q_OBJECT
 public:
  LiveGraph(QCPAxis* keyAxis, QCPAxis* valueAxis) : QCPGraph(keyAxis, valueAxis) {}

 protected:
  void drawLinePlot(QCPPainter* painter, const QVector<QPointF>& lines) const override;
};

class LiveChart : public QCustomPlot {
  Q_OBJECT
 public:
  LiveChart(const QString& title, const QString& xLabel, const QString& yLabel, const QString& fileStem,
            QWidget* parent = nullptr);
  ChartInteraction* interaction() const { return interaction_; }
  // Rescales to the data unless the user zoomed or panned, then queues a replot.
  void refresh();
  virtual void clearData() = 0;
  // While a run trains (live), a following chart's axes move in steps (see steppedSpan and
  // stickyRange); a step axis spans up to the run's total steps. Not live: they fit the data.
  void setLive(bool live, double totalSteps = 0);
  bool live() const { return live_; }
  // One frame of a live view: rescales and replots now if any of the chart can be seen (a shown,
  // unminimised window, not scrolled out of view); otherwise only notes that the drawing is stale,
  // and the chart catches up the next time it is painted. Returns whether it replotted.
  bool drawFrame();
  bool canBeSeen() const;
  bool stale() const { return stale_; }
  // Replots so far (every kind), for tests; ms spent painting since the last call, for the budget.
  int replotCount() const { return replots_; }
  // Frames so far that redrew only the data layers, and that redrew everything: for tests and benchmarks.
  int dataOnlyFrames() const { return dataFrames_; }
  int fullFrames() const { return fullFrames_; }
  double takePaintMs();
  QSize sizeHint() const override { return {420, 260}; }
  QSize minimumSizeHint() const override { return {240, 170}; }

  // A following chart's axis span that moves in steps: the smallest of total, total/2, total/4 ...
  // (total > 0, down to total/32) or of 1, 2, 4, 8 ... x unit (no total) that holds `needed`. The
  // data fill at least half the axis, and the span changes a few times per run, not every frame.
  static double steppedSpan(double needed, double total, double unit = 1.0);

 protected:
  virtual void rescaleToData();
  // After a change outside a frame (cleared data): a live chart draws it with its next frame (the
  // dashboard draws one once it has handled the events that came with the change), anything else
  // queues a replot. A queued replot on top of the frame would draw everything twice.
  void redrawSoon();
  // A LiveGraph on this chart's axes (what addGraph() is for a plain QCPGraph).
  LiveGraph* addLiveGraph() { return new LiveGraph(xAxis, yAxis); }
  // The next frame draws everything (axes, labels, legend): for changes that are not an axis range,
  // such as new tick labels or legend entries.
  void requestFullFrame() { fullFrame_ = true; }
  // The layers that change every frame; each gets a paint buffer of its own. Default: "main".
  void setFrameLayers(const QStringList& names);
  // Keeps the axis range if it holds lo..hi and the data still use more than `minFill` of it;
  // otherwise sets lo..hi with `pad` of the data's span either side. Returns whether it changed.
  static bool stickyRange(QCPAxis* axis, double lo, double hi, double pad = 0.1, double minFill = 0.5);
  // The upper end of a step axis (from 0) that shows steps up to `lastStep`: while live, in steps of
  // the run's total; otherwise 2% past the last step.
  double stepAxisEnd(double lastStep) const;
  // Moves the data added since the last frame into the graphs (decimated); called before a replot.
  virtual void syncData() {}
  // Sets a value axis range from lo..hi with a little headroom.
  static void padRange(QCPAxis* axis, double lo, double hi, double pad = 0.06);
  void paintEvent(QPaintEvent* e) override;
  // Brings a graph's data in line with its decimator: appends the changed tail (or, after the
  // buckets doubled, sets everything once). Cheap per batch: the replot is what costs.
  static void syncGraph(QCPGraph* g, StreamingDecimator& d);
  // Pixel columns for a decimator: the plot's width, never under 400 so short runs stay exact.
  int decimationColumns() const;

 private:
  ChartInteraction* interaction_;
  bool stale_ = false;
  bool fullFrame_ = true;
  bool live_ = false;
  double runSteps_ = 0;
  QCPRange drawnX_, drawnY_;  // the axis ranges of the last full replot
  QList<QCPLayer*> frameLayers_;
  int replots_ = 0, dataFrames_ = 0, fullFrames_ = 0;
  double paintMs_ = 0;
};

}  // namespace mlui
