// The studio's second walk, as a new user with their own CSV files: the Training screen's loss and
// metrics with the data's labels, Fit to data choosing the last layer and the loss together, a
// binary CSV trained with binary cross-entropy, core messages that name fields the screens have,
// the Model screen's counts against `mirrorlab-cli summary`, and the dashboard's figures against
// the stored run's.
#include <QAbstractButton>
#include <QCheckBox>
#include <QComboBox>
#include <QDirIterator>
#include <QLabel>
#include <QLineEdit>
#include <QProcess>
#include <QPushButton>
#include <QRegularExpression>
#include <QSpinBox>

#include "Field.h"
#include "FitBanner.h"
#include "ModelBuilderView.h"
#include "ProjectDocument.h"
#include "RunHeadline.h"
#include "TrainingSettingsView.h"
#include "UiTestUtil.h"
#include "charts/MetricChart.h"
#include "nn/BatchNorm.h"
#include "nn/Summary.h"
#include "project/LayerJson.h"
#include "random/Rng.h"
#include "store/RunFigures.h"
#include "welcome/CsvImport.h"

class FitFiguresTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;

  // A CSV of 30 features and 0/1 labels (the label follows the sum of the first five columns).
  QString binaryCsv() {
    const QString path = dir_.filePath(QStringLiteral("tumours.csv"));
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly)) return {};
    QStringList header;
    for (int c = 0; c < 30; ++c) header << QStringLiteral("f%1").arg(c);
    f.write((header.join(QLatin1Char(',')) + QStringLiteral(",diagnosis\n")).toUtf8());
    ml::Rng rng(5);
    for (int r = 0; r < 300; ++r) {
      QStringList row;
      double sum = 0;
      for (int c = 0; c < 30; ++c) {
        const double v = rng.uniform(-1, 1) * (c + 1) * 10;  // columns of different scales
        if (c < 5) sum += v / (c + 1);
        row << QString::number(v, 'f', 3);
      }
      f.write((row.join(QLatin1Char(',')) + (sum > 0 ? QStringLiteral(",1\n") : QStringLiteral(",0\n"))).toUtf8());
    }
    return path;
  }

 private Q_SLOTS:
  void initTestCase() {
    qRegisterMetaType<ml::RunFinished>();
    uitest::isolate(dir_);
  }

  // Choosing binary_crossentropy for three classes: the Training screen names the labels and the
  // misfit, Train is off with the reason in the dashboard's title, and Fit to data chooses a softmax
  // per class with sparse_categorical_crossentropy.
  void theLossIsChosenOnTheTrainingScreenAndFitToDataFitsBoth() {
    mlui::MainWindow w;
    QVERIFY(w.openProject(uitest::writeProject(dir_, uitest::spiralsProject(), QStringLiteral("spirals3.json"))));
    w.show();
    auto* training = w.trainingView();
    auto* loss = training->lossBox();
    QCOMPARE(loss->currentData().toString(), QStringLiteral("sparse_categorical_crossentropy"));
    QVERIFY2(training->lossFitLabel()->text().contains(QStringLiteral("gives integer class labels 0-2 (3 classes)")),
             qPrintable(training->lossFitLabel()->text()));
    loss->setCurrentIndex(loss->findData(QStringLiteral("binary_crossentropy")));
    QCOMPARE(ml::lossText(w.document()->project().training), std::string("binary_crossentropy"));
    QVERIFY2(training->lossFitLabel()->text().contains(QStringLiteral("binary_crossentropy takes 0/1 labels")),
             qPrintable(training->lossFitLabel()->text()));
    QVERIFY(!w.dashboard()->trainAction()->isEnabled());
    const QString title = w.dashboard()->headline()->title()->text();
    QVERIFY2(title.startsWith(QStringLiteral("Train is off")) && title.contains(QStringLiteral("takes 0/1 labels")),
             qPrintable(title));
    // Fit to data (the Model screen's banner), once: both chosen, and it trains.
    auto* banner = w.modelBuilder()->fitBanner();
    QVERIFY(!banner->check().fits());
    banner->fitToData();
    const ml::Project fitted = w.document()->project();
    QCOMPARE(ml::lossText(fitted.training), std::string("sparse_categorical_crossentropy"));
    QCOMPARE(fitted.model.layers.back().as<ml::DenseSpec>()->units, int64_t{3});
    QVERIFY(banner->check().fits());
    QVERIFY(w.dashboard()->trainAction()->isEnabled());
    QVERIFY2(w.dashboard()->headline()->title()->text().contains(QStringLiteral("press Train")),
             qPrintable(w.dashboard()->headline()->title()->text()));
    // The metric and the checkpoints are settings of the project too.
    training->metricBox()->setCurrentIndex(training->metricBox()->findData(QStringLiteral("mae")));
    QCOMPARE(w.document()->project().training.metrics.front(), std::string("mae"));
    training->checkpointEveryBox()->setValue(25);
    training->checkpointUnitBox()->setCurrentIndex(1);
    training->checkpointKeepBox()->setValue(2);
    const auto& t = w.document()->project().training;
    QCOMPARE(t.checkpointEvery, int64_t(25));
    QVERIFY(t.checkpointInSteps);
    QCOMPARE(t.checkpointKeep, 2);
  }

  // Every place core's messages send a person to on the Training screen is a field it has.
  void coreMessagesNameFieldsTheTrainingScreenHas() {
    mlui::MainWindow w;
    w.openInitialProject();
    QStringList shown;
    for (auto* l : w.trainingView()->findChildren<QLabel*>()) shown << l->text();
    for (auto* b : w.trainingView()->findChildren<QAbstractButton*>()) shown << b->text();
    for (const char* key : {"training.loss",
                            "training.from_logits",
                            "training.metrics",
                            "training.epochs",
                            "training.batch_size",
                            "training.per_device_batch",
                            "training.accumulate",
                            "training.seed",
                            "training.lr_scaling",
                            "training.lr_reference_batch",
                            "training.warmup_epochs",
                            "training.lr_decay_epochs",
                            "training.lr_decay_factor",
                            "training.precision",
                            "training.loss_scale",
                            "training.loss_scale_growth_steps",
                            "training.optimizer.name",
                            "training.optimizer.learning_rate",
                            "training.optimizer.momentum",
                            "training.optimizer.beta_1",
                            "training.optimizer.beta_2",
                            "training.optimizer.rho",
                            "training.optimizer.epsilon",
                            "training.checkpoint_every",
                            "training.checkpoint_keep"}) {
      const QString words = QString::fromStdString(ml::fieldInWords(key));  // "Training screen › Loss (loss in ...)"
      QVERIFY2(words.startsWith(QStringLiteral("Training screen › ")), qPrintable(words));
      const QString field = words.mid(18).section(QStringLiteral(" ("), 0, 0);
      QVERIFY2(shown.contains(field),
               qPrintable(QStringLiteral("%1 names '%2', which the Training screen lacks").arg(key, field)));
    }
  }

  // A CSV of 0/1 labels imports as one sigmoid output with binary cross-entropy, trains so, and
  // Fit to data on the loaded data leaves it as it is.
  void aBinaryCsvTrainsWithBinaryCrossEntropy() {
    const QString csv = binaryCsv();
    mlui::MainWindow w;
    w.show();
    ml::Project p = mlui::csvProject(csv);
    QCOMPARE(ml::lossText(p.training), std::string("binary_crossentropy"));
    QCOMPARE(p.model.layers.back().as<ml::DenseSpec>()->units, int64_t{1});
    QVERIFY(p.model.layers.back().as<ml::DenseSpec>()->activation == ml::Act::Sigmoid);
    p.training.epochs = 2;
    p.training.batchSize = 32;
    w.document()->reset(p);
    std::optional<int64_t> runId;
    const ml::RunFinished f = uitest::trainInWindow(w, 0, &runId);
    QCOMPARE(f.status, ml::RunStatus::Finished);
    QVERIFY(runId.has_value());
    // Now the data is loaded: the fit check sees 0/1 labels and the model fits them as it is.
    QTRY_VERIFY(w.modelBuilder()->fitBanner()->check().fits());
    QVERIFY2(w.trainingView()->lossFitLabel()->text().contains(QStringLiteral("gives 0/1 labels (2 classes)")),
             qPrintable(w.trainingView()->lossFitLabel()->text()));
    auto store = ml::RunStore::open(qgetenv("MIRRORLAB_DB").toStdString());
    const auto run = store.loadRun(*runId);
    QVERIFY2(QString::fromStdString(run.configJson).contains(QStringLiteral("\"loss\":\"binary_crossentropy\"")),
             run.configJson.c_str());
    QVERIFY(run.summary.finalValMetric && *run.summary.finalValMetric > 0.6);  // binary accuracy, learning
  }

  // The Model screen counts parameters as `mirrorlab-cli summary` does, for every shipped example
  // (BatchNormalization's moving statistics are non-trainable).
  void modelScreenCountsEqualTheCliSummary() {
    mlui::MainWindow w;
    int examples = 0;
    QDirIterator it(QStringLiteral(MIRRORLAB_SOURCE_DIR "/projects"), {QStringLiteral("*.json")}, QDir::Files);
    while (it.hasNext()) {
      const QString path = it.next();
      QVERIFY(w.openProject(path));
      QProcess cli;
      cli.start(QStringLiteral(MIRRORLAB_CLI), {QStringLiteral("summary"), path});
      QVERIFY(cli.waitForFinished(60000));
      QCOMPARE(cli.exitCode(), 0);
      const QString out = QString::fromUtf8(cli.readAllStandardOutput());
      auto number = [](const QString& text, const QString& label) {
        const auto m = QRegularExpression(label + QStringLiteral(":? ([0-9,]+)")).match(text);
        return m.hasMatch() ? m.captured(1) : QStringLiteral("missing");
      };
      const QString shown = w.modelBuilder()->totalsText();
      const std::pair<QString, QString> labels[] = {{QStringLiteral("Total params"), QStringLiteral("Total params")},
                                                    {QStringLiteral("Trainable"), QStringLiteral("\nTrainable params")},
                                                    {QStringLiteral("Non-trainable"), QStringLiteral("Non-trainable params")}};
      for (const auto& [onScreen, inSummary] : labels)
        QVERIFY2(number(shown, onScreen) == number(out, inSummary) && number(out, inSummary) != QLatin1String("missing"),
                 qPrintable(path + QStringLiteral(", ") + onScreen + QStringLiteral(": ") + number(shown, onScreen) +
                            QStringLiteral(" on the Model screen, ") + number(out, inSummary) + QStringLiteral(" in summary")));
      if (path.endsWith(QLatin1String("fashion-cnn-bn.json")))
        QVERIFY2(shown.contains(QStringLiteral("Non-trainable: 192")), qPrintable(shown));
      ++examples;
    }
    QVERIFY(examples >= 5);
  }

  // After File > Open Example the Input shape field shows the new project's shape, even though it
  // had the focus.
  void theInputShapeFollowsTheOpenedProject() {
    mlui::MainWindow w;
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QVERIFY(w.openProject(QStringLiteral(MIRRORLAB_SOURCE_DIR "/projects/fashion-cnn.json")));
    auto* field = w.modelBuilder()->inputShapeEdit();
    field->setFocus();
    QTRY_VERIFY(field->hasFocus());
    QCOMPARE(field->text(), QStringLiteral("28, 28, 1"));
    QVERIFY(w.openProject(QStringLiteral(MIRRORLAB_SOURCE_DIR "/projects/spirals.json")));
    QCOMPARE(field->text(), QStringLiteral("2"));
  }

  // The dashboard's head after a run: the unequal shards, and the throughput and elapsed time of
  // the run as the store has it (they showed the last smoothed step and another clock).
  void theDashboardShowsTheStoredRunsFigures() {
    mlui::MainWindow w;
    w.show();
    ml::Project p = uitest::spiralsProject("cpu:3", 2);
    p.training.batchSize = 64;
    w.document()->reset(p);
    std::optional<int64_t> runId;
    QCOMPARE(uitest::trainInWindow(w, 0, &runId).status, ml::RunStatus::Finished);
    w.dashboard()->render();
    auto* head = w.dashboard()->headline();
    QVERIFY2(head->title()->text().contains(QStringLiteral("3 replicas × 21-22 = 64 samples per step")),
             qPrintable(head->title()->text()));
    auto store = ml::RunStore::open(qgetenv("MIRRORLAB_DB").toStdString());
    const ml::RunFigures stored = ml::figuresOf(store.loadRun(*runId), store.loadCurves(*runId));
    QCOMPARE(head->figures().steps, stored.steps);
    QCOMPARE(head->figures().samples, stored.samples);
    QCOMPARE(head->throughputLabel()->text(),
             QStringLiteral("%1/s").arg(QString::fromStdString(ml::withThousands(static_cast<int64_t>(stored.samplesPerSec())))));
    QCOMPARE(head->elapsedCaption()->text(), QStringLiteral("Elapsed"));  // not "Elapsed / left" once it ended
    QCOMPARE(head->elapsedLabel()->text(), mlui::durationText(stored.elapsedSeconds));
    QVERIFY2(head->title()->text().endsWith(mlui::durationText(stored.elapsedSeconds)), qPrintable(head->title()->text()));
  }

  // A resumed run's sync check waits for the epoch after the checkpoint, not for epoch 1.
  void aResumedRunWaitsForTheRightEpoch() {
    mlui::MainWindow w;
    w.openInitialProject();
    ml::RunStarted s;
    s.runName = "resumed";
    s.replicas = 2;
    s.totalSteps = 100;
    s.epochs = 4;
    s.resumeRun = 999;  // not in the store: the history is skipped, the run goes on
    s.resumeStep = 50;
    s.resumeEpochsDone = 2;
    w.dashboard()->onEvents({s});
    QVERIFY2(w.dashboard()->syncLabel()->text().contains(QStringLiteral("waiting for the end of epoch 3")),
             qPrintable(w.dashboard()->syncLabel()->text()));
  }

  // A BatchNorm model's validation lags while the moving statistics still hold their start values;
  // the dashboard says how much and until when.
  void batchNormValidationLagIsExplained() {
    mlui::MainWindow w;
    w.show();
    ml::Project p = uitest::spiralsProject("cpu:2", 1);
    p.model.layers = {ml::makeLayerSpec("Dense", {{"units", 16}}), ml::makeLayerSpec("BatchNormalization"),
                      ml::makeLayerSpec("Activation", {{"activation", "relu"}}),
                      ml::makeLayerSpec("Dense", {{"units", 3}, {"activation", "softmax"}})};
    p.training.batchSize = 128;  // 1920 training samples: 15 steps
    w.document()->reset(p);
    QCOMPARE(uitest::trainInWindow(w).status, ml::RunStatus::Finished);
    auto* note = w.dashboard()->batchNormNote();
    QVERIFY(note->isVisibleTo(&w));
    const int left = static_cast<int>(std::lround(ml::movingStatsStartShare(0.99, 15) * 100));  // 86%
    QVERIFY2(note->text().contains(QStringLiteral("after 15 steps still hold %1% of their starting values").arg(left)) &&
                 note->text().contains(QStringLiteral("until about step 459")),
             qPrintable(note->text()));
  }
};

QTEST_MAIN(FitFiguresTest)
#include "test_fitfigures.moc"
