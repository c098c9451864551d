// The studio's redraw budget: decimation keeps every pixel column's min and max exactly, the
// budget lowers and raises the frame rate from measured costs, views nobody can see do not
// replot (counted) and catch up when shown, live frames redraw only the data layers while the
// axes stay, sentences that change every epoch do not lay out the window again, and a run
// trained in the studio stores its UI cost.
#include <cmath>
#include <random>

#include <QAction>
#include <QLabel>
#include <QScrollArea>
#include <QVBoxLayout>

#include "DashboardView.h"
#include "MainWindow.h"
#include "RunsView.h"
#include "Theme.h"
#include "TrainingSession.h"
#include "UiTestUtil.h"
#include "charts/Decimator.h"
#include "charts/FrameBudget.h"
#include "charts/MetricChart.h"
#include "store/RunStore.h"

Q_DECLARE_METATYPE(ml::RunFinished)

namespace {

// A noisy series with rare spikes: what decimation must not lose.
void noisySeries(size_t n, std::vector<double>& keys, std::vector<double>& values) {
  std::mt19937 rng(42);
  std::normal_distribution<double> noise(0, 0.1);
  keys.clear();
  values.clear();
  for (size_t i = 0; i < n; ++i) {
    keys.push_back(static_cast<double>(i) * 0.5);
    double v = 1.0 / (1 + 0.001 * static_cast<double>(i)) + noise(rng);
    if (i % 7919 == 13) v += 5;  // a spike in one pixel column
    values.push_back(v);
  }
}

// Raw min and max of the points in [a, b).
std::pair<double, double> rawExtremes(const std::vector<double>& k, const std::vector<double>& v, double a, double b) {
  double lo = 1e300, hi = -1e300;
  for (size_t i = 0; i < k.size(); ++i)
    if (k[i] >= a && k[i] < b) lo = std::min(lo, v[i]), hi = std::max(hi, v[i]);
  return {lo, hi};
}

// Counts the layout requests a window receives (each one is a layout pass of the window).
struct LayoutRequests : QObject {
  int count = 0;
  bool eventFilter(QObject*, QEvent* e) override {
    if (e->type() == QEvent::LayoutRequest) ++count;
    return false;
  }
};

std::vector<ml::Event> syntheticSteps(int64_t from, int64_t count) {
  std::vector<ml::Event> events;
  for (int64_t s = from; s < from + count; ++s) {
    ml::StepEvent e;
    e.step = s;
    e.epoch = 1;
    e.loss = 1.0 / static_cast<double>(s);
    e.metric = 0.5;
    e.samples = 64;
    e.stepTime = 0.01;
    e.wallTime = 0.01 * static_cast<double>(s);
    events.emplace_back(e);
  }
  return events;
}

}  // namespace

class RedrawTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;

 private Q_SLOTS:
  void initTestCase() { uitest::isolate(dir_); }

  void decimationKeepsMinMaxPerColumnExactly() {
    std::vector<double> k, v;
    noisySeries(100000, k, v);
    const int columns = 317;
    const double lo = 0, hi = k.back() + 0.5;
    const auto out = mlui::minMaxPerColumn(k, v, lo, hi, columns);
    QVERIFY(out.size() <= 4 * static_cast<size_t>(columns));
    QVERIFY(out.size() >= 2 * static_cast<size_t>(columns));
    const double w = (hi - lo) / columns;
    size_t j = 0;
    for (int c = 0; c < columns; ++c) {
      const double a = lo + c * w, b = lo + (c + 1) * w;
      const auto [rlo, rhi] = rawExtremes(k, v, a, b);
      double dlo = 1e300, dhi = -1e300;
      for (; j < out.size() && out[j].x < b; ++j) dlo = std::min(dlo, out[j].y), dhi = std::max(dhi, out[j].y);
      QCOMPARE(dlo, rlo);
      QCOMPARE(dhi, rhi);
    }
    // Every kept point is a real one, in key order.
    for (size_t i = 1; i < out.size(); ++i) QVERIFY(out[i - 1].x <= out[i].x);
    const auto i0 = static_cast<size_t>(out[5].x * 2);
    QCOMPARE(v[i0], out[5].y);
  }

  void streamingDecimationAppendsAndKeepsExtremes() {
    std::vector<double> k, v;
    noisySeries(60000, k, v);
    mlui::StreamingDecimator d(200);
    std::vector<mlui::XY> mirror;  // what a chart holds, updated only through the change contract
    for (size_t i = 0; i < k.size(); ++i) {
      d.add(k[i], v[i]);
      if (i % 37 == 0 || i + 1 == k.size()) {  // a frame every 37 points
        if (d.rebuilt())
          mirror.clear();
        else
          mirror.resize(std::min(mirror.size(), d.firstChanged()));
        mirror.insert(mirror.end(), d.points().begin() + static_cast<std::ptrdiff_t>(mirror.size()), d.points().end());
        d.takeChanges();
      }
    }
    QCOMPARE(mirror, d.points());
    QVERIFY(d.points().size() <= 8 * 200);
    // Column by column (the decimator's own bucket width from the first key), min and max exact.
    const double w = d.bucketWidth();
    QVERIFY(w > 0);
    for (double a = k.front(); a <= k.back(); a += w) {
      const auto [rlo, rhi] = rawExtremes(k, v, a, a + w);
      double dlo = 1e300, dhi = -1e300;
      for (const auto& p : d.points())
        if (p.x >= a && p.x < a + w) dlo = std::min(dlo, p.y), dhi = std::max(dhi, p.y);
      QCOMPARE(dlo, rlo);
      QCOMPARE(dhi, rhi);
    }
    // Short series are kept whole.
    mlui::StreamingDecimator s(400);
    for (int i = 0; i < 700; ++i) s.add(i, i % 3);
    QCOMPARE(s.points().size(), size_t(700));
  }

  void budgetLowersAndRaisesTheRate() {
    mlui::FrameBudget b;                               // 2% of a core, 4..25 fps
    b.setLoad(2, 2);                                   // two replicas on two cores: drawing competes
    QCOMPARE(b.fps(), 25.0);                           // nothing measured yet
    for (int i = 0; i < 30; ++i) b.recordFrame(10.0);  // 10 ms frames: 2 fps would fit, the floor is 4
    QCOMPARE(b.fps(), 4.0);
    QCOMPARE(b.intervalMs(), 250);
    for (int i = 0; i < 60; ++i) b.recordFrame(2.0);  // 2 ms frames: 20 ms/s is 10 fps
    QVERIFY2(std::abs(b.fps() - 10.0) < 0.01, qPrintable(QString::number(b.fps())));
    for (int i = 0; i < 60; ++i) b.recordFrame(0.1);  // cheap frames: the display rate
    QCOMPARE(b.fps(), 25.0);
    for (int i = 0; i < 60; ++i) b.recordFrame(10.0);
    QCOMPARE(b.fps(), 4.0);
    b.setLoad(1, 16);  // one replica on 16 cores: a free core draws at the full rate
    QCOMPARE(b.fps(), 25.0);
    QCOMPARE(b.frames(), int64_t(210));
    QVERIFY(std::abs(b.drawMs() - (30 * 10.0 + 60 * 2.0 + 60 * 0.1 + 60 * 10.0)) < 1e-6);
    b.recordFrame(-1);  // nonsense is ignored
    QCOMPARE(b.frames(), int64_t(210));
  }

  void hiddenDashboardDoesNotReplotAndCatchesUp() {
    mlui::MainWindow w;
    QVERIFY(w.openProject(uitest::writeProject(dir_, uitest::spiralsProject(), QStringLiteral("hidden.json"))));
    w.resize(1400, 900);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    auto* d = w.dashboard();
    w.showPage(mlui::MainWindow::ModelPage);
    QCoreApplication::processEvents();
    std::vector<int> before;
    for (auto* c : d->charts()) before.push_back(c->replotCount());
    for (int frame = 0; frame < 20; ++frame) {
      d->onEvents(syntheticSteps(1 + frame * 10, 10));
      QTest::qWait(5);
    }
    for (size_t i = 0; i < before.size(); ++i) QCOMPARE(d->charts()[i]->replotCount(), before[i]);
    QCOMPARE(d->lossChart()->stepCount(), size_t(200));  // the data still accumulated
    w.showPage(mlui::MainWindow::DashboardPage);
    QTRY_VERIFY(d->lossChart()->replotCount() > before[0]);  // the first frame after showing catches up
    QCOMPARE(d->lossChart()->trainGraph()->dataCount(), 200);
    QVERIFY(d->lossChart()->xAxis->range().upper >= 200);  // rescaled to the accumulated data

    // Minimised: nothing drawn either.
    w.showMinimized();
    QTRY_VERIFY(w.isMinimized());
    QCoreApplication::processEvents();
    const int minimised = d->lossChart()->replotCount();
    for (int frame = 0; frame < 10; ++frame) {
      d->onEvents(syntheticSteps(201 + frame * 10, 10));
      QTest::qWait(5);
    }
    d->render();
    QCOMPARE(d->lossChart()->replotCount(), minimised);
    QCOMPARE(d->lossChart()->stepCount(), size_t(300));
  }

  void chartScrolledOutOfViewDoesNotReplot() {
    QScrollArea area;
    auto* inner = new QWidget;
    auto* l = new QVBoxLayout(inner);
    auto* spacer = new QWidget(inner);
    spacer->setFixedHeight(2000);
    auto* chart = new mlui::MetricChart(QStringLiteral("Loss"), QStringLiteral("step"), QStringLiteral("loss"),
                                        QStringLiteral("loss"), Qt::blue, false, inner);
    chart->setFixedHeight(250);
    l->addWidget(spacer);
    l->addWidget(chart);
    area.setWidget(inner);
    area.setWidgetResizable(true);
    area.resize(600, 400);
    area.show();
    QVERIFY(QTest::qWaitForWindowExposed(&area));
    QCoreApplication::processEvents();
    const int n0 = chart->replotCount();
    for (int i = 1; i <= 50; ++i) chart->addStep(i, 1.0 / i);
    QVERIFY(!chart->canBeSeen());
    QVERIFY(!chart->drawFrame());
    QVERIFY(chart->stale());
    QCoreApplication::processEvents();
    QCOMPARE(chart->replotCount(), n0);
    area.ensureWidgetVisible(chart);  // scrolled into view: the paint catches up
    QTRY_VERIFY(!chart->stale());
    QVERIFY(chart->replotCount() > n0);
    QVERIFY(chart->canBeSeen());
    QVERIFY(chart->drawFrame());
  }

  // A number that changes several times a second repaints its label and nothing else: no layout
  // pass of the window while the text fits, and a text that needs more room still gets all of it.
  void steadyTextRepaintsWithoutALayoutPass() {
    QWidget window;
    auto* v = new QVBoxLayout(&window);
    auto* wrapped = new QLabel(QStringLiteral("A word-wrapped sentence that a layout pass has to measure again."), &window);
    wrapped->setWordWrap(true);
    auto* value = new QLabel(&window);
    v->addWidget(wrapped);
    v->addWidget(value);
    window.resize(400, 200);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    mlui::setSteadyText(value, QStringLiteral("1 / 2345"));
    QCoreApplication::processEvents();
    LayoutRequests requests;
    window.installEventFilter(&requests);
    for (int step = 2; step <= 9; ++step) {
      mlui::setSteadyText(value, QStringLiteral("%1 / 2345").arg(step));
      QCoreApplication::processEvents();
    }
    QCOMPARE(value->text(), QStringLiteral("9 / 2345"));
    QCOMPARE(requests.count, 0);
    // The same through a plain setText: the window lays itself out again (what the steady text avoids).
    mlui::releaseSteadyText(value);
    value->setText(QStringLiteral("10 / 2345"));
    QCoreApplication::processEvents();
    QVERIFY(requests.count > 0);
    // A longer text grows the label to its size hint: nothing is cut.
    mlui::setSteadyText(value, QStringLiteral("1,234,567 / 99,999,999 steps"));
    QCoreApplication::processEvents();
    QVERIFY(value->width() >= value->sizeHint().width());
    QCOMPARE(value->text(), QStringLiteral("1,234,567 / 99,999,999 steps"));
  }

  // The axis of a live chart moves in steps: the smallest total / 2^k (down to total / 32) that
  // holds the data, or 1, 2, 4 ... units without a total.
  void steppedSpanHoldsTheDataInFewSteps() {
    QCOMPARE(mlui::LiveChart::steppedSpan(1938, 15300), 3825.0);  // total/4: step 1,900 of 15,000 (2% room)
    QCOMPARE(mlui::LiveChart::steppedSpan(3825, 15300), 3825.0);
    QCOMPARE(mlui::LiveChart::steppedSpan(3826, 15300), 7650.0);
    QCOMPARE(mlui::LiveChart::steppedSpan(15300, 15300), 15300.0);
    QCOMPARE(mlui::LiveChart::steppedSpan(1, 15300), 15300.0 / 32);  // never narrower than total / 32
    QCOMPARE(mlui::LiveChart::steppedSpan(20000, 15300), 32768.0);   // past the total: powers of two
    QCOMPARE(mlui::LiveChart::steppedSpan(0.3, 0, 1.0), 1.0);
    QCOMPARE(mlui::LiveChart::steppedSpan(5.1, 0, 1.0), 8.0);
    // Every span holds what it must, and the data fill at least half of it (above total / 32).
    for (double need = 1; need < 15300; need *= 1.37) {
      const double span = mlui::LiveChart::steppedSpan(need, 15300);
      QVERIFY(span >= need);
      if (need > 15300.0 / 32) QVERIFY2(need > span / 2, qPrintable(QStringLiteral("%1 in %2").arg(need).arg(span)));
    }
  }

  // While a run trains, most frames redraw only the graphs: frames whose axes did not move are
  // data-layer frames, and they really change the pixels; a point outside the axes moves them and
  // draws everything; once the run ends the axes fit the data again.
  void liveFramesRedrawOnlyTheDataLayer() {
    mlui::MetricChart chart(QStringLiteral("Loss"), QStringLiteral("step"), QStringLiteral("loss"), QStringLiteral("loss"),
                            Qt::blue, false);
    chart.resize(480, 300);
    chart.show();
    QVERIFY(QTest::qWaitForWindowExposed(&chart));
    chart.setLive(true, 1000);
    for (int i = 1; i <= 100; ++i) chart.addStep(i, 1.0 + 0.1 * std::sin(i * 0.3));
    QVERIFY(chart.drawFrame());
    QCOMPARE(chart.fullFrames(), 1);  // the first frame of a run draws everything
    const QCPRange x0 = chart.xAxis->range(), y0 = chart.yAxis->range();
    QCOMPARE(x0.upper, 1020.0 / 8);  // steps 1..100 of 1,000: an eighth of the run (2% room)
    QCoreApplication::processEvents();
    const QImage before = chart.grab().toImage();
    for (int i = 101; i <= 120; ++i) chart.addStep(i, 1.0 + 0.1 * std::sin(i * 0.3));  // inside both axes
    QVERIFY(chart.drawFrame());
    QCOMPARE(chart.fullFrames(), 1);
    QCOMPARE(chart.dataOnlyFrames(), 1);
    QCOMPARE(chart.xAxis->range(), x0);
    QCOMPARE(chart.yAxis->range(), y0);
    QCoreApplication::processEvents();
    const QImage after = chart.grab().toImage();
    QVERIFY(before != after);  // the new points are on screen
    // The curve's new stretch is drawn where the axes put steps 101..120, and nowhere left of it.
    const int xa = static_cast<int>(chart.xAxis->coordToPixel(101)) + 1,
              xb = static_cast<int>(chart.xAxis->coordToPixel(120)) - 1;
    const int xl = static_cast<int>(chart.xAxis->coordToPixel(50));
    int changedInside = 0, changedLeft = 0;
    for (int y = 0; y < after.height(); ++y) {
      for (int x = xa; x <= xb; ++x) changedInside += before.pixel(x, y) != after.pixel(x, y);
      for (int x = xl - 5; x <= xl + 5; ++x) changedLeft += before.pixel(x, y) != after.pixel(x, y);
    }
    QVERIFY(changedInside > 0);
    QCOMPARE(changedLeft, 0);
    // A value far above the axis: the axis moves (a full frame) and holds it.
    chart.addStep(121, 50.0);
    QVERIFY(chart.drawFrame());
    QCOMPARE(chart.fullFrames(), 2);
    QVERIFY(chart.yAxis->range().upper > 50.0);
    // Past the eighth: the step axis doubles.
    for (int i = 122; i <= 200; ++i) chart.addStep(i, 1.0);
    QVERIFY(chart.drawFrame());
    QCOMPARE(chart.xAxis->range().upper, 1020.0 / 4);
    // The run ended: the axes fit the data (2% past the last step).
    chart.setLive(false);
    QVERIFY(chart.drawFrame());
    QCOMPARE(chart.xAxis->range().upper, 200 * 1.02);
  }

  // A live graph draws its lines as 1-pixel polylines: a 2-pixel pen covers about the pixels
  // QCustomPlot's own 2-pixel line covers, and a NaN (a pause) still breaks the line.
  void liveGraphDrawsWhatAPlainGraphDraws() {
    auto render = [](bool live) {
      mlui::MetricChart plot(QStringLiteral("Curve"), QStringLiteral("x"), QStringLiteral("y"), QStringLiteral("curve"), Qt::blue,
                             false);
      plot.resize(420, 300);
      plot.legend->setVisible(false);
      plot.clearGraphs();
      QCPGraph* g = live ? new mlui::LiveGraph(plot.xAxis, plot.yAxis) : new QCPGraph(plot.xAxis, plot.yAxis);
      g->setPen(QPen(QColor(200, 0, 0), 2));
      g->setAdaptiveSampling(false);
      for (int i = 0; i <= 400; ++i) {
        const double x = i * 0.25;
        g->addData(x, x > 40 && x < 50 ? qQNaN() : std::sin(x * 0.2) * (1 + x * 0.02));
      }
      plot.xAxis->setRange(0, 100);
      plot.yAxis->setRange(-3.5, 3.5);
      plot.replot();
      const QImage img = plot.toPixmap(420, 300).toImage();
      int red = 0, inGap = 0;
      const int g0 = static_cast<int>(plot.xAxis->coordToPixel(41)), g1 = static_cast<int>(plot.xAxis->coordToPixel(49));
      for (int y = 0; y < img.height(); ++y)
        for (int x = 0; x < img.width(); ++x) {
          const QColor c = img.pixelColor(x, y);
          if (c.red() > 150 && c.green() < 90 && c.blue() < 90) {
            ++red;
            if (x >= g0 && x <= g1) ++inGap;
          }
        }
      return std::pair{red, inGap};
    };
    const auto [plain, plainGap] = render(false);
    const auto [live, liveGap] = render(true);
    QVERIFY(plain > 500);
    QVERIFY2(std::abs(live - plain) < plain * 0.35, qPrintable(QStringLiteral("%1 vs %2 pixels").arg(live).arg(plain)));
    QCOMPARE(plainGap, 0);
    QCOMPARE(liveGap, 0);
  }

  // Hovering still shows the tracer on the curve: the hover layer gets a paint buffer of its own
  // while the pointer is over the chart (the tracer moves without a full replot) and gives it up
  // when the pointer leaves (a live frame blends one buffer less), taking the tracer with it.
  void hoverTracerComesAndGoesWithThePointer() {
    QWidget window;
    auto* v = new QVBoxLayout(&window);
    auto* chartPtr = new mlui::MetricChart(QStringLiteral("Loss"), QStringLiteral("step"), QStringLiteral("loss"),
                                           QStringLiteral("loss"), Qt::blue, false, &window);
    auto* below = new QLabel(QStringLiteral("below the chart"), &window);
    below->setMinimumHeight(60);
    v->addWidget(chartPtr);
    v->addWidget(below);
    auto& chart = *chartPtr;
    window.resize(480, 400);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    for (int i = 1; i <= 100; ++i) chart.addStep(i, 1.0 + 0.5 * std::sin(i * 0.05));
    chart.refresh();
    QTest::mouseMove(below, QPoint(20, 20));  // the pointer starts outside the chart
    QCoreApplication::processEvents();
    QCPLayer* hover = chart.layer(QStringLiteral("hover"));
    QCOMPARE(hover->mode(), QCPLayer::lmLogical);
    const QImage before = chart.grab().toImage();
    const QPoint onCurve(static_cast<int>(chart.xAxis->coordToPixel(50)),
                         static_cast<int>(chart.yAxis->coordToPixel(chart.smoothGraph()->data()->findBegin(50)->value)));
    QTest::mouseMove(&chart, onCurve);
    QTRY_COMPARE(hover->mode(), QCPLayer::lmBuffered);
    QTest::mouseMove(&chart, onCurve + QPoint(1, 0));  // a move over the chart places the tracer
    QCoreApplication::processEvents();
    const QImage hovered = chart.grab().toImage();
    int changedNear = 0;
    for (int y = onCurve.y() - 6; y <= onCurve.y() + 6; ++y)
      for (int x = onCurve.x() - 6; x <= onCurve.x() + 6; ++x) changedNear += before.pixel(x, y) != hovered.pixel(x, y);
    QVERIFY2(changedNear > 10, qPrintable(QString::number(changedNear)));  // the tracer's circle on the curve
    QTest::mouseMove(below, QPoint(20, 20));                               // the pointer leaves the chart
    QTRY_COMPARE(hover->mode(), QCPLayer::lmLogical);
    auto differing = [&] {
      const QImage now = chart.grab().toImage();
      int n = 0;
      for (int y = 0; y < now.height(); ++y)
        for (int x = 0; x < now.width(); ++x) n += now.pixel(x, y) != before.pixel(x, y);
      return n;
    };
    QTRY_COMPARE(differing(), 0);  // the tracer went with the pointer
  }

  // A sentence that changes every epoch changes without a layout pass of its window while it
  // keeps its number of lines, and gets the height it needs when it has more lines.
  void steadyWrappedSentenceWithoutALayoutPass() {
    QWidget window;
    auto* v = new QVBoxLayout(&window);
    auto* sentence = new QLabel(QStringLiteral("Replicas in sync after epoch 1."));
    sentence->setWordWrap(true);
    auto* holder = new mlui::SteadyLabelHolder(sentence, &window);
    auto* below = new QLabel(QStringLiteral("below"), &window);
    v->addWidget(holder);
    v->addWidget(below);
    v->addStretch(1);
    window.resize(400, 300);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QCoreApplication::processEvents();
    QCOMPARE(sentence->width(), holder->width());
    const int oneLine = sentence->height();
    LayoutRequests requests;
    window.installEventFilter(&requests);
    for (int epoch = 2; epoch <= 9; ++epoch) {
      mlui::setSteadyWrappedText(sentence, QStringLiteral("Replicas in sync after epoch %1.").arg(epoch));
      QCoreApplication::processEvents();
    }
    QCOMPARE(sentence->text(), QStringLiteral("Replicas in sync after epoch 9."));
    QCOMPARE(requests.count, 0);
    QCOMPARE(sentence->height(), oneLine);
    // Four times as long: more lines, a taller holder, and the label below moves down.
    const int belowY = below->y();
    const QString longer = QStringLiteral(
        "Replicas differ after epoch 9 — checksum mismatch: cpu:0 0x1234abcd, cpu:1 "
        "0x9876fedc, cpu:2 0x1234abcd, cpu:3 0x1234abcd.");
    mlui::setSteadyWrappedText(sentence, longer);
    QTRY_VERIFY(requests.count > 0);
    QTRY_VERIFY(holder->height() > oneLine);
    QCOMPARE(sentence->height(), sentence->heightForWidth(holder->width()));
    QVERIFY(below->y() > belowY);
    // A narrower window: the sentence follows the width and wraps into more lines.
    const int wide = sentence->height();
    window.resize(200, 300);
    QTRY_COMPARE(sentence->width(), holder->width());
    QTRY_VERIFY2(sentence->height() > wide, qPrintable(QStringLiteral("%1x%2 in %3x%4 (window %5), was %6, hfw %7")
                                                           .arg(sentence->width())
                                                           .arg(sentence->height())
                                                           .arg(holder->width())
                                                           .arg(holder->height())
                                                           .arg(window.width())
                                                           .arg(wide)
                                                           .arg(sentence->heightForWidth(holder->width()))));
  }

  void studioRunStoresItsDrawingCost() {
    // 60 epochs of the small spirals model: long enough for frames while it trains (3 epochs end
    // before the first frame now that checkpoints no longer wait for the recorder's commit timer).
    mlui::MainWindow w;
    QVERIFY(w.openProject(uitest::writeProject(dir_, uitest::spiralsProject("cpu:2", 60), QStringLiteral("cost.json"))));
    w.resize(1400, 900);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    auto trainOnce = [&w]() -> int64_t {
      std::optional<int64_t> id;
      bool ended = false;
      auto c = QObject::connect(w.session(), &mlui::TrainingSession::runEnded, &w,
                                [&](const ml::RunFinished&, std::optional<int64_t> r) {
                                  id = r;
                                  ended = true;
                                });
      w.dashboard()->trainAction()->trigger();
      if (!QTest::qWaitFor([&] { return ended; }, 60000)) qWarning("training did not end in 60 s");
      QObject::disconnect(c);
      return id.value_or(-1);
    };
    w.showPage(mlui::MainWindow::DashboardPage);
    const int64_t watched = trainOnce();
    QVERIFY(watched > 0);
    const int64_t viewFrames = w.dashboard()->frameBudget().frames();
    w.showMinimized();  // nobody watches the second run (Train shows the dashboard, minimised)
    QTRY_VERIFY(w.isMinimized());
    const int64_t unwatched = trainOnce();
    QVERIFY(unwatched > 0);
    auto store = ml::RunStore::open(qEnvironmentVariable("MIRRORLAB_DB").toStdString());
    const auto a = store.loadRun(watched), b = store.loadRun(unwatched);
    QVERIFY(a.uiFrames.has_value() && a.uiDrawMs.has_value());
    QVERIFY2(*a.uiFrames >= 1, qPrintable(QString::number(*a.uiFrames)));
    QVERIFY(*a.uiDrawMs > 0);
    // The stored figures are the frames drawn while it trained: never more than the view counted.
    QVERIFY(*a.uiFrames <= viewFrames);
    QVERIFY(!b.uiFrames.has_value() || *b.uiFrames == 0);
  }
};

QTEST_MAIN(RedrawTest)
#include "test_redraw.moc"
