// Linked into every studio test program: installs the screens' words (project/ScreenWords.h) when
// the application object is made, as the studio's main() does before its window.
#include <QCoreApplication>

#include "project/ScreenWords.h"

namespace {

void installScreenWords() { ml::setFieldWords(&ml::screenWords()); }

}  // namespace

Q_COREAPP_STARTUP_FUNCTION(installScreenWords)
