// The Training screen: epochs, batch size (global or per device), learning rate with its scaling
// rule and warm-up, optimizer and its arguments, accumulation, seed, the precision policy and its
// loss scaling — and, live, the sentence
// from core's RunPlan that spells out what will happen, with its warnings.
#pragma once
#include <memory>

#include <QWidget>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QFormLayout;
class QLabel;
class QLineEdit;
class QSpinBox;

namespace mlui {

class DataCache;
class ProjectDocument;

class TrainingSettingsView : public QWidget {
  Q_OBJECT
 public:
  TrainingSettingsView(ProjectDocument* doc, std::shared_ptr<DataCache> cache, QWidget* parent = nullptr);
  QLabel* sentenceLabel() const { return sentence_; }
  QComboBox* lossBox() const { return loss_; }
  QComboBox* metricBox() const { return metric_; }
  QCheckBox* fromLogitsBox() const { return fromLogits_; }
  // What the data's labels are and whether the loss and the last layer take them.
  QLabel* lossFitLabel() const { return lossFit_; }
  QSpinBox* checkpointEveryBox() const { return checkpointEvery_; }
  QComboBox* checkpointUnitBox() const { return checkpointUnit_; }
  QSpinBox* checkpointKeepBox() const { return checkpointKeep_; }
  QLabel* warningsLabel() const { return warnings_; }
  void refresh();

 private:
  void write(const QString& what, const QString& key);

  ProjectDocument* doc_;
  std::shared_ptr<DataCache> cache_;
  void setToolTips();
  void buildLossRows(QFormLayout* form, QWidget* page);
  void buildCheckpointRows(QFormLayout* form, QWidget* page);
  void refreshLossFit();
  bool refreshing_ = false;
  QSpinBox *epochs_, *batch_, *accumulate_, *seed_, *refBatch_, *lossGrowth_;
  QComboBox *batchMode_, *scaling_, *optimizer_, *precision_;
  QDoubleSpinBox *lr_, *warmup_, *momentum_, *beta1_, *beta2_, *rho_, *epsilon_, *lossScale_;
  QCheckBox *nesterov_, *lossScaling_;
  QLineEdit* decayEpochs_;  // "4" or "3, 7": the rate is multiplied by decayFactor_ after those epochs
  QDoubleSpinBox* decayFactor_;
  QFormLayout* optForm_;
  QLabel* sentence_;
  QLabel* warnings_;
  QLabel* samplesNote_;
  QComboBox *loss_, *metric_, *checkpointUnit_;
  QCheckBox* fromLogits_;
  QLabel* lossFit_;
  QSpinBox *checkpointEvery_, *checkpointKeep_;
};

}  // namespace mlui
