// Training settings, written to the project on every change (undoable, merged per field).
#include "TrainingSettingsView.h"

#include <algorithm>

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QRegularExpressionValidator>
#include <QScrollArea>
#include <QSpinBox>
#include <QVBoxLayout>

#include "DataCache.h"
#include "Error.h"
#include "ModelAnalysis.h"
#include "ProjectDocument.h"
#include "Theme.h"
#include "nn/Summary.h"
#include "project/Settings.h"
#include "train/FitCheck.h"
#include "train/Trainer.h"

namespace mlui {

static QString q(const std::string& s) { return QString::fromStdString(s); }

// Training samples for the plan: the loaded data set when it is cached, else what the data
// section says (exact for generated sets and Fashion-MNIST).
static std::pair<int64_t, bool> trainSamples(const ml::Project& p, const DataCache& cache) {
  if (auto d = cache.peek(p)) return {d->train.size, true};
  const auto& d = p.data;
  if (d.kind == ml::DataKind::FashionMnist) return {60000, true};
  if (ml::generated(d.kind)) return {d.samples - static_cast<int64_t>(static_cast<double>(d.samples) * d.validationSplit), true};
  return {0, false};
}

static QDoubleSpinBox* dspin(double lo, double hi, int decimals, double step, QWidget* parent) {
  auto* s = new QDoubleSpinBox(parent);
  s->setRange(lo, hi);
  s->setDecimals(decimals);
  s->setSingleStep(step);
  return s;
}

TrainingSettingsView::TrainingSettingsView(ProjectDocument* doc, std::shared_ptr<DataCache> cache, QWidget* parent)
    : QWidget(parent), doc_(doc), cache_(std::move(cache)) {
  auto* v = scrollingPage(this, tr("Training"),
                          tr("With N devices each step sees N shards of the batch. Scale the learning rate with the "
                             "global batch, and warm up when the batch is large."));
  QWidget* page = v->parentWidget();

  sentence_ = new QLabel(page);
  sentence_->setObjectName(QStringLiteral("PlanSentence"));
  sentence_->setWordWrap(true);
  sentence_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  setRole(sentence_, "planSentence");
  v->addWidget(sentence_);
  warnings_ = new QLabel(page);
  warnings_->setObjectName(QStringLiteral("PlanWarnings"));
  warnings_->setWordWrap(true);
  warnings_->setTextFormat(Qt::RichText);
  setRole(warnings_, "banner");
  samplesNote_ = new QLabel(page);
  setRole(samplesNote_, "caption");
  v->addWidget(samplesNote_);

  auto* columns = new QHBoxLayout;
  columns->setSpacing(24);
  auto* left = new QFormLayout;
  auto* right = new QFormLayout;
  optForm_ = right;
  for (auto* f : {left, right}) {
    f->setFieldGrowthPolicy(QFormLayout::FieldsStayAtSizeHint);
    f->setLabelAlignment(Qt::AlignRight);
    f->setVerticalSpacing(8);
  }
  epochs_ = new QSpinBox(page);
  epochs_->setRange(1, 100000);
  batch_ = new QSpinBox(page);
  batch_->setRange(1, 1 << 24);
  batch_->setGroupSeparatorShown(true);
  batchMode_ = new QComboBox(page);
  batchMode_->addItem(tr("global (all devices together)"));
  batchMode_->addItem(tr("per device"));
  auto* batchRow = new QHBoxLayout;
  batchRow->addWidget(batch_);
  batchRow->addWidget(batchMode_);
  lr_ = dspin(1e-6, 10.0, 6, 0.0005, page);
  scaling_ = new QComboBox(page);
  scaling_->addItem(tr("none — keep the rate"), QStringLiteral("none"));
  scaling_->addItem(tr("linear — × global batch / reference (Goyal et al.)"), QStringLiteral("linear"));
  scaling_->addItem(tr("square root — × √(global batch / reference)"), QStringLiteral("sqrt"));
  // The closed combo shows the start of the longest choice; its list shows them whole. The two
  // columns then fit a 1024 px window.
  scaling_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  scaling_->setMinimumContentsLength(26);
  refBatch_ = new QSpinBox(page);
  refBatch_->setObjectName(QStringLiteral("ReferenceBatch"));
  refBatch_->setRange(0, 1 << 24);
  refBatch_->setSpecialValueText(tr("the batch size above"));
  refBatch_->setPrefix(tr("global batch "));
  warmup_ = dspin(0, 1000, 2, 0.5, page);
  warmup_->setSuffix(tr(" epochs"));
  decayEpochs_ = new QLineEdit(page);
  decayEpochs_->setObjectName(QStringLiteral("LrDecayEpochs"));
  decayEpochs_->setPlaceholderText(tr("never (or epochs: 3, 7)"));
  decayEpochs_->setValidator(new QRegularExpressionValidator(QRegularExpression(QStringLiteral("[0-9 ,]*")), decayEpochs_));
  decayFactor_ = dspin(0.001, 1.0, 3, 0.05, page);
  decayFactor_->setObjectName(QStringLiteral("LrDecayFactor"));
  decayFactor_->setPrefix(QStringLiteral("× "));
  accumulate_ = new QSpinBox(page);
  accumulate_->setRange(1, 1024);
  accumulate_->setSuffix(tr(" micro-batches"));
  seed_ = new QSpinBox(page);
  seed_->setRange(0, std::numeric_limits<int>::max());
  left->addRow(sectionTitle(tr("Schedule")));
  left->addRow(tr("Epochs"), epochs_);
  left->addRow(tr("Batch size"), batchRow);
  left->addRow(tr("Accumulation"), accumulate_);
  left->addRow(tr("Seed"), seed_);
  left->addRow(sectionTitle(tr("Learning rate")));
  left->addRow(tr("Base rate"), lr_);
  left->addRow(tr("Rate set for"), refBatch_);
  left->addRow(tr("Scaling rule"), scaling_);
  left->addRow(tr("Warm-up"), warmup_);
  left->addRow(tr("Decay after"), decayEpochs_);
  left->addRow(tr("Decay factor"), decayFactor_);
  buildCheckpointRows(left, page);

  optimizer_ = new QComboBox(page);
  optimizer_->addItem(QStringLiteral("Adam"), QStringLiteral("adam"));
  optimizer_->addItem(QStringLiteral("SGD"), QStringLiteral("sgd"));
  optimizer_->addItem(QStringLiteral("RMSprop"), QStringLiteral("rmsprop"));
  momentum_ = dspin(0, 0.999, 3, 0.05, page);
  nesterov_ = new QCheckBox(tr("Nesterov momentum"), page);
  beta1_ = dspin(0, 0.9999, 4, 0.01, page);
  beta2_ = dspin(0, 0.99999, 5, 0.001, page);
  rho_ = dspin(0, 0.9999, 4, 0.01, page);
  epsilon_ = dspin(0, 1, 10, 1e-7, page);
  buildLossRows(right, page);
  right->addRow(sectionTitle(tr("Optimizer")));
  right->addRow(tr("Optimizer"), optimizer_);
  right->addRow(tr("Momentum"), momentum_);
  right->addRow(QString(), nesterov_);
  right->addRow(tr("β₁"), beta1_);
  right->addRow(tr("β₂"), beta2_);
  right->addRow(tr("ρ"), rho_);
  right->addRow(tr("ε"), epsilon_);
  precision_ = new QComboBox(page);
  precision_->setObjectName(QStringLiteral("Precision"));
  precision_->addItem(tr("float32"), QStringLiteral("float32"));
  precision_->addItem(tr("mixed_bfloat16 — bfloat16 compute"), QStringLiteral("mixed_bfloat16"));
  precision_->addItem(tr("mixed_float16 — float16 compute"), QStringLiteral("mixed_float16"));
  lossScaling_ = new QCheckBox(tr("Dynamic loss scaling"), page);
  lossScale_ = dspin(1, 1e9, 0, 1024, page);
  lossScale_->setObjectName(QStringLiteral("LossScale"));
  lossScale_->setPrefix(tr("start at "));
  lossGrowth_ = new QSpinBox(page);
  lossGrowth_->setRange(1, std::numeric_limits<int>::max());
  lossGrowth_->setPrefix(tr("double after "));
  lossGrowth_->setSuffix(tr(" finite steps"));
  right->addRow(sectionTitle(tr("Precision")));
  right->addRow(tr("Precision"), precision_);
  right->addRow(QString(), lossScaling_);
  right->addRow(tr("Loss scale"), lossScale_);
  right->addRow(tr("Loss scale growth"), lossGrowth_);
  columns->addLayout(left);
  columns->addLayout(right);
  columns->addStretch(1);
  v->addLayout(columns);
  // Below the controls: a warning that comes and goes never moves a field under the mouse.
  v->addWidget(warnings_);
  v->addStretch(1);

  auto bindSpin = [this](QSpinBox* s, const QString& what) {
    connect(s, &QSpinBox::valueChanged, this, [this, what] { write(what, what); });
  };
  auto bindD = [this](QDoubleSpinBox* s, const QString& what) {
    connect(s, &QDoubleSpinBox::valueChanged, this, [this, what] { write(what, what); });
  };
  bindSpin(epochs_, tr("epochs"));
  bindSpin(batch_, tr("batch size"));
  bindSpin(accumulate_, tr("accumulation"));
  bindSpin(seed_, tr("seed"));
  bindSpin(refBatch_, tr("reference batch"));
  bindSpin(lossGrowth_, tr("loss scale growth"));
  bindSpin(checkpointEvery_, tr("checkpoint interval"));
  bindSpin(checkpointKeep_, tr("checkpoints kept"));
  connect(fromLogits_, &QCheckBox::toggled, this, [this] { write(tr("loss from logits"), QString()); });
  setToolTips();
  for (auto [s, w] : {std::pair{lr_, tr("learning rate")},
                      {warmup_, tr("warm-up")},
                      {decayFactor_, tr("rate decay factor")},
                      {momentum_, tr("momentum")},
                      {beta1_, tr("beta 1")},
                      {beta2_, tr("beta 2")},
                      {rho_, tr("rho")},
                      {epsilon_, tr("epsilon")},
                      {lossScale_, tr("loss scale")}})
    bindD(s, w);
  for (auto [c, w] : {std::pair{batchMode_, tr("batch mode")},
                      {scaling_, tr("scaling rule")},
                      {optimizer_, tr("optimizer")},
                      {precision_, tr("precision")},
                      {loss_, tr("loss")},
                      {metric_, tr("metric")},
                      {checkpointUnit_, tr("checkpoint interval")}})
    connect(c, &QComboBox::currentIndexChanged, this, [this, w = w] { write(w, QString()); });
  connect(decayEpochs_, &QLineEdit::editingFinished, this,
          [this] { write(tr("rate decay epochs"), QStringLiteral("lr_decay_epochs")); });
  connect(nesterov_, &QCheckBox::toggled, this, [this] { write(tr("Nesterov"), QString()); });
  connect(lossScaling_, &QCheckBox::toggled, this, [this] { write(tr("loss scaling"), QString()); });
  connect(doc_, &ProjectDocument::changed, this, &TrainingSettingsView::refresh);
  refresh();
}

// Loss and metrics, in Keras' names, beside what the data's labels are: the loss is chosen here,
// the last layer on the Model screen, and Fit to data there chooses both together.
void TrainingSettingsView::buildLossRows(QFormLayout* form, QWidget* page) {
  loss_ = new QComboBox(page);
  loss_->setObjectName(QStringLiteral("Loss"));
  for (const char* name :
       {"sparse_categorical_crossentropy", "binary_crossentropy", "categorical_crossentropy", "mean_squared_error"})
    loss_->addItem(QString::fromLatin1(name), QString::fromLatin1(name));
  fromLogits_ = new QCheckBox(tr("Loss from logits"), page);
  fromLogits_->setObjectName(QStringLiteral("FromLogits"));
  fromLogits_->setToolTip(
      tr("The last layer gives raw scores (no softmax or sigmoid) and the loss applies it, as Keras' "
         "from_logits=True: numerically safer for large scores."));
  metric_ = new QComboBox(page);
  metric_->setObjectName(QStringLiteral("Metric"));
  metric_->addItem(tr("accuracy"), QStringLiteral("accuracy"));
  metric_->addItem(tr("mae (mean absolute error)"), QStringLiteral("mae"));
  metric_->setToolTip(
      tr("The metric the dashboard charts and validation reports. With binary_crossentropy, accuracy is "
         "Keras' binary_accuracy (an output above 0.5 is class 1)."));
  lossFit_ = new QLabel(page);
  lossFit_->setObjectName(QStringLiteral("LossFit"));
  lossFit_->setWordWrap(true);
  lossFit_->setMaximumWidth(460);
  lossFit_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  form->addRow(sectionTitle(tr("Loss and metrics")));
  form->addRow(tr("Loss"), loss_);
  form->addRow(QString(), fromLogits_);
  form->addRow(tr("Metrics"), metric_);
  form->addRow(lossFit_);
}

void TrainingSettingsView::buildCheckpointRows(QFormLayout* form, QWidget* page) {
  checkpointEvery_ = new QSpinBox(page);
  checkpointEvery_->setObjectName(QStringLiteral("CheckpointEvery"));
  checkpointEvery_->setRange(1, 1000000);
  checkpointUnit_ = new QComboBox(page);
  checkpointUnit_->setObjectName(QStringLiteral("CheckpointUnit"));
  checkpointUnit_->addItem(tr("epochs"));
  checkpointUnit_->addItem(tr("steps"));
  auto* row = new QHBoxLayout;
  row->addWidget(checkpointEvery_);
  row->addWidget(checkpointUnit_);
  row->addStretch(1);
  checkpointKeep_ = new QSpinBox(page);
  checkpointKeep_->setObjectName(QStringLiteral("CheckpointKeep"));
  checkpointKeep_->setRange(1, 1000);
  checkpointKeep_->setSuffix(tr(" newest"));
  checkpointEvery_->setToolTip(
      tr("How often the run saves a checkpoint (weights, optimizer state, data position): Resume on "
         "the Runs screen goes on from the newest one exactly."));
  checkpointKeep_->setToolTip(tr("Older checkpoints are deleted as new ones are written; the final weights are kept anyway."));
  form->addRow(sectionTitle(tr("Checkpoints")));
  form->addRow(tr("Checkpoint every"), row);
  form->addRow(tr("Checkpoints kept"), checkpointKeep_);
}

// The labels the data gives and whether the loss and the model's last layer take them: the fit
// check's words (the Model screen's banner shows the same).
void TrainingSettingsView::refreshLossFit() {
  const auto& p = doc_->project();
  const auto facts = cache_->facts(p);
  for (int i = 0; i < loss_->count(); ++i) loss_->setItemData(i, QVariant(), Qt::ToolTipRole);
  if (!facts) {
    setRole(lossFit_, "caption");
    lossFit_->setText(tr("Load the data set on the Data screen to see which losses its labels fit."));
    return;
  }
  for (const auto& o : ml::lossOptions(*facts))
    if (const int i = loss_->findData(q(o.name)); i >= 0)
      loss_->setItemData(i, q(o.takes + (o.misfit.empty() ? "" : "; does not fit: " + o.misfit)), Qt::ToolTipRole);
  const ml::FitCheck fc = ml::checkFit(p, *facts);
  QString text = tr("%1 gives %2.").arg(q(facts->name), q(ml::labelsInWords(*facts)));
  if (fc.fits()) {
    setRole(lossFit_, "caption");
    lossFit_->setText(text + tr(" ✓ The loss and the last layer take them."));
    return;
  }
  QStringList problems;
  for (const auto& pr : fc.problems)
    if (pr.where != ml::FitProblem::Where::Input) problems << q(pr.message);
  setRole(lossFit_, problems.isEmpty() ? "caption" : "error");
  lossFit_->setText(problems.isEmpty() ? text : text + QLatin1Char(' ') + problems.join(QLatin1Char(' ')));
}

void TrainingSettingsView::setToolTips() {
  accumulate_->setToolTip(
      tr("Gradient accumulation: run k micro-batches and add their gradients before one all-reduce and one "
         "update. The update sees k times the micro-batch, with the memory of one."));
  warmup_->setToolTip(
      tr("Ramp the learning rate linearly from the base rate to the scaled rate over these epochs: a large "
         "scaled rate from the first step can diverge."));
  decayEpochs_->setToolTip(
      tr("Step decay, as the TensorFlow MirroredStrategy tutorial's decay callback: after each of these epochs the "
         "learning rate is multiplied by the factor below (3, 7 with 0.1: 1e-3, then 1e-4 from epoch 4, 1e-5 from "
         "epoch 8). A lower rate for the last epochs settles the weights; empty keeps the rate."));
  decayFactor_->setToolTip(tr("What the learning rate is multiplied by after each listed epoch (0.1: ten times lower)."));
  scaling_->setToolTip(
      tr("How the learning rate follows the global batch. Linear: rate × (global batch ÷ the batch the rate "
         "was set for); square root: × its square root; none: the rate as set. With the global batch "
         "unchanged every rule keeps the rate."));
  refBatch_->setToolTip(
      tr("The global batch the base rate was chosen for. Left at “the batch size above” it is the Batch size "
         "field: per device, that is the batch of one device; global, the global batch itself."));
  beta1_->setToolTip(tr("Adam's decay of the running mean of the gradients (Keras default 0.9)."));
  beta2_->setToolTip(tr("Adam's decay of the running mean of the squared gradients (Keras default 0.999)."));
  rho_->setToolTip(tr("RMSprop's decay of the running mean of the squared gradients (Keras default 0.9)."));
  epsilon_->setToolTip(tr("Added to the denominator so that a near-zero second moment cannot blow up the step (Keras 1e-7)."));
  momentum_->setToolTip(tr("Share of the previous update added to this one."));
  precision_->setToolTip(
      tr("Keras' mixed-precision policies: Dense and Conv2D layers compute in bfloat16 or float16 (inputs, weights and outputs "
         "rounded, sums in float32); the weights, the optimizer, softmax, the loss and the all-reduce stay float32. "
         "bfloat16 keeps float32's range; float16 loses gradients below 2^-24 and overflows above 65504, which "
         "loss scaling handles. CPU devices."));
  lossScaling_->setToolTip(
      tr("float16 only: multiply the loss by a scale so that small gradients survive, divide the summed gradients by "
         "it; on an inf/NaN gradient skip the update on every replica and halve the scale."));
  lossScale_->setToolTip(tr("The initial loss scale (Keras: 2^15 = 32768)."));
  lossGrowth_->setToolTip(tr("Finite steps in a row after which the loss scale doubles (Keras: 2000)."));
}

void TrainingSettingsView::write(const QString& what, const QString& key) {
  if (refreshing_) return;
  ml::Project p = doc_->project();
  auto& t = p.training;
  t.epochs = epochs_->value();
  t.batchSize = batch_->value();
  t.perDeviceBatch = batchMode_->currentIndex() == 1;
  t.accumulate = accumulate_->value();
  t.seed = static_cast<uint64_t>(seed_->value());
  t.optimizer.learningRate = lr_->value();
  t.lrScaling = ml::lrRuleSetting(scaling_->currentData().toString().toStdString(), "Training screen");
  t.lrReferenceBatch = refBatch_->value();
  t.warmupEpochs = warmup_->value();
  {  // "3, 7" -> [3, 7]: sorted, without repeats or zeros
    std::vector<int64_t> epochs;
    for (const QString& part : decayEpochs_->text().split(QRegularExpression(QStringLiteral("[ ,]+")), Qt::SkipEmptyParts))
      if (const int64_t e = part.toLongLong(); e > 0) epochs.push_back(e);
    std::sort(epochs.begin(), epochs.end());
    epochs.erase(std::unique(epochs.begin(), epochs.end()), epochs.end());
    t.lrDecayEpochs = epochs;
  }
  t.lrDecayFactor = decayFactor_->value();
  t.optimizer.kind = ml::optimizerSetting(optimizer_->currentData().toString().toStdString(), "Training screen");
  t.optimizer.momentum = momentum_->value();
  t.optimizer.nesterov = nesterov_->isChecked();
  t.optimizer.beta1 = beta1_->value();
  t.optimizer.beta2 = beta2_->value();
  t.optimizer.rho = rho_->value();
  t.optimizer.epsilon = epsilon_->value();
  t.precision = ml::precisionSetting(precision_->currentData().toString().toStdString(), "Training screen");
  t.lossScaling = lossScaling_->isChecked();
  t.lossScale = lossScale_->value();
  t.lossScaleGrowthSteps = lossGrowth_->value();
  ml::setLoss(t, loss_->currentData().toString().toStdString(), "Training screen");  // the list's names only
  t.fromLogits = fromLogits_->isChecked();
  // The first metric is the one the screens chart; any others in the file stay.
  const std::string metric = metric_->currentData().toString().toStdString();
  if (t.metrics.empty())
    t.metrics = {metric};
  else
    t.metrics.front() = metric;
  t.checkpointEvery = checkpointEvery_->value();
  t.checkpointInSteps = checkpointUnit_->currentIndex() == 1;
  t.checkpointKeep = checkpointKeep_->value();
  doc_->edit(tr("Change %1").arg(what), p, key.isEmpty() ? QString() : QStringLiteral("training.") + key);
}

void TrainingSettingsView::refresh() {
  refreshing_ = true;
  const auto& p = doc_->project();
  const auto& t = p.training;
  epochs_->setValue(t.epochs);
  batch_->setValue(static_cast<int>(t.batchSize));
  batchMode_->setCurrentIndex(t.perDeviceBatch ? 1 : 0);
  accumulate_->setValue(t.accumulate);
  seed_->setValue(static_cast<int>(t.seed));
  lr_->setValue(t.optimizer.learningRate);
  scaling_->setCurrentIndex(std::max(0, scaling_->findData(QString::fromLatin1(ml::toString(t.lrScaling)))));
  refBatch_->setValue(static_cast<int>(t.lrReferenceBatch));
  warmup_->setValue(t.warmupEpochs);
  {
    QStringList epochs;
    for (const int64_t e : t.lrDecayEpochs) epochs << QString::number(e);
    decayEpochs_->setText(epochs.join(QStringLiteral(", ")));
  }
  decayFactor_->setValue(t.lrDecayFactor);
  optimizer_->setCurrentIndex(std::max(0, optimizer_->findData(QLatin1String(ml::toString(t.optimizer.kind)))));
  momentum_->setValue(t.optimizer.momentum);
  nesterov_->setChecked(t.optimizer.nesterov);
  beta1_->setValue(t.optimizer.beta1);
  beta2_->setValue(t.optimizer.beta2);
  rho_->setValue(t.optimizer.rho);
  epsilon_->setValue(t.optimizer.epsilon);
  precision_->setCurrentIndex(std::max(0, precision_->findData(QString::fromLatin1(ml::toString(t.precision)))));
  lossScaling_->setChecked(t.lossScaling);
  lossScale_->setValue(t.lossScale);
  lossGrowth_->setValue(static_cast<int>(std::min<int64_t>(t.lossScaleGrowthSteps, std::numeric_limits<int>::max())));
  const QString loss = q(ml::lossText(t));
  if (loss_->findData(loss) < 0) loss_->addItem(loss, loss);  // an alias the file used ("mse")
  loss_->setCurrentIndex(loss_->findData(loss));
  fromLogits_->setChecked(t.fromLogits);
  const QString metric = t.metrics.empty() ? QStringLiteral("accuracy") : q(t.metrics.front());
  if (metric_->findData(metric) < 0) metric_->addItem(metric, metric);
  metric_->setCurrentIndex(metric_->findData(metric));
  checkpointEvery_->setValue(static_cast<int>(std::min<int64_t>(t.checkpointEvery, checkpointEvery_->maximum())));
  checkpointUnit_->setCurrentIndex(t.checkpointInSteps ? 1 : 0);
  checkpointKeep_->setValue(t.checkpointKeep);
  const bool half = t.precision == ml::Precision::MixedFloat16;
  optForm_->setRowVisible(lossScaling_, half);
  optForm_->setRowVisible(lossScale_, half);
  optForm_->setRowVisible(lossGrowth_, half);
  lossScale_->setEnabled(t.lossScaling);
  lossGrowth_->setEnabled(t.lossScaling);
  const QString opt = QLatin1String(ml::toString(t.optimizer.kind));
  optForm_->setRowVisible(momentum_, opt != QLatin1String("adam"));
  optForm_->setRowVisible(nesterov_, opt == QLatin1String("sgd"));
  optForm_->setRowVisible(beta1_, opt == QLatin1String("adam"));
  optForm_->setRowVisible(beta2_, opt == QLatin1String("adam"));
  optForm_->setRowVisible(rho_, opt == QLatin1String("rmsprop"));
  optForm_->setRowVisible(epsilon_, opt != QLatin1String("sgd"));
  refreshing_ = false;
  refreshLossFit();

  const auto [samples, known] = trainSamples(p, *cache_);
  samplesNote_->setText(known ? tr("Planned for %1 training samples.").arg(q(ml::withThousands(samples)))
                              : tr("Load the data set on the Data page for exact step counts."));
  try {
    const ml::RunPlan plan = ml::planRun(p, allReplicaCount(p), known ? samples : std::max<int64_t>(globalBatch(p), 1) * 100);
    setRole(sentence_, "planSentence");
    QString text = q(plan.sentence());
    if (p.distribute.workers > 1)
      text = tr("%1 workers × %2 local replica(s) (%3 in all, under mpirun; the all-reduce sums locally, then across the "
                "workers with MPI): ")
                 .arg(p.distribute.workers)
                 .arg(replicaCount(p))
                 .arg(allReplicaCount(p)) +
             text;
    sentence_->setText(text);
    QStringList w;
    for (const auto& s : plan.warnings) w << QStringLiteral("⚠ ") + q(s).toHtmlEscaped();
    warnings_->setText(w.join(QStringLiteral("<br>")));
    warnings_->setVisible(!w.isEmpty());
  } catch (const ml::UserError& e) {
    setRole(sentence_, "error");
    sentence_->setText(q(e.what()));
    warnings_->hide();
  }
}

}  // namespace mlui
