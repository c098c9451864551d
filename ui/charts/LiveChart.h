// Base of the dashboard's charts: a styled QCustomPlot with hover, zoom, pan, PNG export, and a
// refresh() that rescales (while the user has not zoomed) and queues one replot.
#pragma once
#include <qcustomplot.h>

#include "charts/ChartInteraction.h"

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
  QSize sizeHint() const override { return {420, 260}; }
  QSize minimumSizeHint() const override { return {240, 170}; }

 protected:
  virtual void rescaleToData();
  // Sets a value axis range from lo..hi with a little headroom.
  static void padRange(QCPAxis* axis, double lo, double hi, double pad = 0.06);

 private:
  ChartInteraction* interaction_;
};

}  // namespace mlui
