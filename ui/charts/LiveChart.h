// Base of the dashboard's charts: a styled QCustomPlot with hover, zoom, pan, PNG export, and a
// refresh() that rescales (while the user has not zoomed) and queues one replot. drawFrame() is the
// budgeted path: it draws only when the chart can be seen and catches up when it is shown again.
#pragma once
#include <qcustomplot.h>

#include "charts/ChartInteraction.h"
#include "charts/Decimator.h"

namespace mlui {

class LiveChart : public QCustomPlot {
  Q_OBJECT
 public:
  LiveChart(const QString& title, const QString& xLabel, const QString& yLabel, const QString& fileStem,
            QWidget* parent = nullptr);
  ChartInteraction* interaction() const { return interaction_; }
  // Rescales to the data unless the user zoomed or panned, then queues a replot.
  void refresh();
  virtual void clearData() = 0;
  // One frame of a live view: rescales and replots now if any of the chart can be seen (a shown,
  // unminimised window, not scrolled out of view); otherwise only notes that the drawing is stale,
  // and the chart catches up the next time it is painted. Returns whether it replotted.
  bool drawFrame();
  bool canBeSeen() const;
  bool stale() const { return stale_; }
  // Replots so far (every kind), for tests; ms spent painting since the last call, for the budget.
  int replotCount() const { return replots_; }
  double takePaintMs();
  QSize sizeHint() const override { return {420, 260}; }
  QSize minimumSizeHint() const override { return {240, 170}; }

 protected:
  virtual void rescaleToData();
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
  int replots_ = 0;
  double paintMs_ = 0;
};

}  // namespace mlui
