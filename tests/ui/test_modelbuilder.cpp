// The model builder: adding through the palette, undo/redo, editing arguments, reordering,
// a layer that does not fit, and the mirrored copies per device.
#include <QApplication>
#include <QCheckBox>
#include <QClipboard>
#include <QFileInfo>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QSpinBox>
#include <QTableWidget>
#include <QUndoStack>

#include "MainWindow.h"
#include "MirroredCopiesWidget.h"
#include "ModelBuilderView.h"
#include "ProjectDocument.h"
#include "UiTestUtil.h"
#include "distribute/MirroredStrategy.h"
#include "nn/Precision.h"
#include "nn/Sequential.h"
#include "nn/Summary.h"

class ModelBuilderTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;

  static int64_t total(mlui::MainWindow& w) { return w.modelBuilder()->analysis().totalParams; }

 private Q_SLOTS:
  void initTestCase() { uitest::isolate(dir_); }

  void paletteDoubleClickAddsADenseAndUndoRemovesIt() {
    mlui::MainWindow w;
    w.openInitialProject();
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    auto* palette = w.findChild<QListWidget*>(QStringLiteral("Palette"));
    auto* stack = w.findChild<QListWidget*>(QStringLiteral("LayerStack"));
    stack->setCurrentRow(2);  // insert after the last layer
    QListWidgetItem* dense = palette->findItems(QStringLiteral("Dense"), Qt::MatchExactly).value(0);
    QVERIFY(dense);
    const QRect r = palette->visualItemRect(dense);
    // A real double-click: press, release, then the double-click event on the same item.
    QTest::mouseClick(palette->viewport(), Qt::LeftButton, {}, r.center());
    QTest::mouseDClick(palette->viewport(), Qt::LeftButton, {}, r.center());
    // Dense(64, relu) after Dense(10): 10 * 64 + 64 = 704 more parameters.
    QCOMPARE(stack->count(), 4);
    QCOMPARE(w.modelBuilder()->summaryTable()->rowCount(), 4);
    QCOMPARE(w.modelBuilder()->summaryTable()->item(3, 1)->text(), QStringLiteral("(None, 64)"));
    QCOMPARE(w.modelBuilder()->summaryTable()->item(3, 2)->text(), QStringLiteral("704"));
    QCOMPARE(total(w), int64_t(101770 + 704));
    QVERIFY(w.modelBuilder()->totalsText().contains(QStringLiteral("102,474")));
    QVERIFY(w.document()->isModified());

    w.document()->undoStack()->undo();
    QCOMPARE(stack->count(), 3);
    QCOMPARE(total(w), int64_t(101770));
    QVERIFY(w.modelBuilder()->totalsText().contains(QStringLiteral("101,770")));
    QVERIFY(!w.document()->isModified());
    w.document()->undoStack()->redo();
    QCOMPARE(total(w), int64_t(102474));
  }

  void inspectorEditsArgumentsAsOneUndoStep() {
    mlui::MainWindow w;
    w.openInitialProject();
    w.show();
    w.modelBuilder()->selectLayer(1);  // dense: 128 units
    auto* units = w.modelBuilder()->findChild<QSpinBox*>(QStringLiteral("arg_units"));
    QVERIFY(units);
    QCOMPARE(units->value(), 128);
    units->setValue(65);
    units->setValue(64);  // two edits of the same field merge into one undo step
    // 784 * 64 + 64 + 64 * 10 + 10 = 50,890
    QCOMPARE(total(w), int64_t(50890));
    QCOMPARE(w.document()->undoStack()->count(), 1);
    w.document()->undoStack()->undo();
    QCOMPARE(total(w), int64_t(101770));
    QCOMPARE(units->value(), 128);
  }

  void aLayerThatDoesNotFitShowsItsReason() {
    mlui::MainWindow w;
    w.openInitialProject();
    w.showPage(mlui::MainWindow::ModelPage);  // a first run opens on the welcome page
    w.show();
    w.modelBuilder()->removeLayer(0);  // no Flatten: Dense gets (28, 28)
    const auto& a = w.modelBuilder()->analysis();
    QVERIFY(!a.ok);
    QCOMPARE(a.errorLayer, 0);
    QVERIFY2(QString::fromStdString(a.rows[0].error).contains(QStringLiteral("Flatten")), a.rows[0].error.c_str());
    auto* error = w.findChild<QLabel*>(QStringLiteral("ModelError"));
    QVERIFY(error->isVisible());
    QVERIFY(error->text().contains(QStringLiteral("expects a flat input")));
    auto* stack = w.findChild<QListWidget*>(QStringLiteral("LayerStack"));
    QVERIFY(stack->item(0)->toolTip().contains(QStringLiteral("add a Flatten layer")));
    QCOMPARE(w.modelBuilder()->summaryTable()->item(0, 0)->background().color(), QColor(0xfd, 0xec, 0xea));
    QCOMPARE(w.modelBuilder()->summaryTable()->item(1, 1)->text(), QStringLiteral("?"));
    // Putting a Flatten back at the top fixes it.
    w.modelBuilder()->addLayer(QStringLiteral("Flatten"), 0);
    QVERIFY(w.modelBuilder()->analysis().ok);
    QCOMPARE(total(w), int64_t(101770));
    QVERIFY(!error->isVisible());
  }

  // A CNN in the builder: a Conv2D on (28, 28) is red with the fix; with (28, 28, 1) it has Keras'
  // shape and count; a kernel larger than its input is red with the reason; BatchNormalization's
  // inspector explains the statistics choice in one sentence.
  void convolutionalLayersShowShapesReasonsAndTheStatisticsChoice() {
    mlui::MainWindow w;
    w.openInitialProject();
    w.showPage(mlui::MainWindow::ModelPage);
    w.show();
    w.modelBuilder()->addLayer(QStringLiteral("Conv2D"), 0);
    auto a = w.modelBuilder()->analysis();
    QVERIFY(!a.ok);
    QCOMPARE(a.errorLayer, 0);
    QVERIFY2(QString::fromStdString(a.rows[0].error).contains(QStringLiteral("[28, 28, 1]")), a.rows[0].error.c_str());
    QCOMPARE(w.modelBuilder()->summaryTable()->item(0, 0)->background().color(), QColor(0xfd, 0xec, 0xea));
    auto* shape = w.modelBuilder()->inputShapeEdit();
    shape->setText(QStringLiteral("28, 28, 1"));
    Q_EMIT shape->editingFinished();
    a = w.modelBuilder()->analysis();
    QVERIFY2(a.ok, a.error.c_str());
    QCOMPARE(w.modelBuilder()->summaryTable()->item(0, 1)->text(), QStringLiteral("(None, 26, 26, 32)"));
    QCOMPARE(w.modelBuilder()->summaryTable()->item(0, 2)->text(), QStringLiteral("320"));
    QCOMPARE(a.rows[0].name, std::string("conv2d"));
    // Conv 320 + Flatten + Dense(26*26*32 -> 128) + Dense(10).
    QCOMPARE(total(w), int64_t(320 + 21632 * 128 + 128 + 1290));
    // Activations dominate the memory per replica: the analysis is the model's own count.
    ml::Sequential m(w.document()->project().model);
    QCOMPARE(a.activationBytes, static_cast<double>(m.activationBytes(a.perReplicaBatch)));
    QVERIFY(a.activationBytes > a.paramBytes);

    w.modelBuilder()->selectLayer(0);
    auto* kernel = w.modelBuilder()->findChild<QLineEdit*>(QStringLiteral("arg_kernel_size"));
    QVERIFY(kernel);
    QCOMPARE(kernel->text(), QStringLiteral("3"));
    kernel->setText(QStringLiteral("30"));
    Q_EMIT kernel->editingFinished();
    a = w.modelBuilder()->analysis();
    QVERIFY(!a.ok);
    QCOMPARE(a.errorLayer, 0);
    QVERIFY2(QString::fromStdString(a.rows[0].error).contains(QStringLiteral("larger than its input (None, 28, 28, 1)")),
             a.rows[0].error.c_str());
    w.document()->undoStack()->undo();
    QVERIFY(w.modelBuilder()->analysis().ok);

    w.modelBuilder()->addLayer(QStringLiteral("BatchNormalization"), 1);
    QCOMPARE(w.modelBuilder()->summaryTable()->item(1, 2)->text(), QStringLiteral("128"));
    w.modelBuilder()->selectLayer(1);
    auto* hint = w.modelBuilder()->findChild<QLabel*>(QStringLiteral("BatchNormStatisticsHint"));
    QVERIFY(hint);
    QTRY_VERIFY(hint->isVisible());  // a widget added to a shown layout appears on the next event loop pass
    QVERIFY(hint->text().contains(QStringLiteral("its own share of the batch")));
    QVERIFY(hint->text().contains(QStringLiteral("N devices train exactly like one")));
  }

  void reordersLayers() {
    mlui::MainWindow w;
    w.openInitialProject();
    w.show();
    w.modelBuilder()->moveLayer(2, 1);  // Dense(10) before Dense(128): 784*10+10 + 10*128+128
    QCOMPARE(w.document()->project().model.layers[1].as<ml::DenseSpec>()->units, int64_t(10));
    QCOMPARE(total(w), int64_t(7850 + 1408));
    w.document()->undoStack()->undo();
    QCOMPARE(total(w), int64_t(101770));
  }

  void showsOneMirroredCopyPerDevice() {
    mlui::MainWindow w;
    w.openInitialProject();
    w.show();
    auto* copies = w.findChild<mlui::MirroredCopiesWidget*>(QStringLiteral("MirroredCopies"));
    QCOMPARE(copies->tileCount(), 2);  // 2 layers with weights x 1 device
    ml::Project p = w.document()->project();
    p.distribute.devices = ml::parseDevices("cpu:4");
    w.document()->edit(QStringLiteral("devices"), p);
    QCOMPARE(copies->tileCount(), 8);
    QCOMPARE(w.modelBuilder()->analysis().replicas, 4);
    QCOMPARE(w.modelBuilder()->analysis().perReplicaBatch, int64_t(32));  // 128 global / 4
  }

  // The Devices screen's Workers setting edits distribute.workers (undoable), says workers x local
  // replicas, and "Copy the command" puts the mpirun line for a cluster on the clipboard.
  void workersSettingWritesTheProjectAndCopiesTheMpirunLine() {
    mlui::MainWindow w;
    w.openInitialProject();
    w.show();
    ml::Project p = w.document()->project();
    p.distribute.devices = ml::parseDevices("cpu:2");
    w.document()->edit(QStringLiteral("devices"), p);
    auto* workers = w.findChild<QSpinBox*>(QStringLiteral("WorkerCount"));
    auto* info = w.findChild<QLabel*>(QStringLiteral("WorkersInfo"));
    auto* copy = w.findChild<QPushButton*>(QStringLiteral("CopyMpirunCommand"));
    QVERIFY(workers && info && copy);
    QCOMPARE(workers->value(), 1);
    workers->setValue(3);
    QCOMPARE(w.document()->project().distribute.workers, 3);
    QVERIFY2(info->text().contains(QStringLiteral("3 workers × 2 local replica(s) = 6 replicas in all")),
             qPrintable(info->text()));
    // The Training screen's plan splits each batch over all 6 replicas.
    auto* sentence = w.findChild<QLabel*>(QStringLiteral("PlanSentence"));
    QVERIFY(sentence);
    QVERIFY2(sentence->text().startsWith(QStringLiteral("3 workers × 2 local replica(s) (6 in all, under mpirun")),
             qPrintable(sentence->text()));
    QVERIFY2(sentence->text().contains(QStringLiteral("6 replicas x")), qPrintable(sentence->text()));
    QApplication::clipboard()->clear();
    copy->click();
    const QString line = QApplication::clipboard()->text();
    // The project's whole path (the shell may start anywhere) and a HOSTFILE the text explains; Train
    // itself starts the workers on this machine, as the text says.
    QVERIFY2(line.startsWith(QStringLiteral("mpirun -np 3 --hostfile HOSTFILE --bind-to none mirrorlab-cli train '%1'")
                                 .arg(QFileInfo(w.document()->path()).absoluteFilePath())),
             qPrintable(line));
    QVERIFY2(QFileInfo(w.document()->path()).isAbsolute() && QFileInfo::exists(w.document()->path()),
             qPrintable(w.document()->path()));
    QVERIFY2(info->text().contains(QStringLiteral("Train starts the workers on this machine")) &&
                 info->text().contains(QStringLiteral("HOSTFILE naming the machines")) &&
                 !info->text().contains(QStringLiteral("from the command line")),
             qPrintable(info->text()));
    QVERIFY2(line.endsWith(QStringLiteral(" --devices cpu:2")), qPrintable(line));
    w.document()->undoStack()->undo();
    QCOMPARE(workers->value(), 1);
    QCOMPARE(w.document()->project().distribute.workers, 1);
  }

  // "Send the gradients as bfloat16" on the Devices screen: the project's allreduce_dtype, said in
  // the plan sentence, and undoable.
  void bfloat16OnTheWireIsAProjectSetting() {
    mlui::MainWindow w;
    w.openInitialProject();
    w.show();
    ml::Project p = w.document()->project();
    p.distribute.devices = ml::parseDevices("cpu:2");
    w.document()->edit(QStringLiteral("devices"), p);
    auto* wire = w.findChild<QCheckBox*>(QStringLiteral("allreduceBfloat16"));
    QVERIFY(wire && wire->isEnabled() && !wire->isChecked());
    wire->click();
    QVERIFY(w.document()->project().distribute.allreduceDtype == ml::AllReduceDtype::Bfloat16);
    QCOMPARE(w.document()->project().toJson()["distribute"]["allreduce_dtype"], "bfloat16");
    bool said = false;
    for (auto* l : w.findChildren<QLabel*>()) said = said || l->text().contains(QStringLiteral("Gradients cross as bfloat16"));
    QVERIFY(said);
    w.document()->undoStack()->undo();
    QVERIFY(!wire->isChecked());
    QVERIFY(w.document()->project().distribute.allreduceDtype == ml::AllReduceDtype::Float32);
    // CPU devices across workers send float32 (MPI): the box is greyed out there.
    p = w.document()->project();
    p.distribute.workers = 2;
    w.document()->edit(QStringLiteral("workers"), p);
    QVERIFY(!wire->isEnabled());
  }

  // "TF32 on GPUs" on the Devices screen is the project's distribute.tf32: on CPU devices it is off
  // and greyed out, except to untick a project that has it, and the edit can be undone.
  void tf32IsAGpuSettingOfTheProject() {
    mlui::MainWindow w;
    w.openInitialProject();
    w.show();
    ml::Project p = w.document()->project();
    p.distribute.devices = ml::parseDevices("cpu:2");
    w.document()->edit(QStringLiteral("devices"), p);
    auto* tf32 = w.findChild<QCheckBox*>(QStringLiteral("tf32"));
    QVERIFY(tf32 && !tf32->isEnabled() && !tf32->isChecked());
    p.distribute.tf32 = true;
    w.document()->edit(QStringLiteral("tf32"), p);
    QVERIFY(tf32->isEnabled() && tf32->isChecked());
    tf32->click();
    QVERIFY(!w.document()->project().distribute.tf32);
    QVERIFY(!tf32->isEnabled());
    w.document()->undoStack()->undo();
    QVERIFY(w.document()->project().distribute.tf32);
    QVERIFY(tf32->isChecked());
  }

  // Ticking "Shard the optimizer update" on the Devices screen divides the optimizer state in the
  // live summary by the replicas: the figure is the largest share a real strategy allocates.
  void shardedOptimizerStateIsOneReplicasShare() {
    mlui::MainWindow w;
    w.openInitialProject();
    w.show();
    ml::Project p = w.document()->project();
    p.distribute.devices = ml::parseDevices("cpu:3");
    p.training.optimizer.kind = ml::OptimizerKind::Adam;
    w.document()->edit(QStringLiteral("devices"), p);
    auto* memory = w.findChild<QLabel*>(QStringLiteral("MemoryPerReplica"));
    const double full = static_cast<double>(w.modelBuilder()->analysis().totalParams) * 4 * 2;
    QVERIFY2(memory->text().contains(QString::fromStdString(ml::formatBytes(full))), qPrintable(memory->text()));
    auto* shard = w.findChild<QCheckBox*>(QStringLiteral("shardOptimizer"));
    QVERIFY(shard && shard->isEnabled() && !shard->isChecked());
    shard->click();
    QVERIFY(w.document()->project().distribute.shardOptimizer);
    // The real allocation: a strategy with the project's options, each replica's Adam slots.
    const auto& d = w.document()->project().distribute;
    ml::StrategyOptions so;
    so.devices = d.devices;
    so.bucketBytes = d.bucketBytes;
    so.shardOptimizer = true;
    ml::MirroredStrategy s(w.document()->project().model, ml::Loss::make(ml::LossKind::SparseCategoricalCrossentropy, false),
                           ml::MetricKind::Accuracy, w.document()->project().training.optimizer, so);
    int64_t most = 0;
    for (int r = 0; r < 3; ++r) most = std::max(most, static_cast<int64_t>(s.optimizerSlots(r)[0].size()));
    const double bytes = static_cast<double>(most) * 4 * 2;
    QVERIFY(bytes < full / 2.9 && bytes > full / 3.1);
    QCOMPARE(w.modelBuilder()->analysis().optimizerBytes, bytes);
    QVERIFY2(memory->text().contains(QString::fromStdString(ml::formatBytes(bytes))), qPrintable(memory->text()));
    QVERIFY(memory->text().contains(QStringLiteral("sharded: 1/3 per replica")));
    w.document()->undoStack()->undo();
    QVERIFY(!shard->isChecked());
    QCOMPARE(w.modelBuilder()->analysis().optimizerBytes, full);
  }

  // A mixed policy adds its working copies to the live summary's memory: the model's own figure at
  // the per-replica batch, named with the policy; float32 adds none.
  void mixedPrecisionWorkingCopiesAreInTheMemoryPerReplica() {
    mlui::MainWindow w;
    w.openInitialProject();
    w.show();
    auto* memory = w.findChild<QLabel*>(QStringLiteral("MemoryPerReplica"));
    QVERIFY(!memory->text().contains(QStringLiteral("working copies")));
    QCOMPARE(w.modelBuilder()->analysis().lowPrecisionBytes, 0.0);
    ml::Project p = w.document()->project();
    p.training.precision = ml::Precision::MixedBfloat16;
    w.document()->edit(QStringLiteral("precision"), p);
    const auto& a = w.modelBuilder()->analysis();
    ml::Sequential m(p.model);
    ml::applyPrecision(m, ml::Precision::MixedBfloat16);
    const double bytes = static_cast<double>(m.lowPrecisionBytes(a.perReplicaBatch));
    QVERIFY(bytes > 0);
    QCOMPARE(a.lowPrecisionBytes, bytes);
    QVERIFY2(memory->text().contains(QStringLiteral("mixed_bfloat16 working copies ") +
                                     QString::fromStdString(ml::formatBytes(bytes))),
             qPrintable(memory->text()));
    QVERIFY2(memory->text().contains(QString::fromStdString(ml::formatBytes(a.totalBytes()))), qPrintable(memory->text()));
  }
};

QTEST_MAIN(ModelBuilderTest)
#include "test_modelbuilder.moc"
