// The studio training on GPUs, against the fake CUDA plugin (tests/gpu/fake, FAKE_GPUS=2, set by
// tests/ui/CMakeLists.txt): the utilization chart draws NVML's figure for the physical GPU that
// two logical GPUs share, says it is NVML's, and shows the GPU's memory and temperature; without
// NVML (FAKE_NVML=0) it draws each replica's computed utilization and says why.
#include <QLabel>

#include "DashboardView.h"
#include "MainWindow.h"
#include "TrainingSession.h"
#include "UiTestUtil.h"
#include "charts/DeviceCharts.h"
#include "store/RunStore.h"

class GpuDashboardTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;

 private Q_SLOTS:
  void initTestCase() { uitest::isolate(dir_); }
  void init() {
    qputenv("MIRRORLAB_DB",
            dir_.filePath(QStringLiteral("runs-%1.sqlite").arg(QLatin1String(QTest::currentTestFunction()))).toUtf8());
  }
  void cleanup() { qunsetenv("FAKE_NVML"); }

  void nvmlFiguresOfTheSharedGpuAreDrawnAndNamed() {
    mlui::MainWindow w;
    QVERIFY(w.openProject(uitest::writeProject(dir_, uitest::spiralsProject("gpu:0x2", 3), QStringLiteral("gpu.json"))));
    w.resize(1400, 900);
    w.show();
    const auto f = uitest::trainInWindow(w);
    QVERIFY2(f.status == ml::RunStatus::Finished, f.message.c_str());
    auto* d = w.dashboard();
    d->render();
    auto* u = d->utilizationChart();
    QCOMPARE(u->title(), QStringLiteral("GPU utilization (NVML)"));
    QCOMPARE(u->yAxis->label(), QStringLiteral("GPU busy, NVML (%)"));
    QCOMPARE(u->gpuCount(), 1);  // one line for the physical GPU, not one per logical GPU
    QCPGraph* g = u->gpuGraph(0);
    QVERIFY(g);
    QCOMPARE(g->name(), QStringLiteral("gpu:0 (NVML, 2 replicas)"));
    QVERIFY(u->legend->hasItemWithPlottable(g));
    QVERIFY2(g->dataCount() >= 2, qPrintable(QString::number(g->dataCount())));  // at the start and at the end
    for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it) QCOMPARE(it->value, 60.0);  // the fake's gpu:0
    // The replicas' computed lines have no data and stay out of the legend.
    QCOMPARE(u->deviceCount(), 2);
    QCOMPARE(u->deviceGraph(0)->dataCount(), 0);
    QVERIFY(!u->legend->hasItemWithPlottable(u->deviceGraph(0)));
    QVERIFY(!u->legend->hasItemWithPlottable(u->deviceGraph(1)));
    const QString tip = u->tooltip(g, g->data()->at(0)->key, 60);
    QVERIFY2(tip.contains(QStringLiteral("60% busy (NVML)")) && tip.contains(QStringLiteral("of 16.0 GiB · 45 °C")) &&
                 tip.contains(QStringLiteral("2 replicas share")),
             qPrintable(tip));
    const QString caption = d->gpuNumbersLabel()->text();
    QVERIFY2(caption.contains(QStringLiteral("NVML: gpu:0 60% busy · memory ")) &&
                 caption.contains(QStringLiteral("of 16.0 GiB · 45 °C (one GPU for 2 replicas)")),
             qPrintable(caption));
    QVERIFY(u->grab().save(dir_.filePath(QStringLiteral("utilization-nvml.png"))));

    // The store has the same figures, as NVML's samples of GPU 0 for 2 replicas.
    auto store = ml::RunStore::open(qEnvironmentVariable("MIRRORLAB_DB").toStdString());
    const auto samples = store.loadDeviceSamples(w.session()->lastRunId().value_or(-1));
    QCOMPARE(static_cast<int>(samples.size()), g->dataCount());
    for (const auto& s : samples) {
      QCOMPARE(s.source, ml::SampleSource::Nvml);
      QCOMPARE(s.gpuReplicas, 2);
      QCOMPARE(s.temperatureC.value_or(-1), 45.0);
      QVERIFY(s.memoryBytes > 0);
    }
  }

  void withoutNvmlEachReplicasComputedLineAndTheReason() {
    qputenv("FAKE_NVML", "0");
    mlui::MainWindow w;
    QVERIFY(w.openProject(uitest::writeProject(dir_, uitest::spiralsProject("gpu:0x2", 3), QStringLiteral("gpu.json"))));
    w.resize(1400, 900);
    w.show();
    const auto f = uitest::trainInWindow(w);
    QVERIFY2(f.status == ml::RunStatus::Finished, f.message.c_str());
    auto* d = w.dashboard();
    d->render();
    auto* u = d->utilizationChart();
    QCOMPARE(u->title(), QStringLiteral("Utilization per device"));
    QCOMPARE(u->gpuCount(), 0);
    QVERIFY(u->deviceGraph(0)->dataCount() > 0);
    QVERIFY(u->deviceGraph(1)->dataCount() > 0);
    QVERIFY(u->legend->hasItemWithPlottable(u->deviceGraph(1)));
    const QString caption = d->gpuNumbersLabel()->text();
    QVERIFY2(caption.contains(QStringLiteral("compute time / step time per replica")) &&
                 caption.contains(QStringLiteral("NVML cannot be read (fake plugin: FAKE_NVML=0, no NVML)")),
             qPrintable(caption));
  }
};

QTEST_MAIN(GpuDashboardTest)
#include "test_gpu_dashboard.moc"
