#include "learn/RunChooser.h"

#include <QComboBox>
#include <QSignalBlocker>

namespace mlui {

int fillRunCombo(QComboBox* combo, const std::vector<ml::RunSummary>& runs, int fixed) {
  const QVariant keep = combo->currentData();
  QSignalBlocker block(combo);
  while (combo->count() > fixed) combo->removeItem(fixed);
  for (const auto& s : runs)
    combo->addItem(
        QObject::tr("run %1 · %2 · %3").arg(s.id).arg(QString::fromStdString(s.name), QString::fromStdString(s.devices)),
        QVariant::fromValue<qlonglong>(s.id));
  const int at = keep.isValid() ? combo->findData(keep) : -1;
  combo->setCurrentIndex(at >= 0 ? at : combo->count() > 0 ? 0 : -1);
  return combo->currentIndex();
}

void selectRunQuietly(QComboBox* combo, int64_t runId) {
  const int at = combo->findData(QVariant::fromValue<qlonglong>(runId));
  if (at < 0 || at == combo->currentIndex()) return;
  QSignalBlocker block(combo);
  combo->setCurrentIndex(at);
}

}  // namespace mlui
