// The run list of the Learn panels' "Run" combo boxes (item data = run id).
#pragma once
#include <cstdint>
#include <vector>

#include "store/RunStore.h"

class QComboBox;

namespace mlui {

// Refills the combo without emitting: keeps its first `fixed` items, adds "run 12 · name · cpu:4"
// for every run, and keeps the chosen run when it is still listed. Returns the index now chosen
// (-1 when the combo is empty).
int fillRunCombo(QComboBox* combo, const std::vector<ml::RunSummary>& runs, int fixed);
// Chooses the run's item without emitting, when it is listed.
void selectRunQuietly(QComboBox* combo, int64_t runId);

}  // namespace mlui
