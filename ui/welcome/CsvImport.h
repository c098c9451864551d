// "Import a CSV file": a new project around the user's table. The label column is one named
// label/class/target/y, else the last; the model gets one input per other column and one output
// per class (or one for a regression target), so it trains as it stands.
#pragma once
#include <QString>

#include "project/Project.h"

namespace mlui {

// Reads the file with the core's CSV reader; throws ml::UserError naming the file and the fix.
ml::Project csvProject(const QString& path);

}  // namespace mlui
