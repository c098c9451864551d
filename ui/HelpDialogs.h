// Help menu contents that work offline: the README's user guide (built into the program) and the
// keyboard shortcuts of every menu action.
#pragma once
#include <QString>

class QWidget;
class QMenuBar;

namespace mlui {

// The README as shipped in the resources, without the build/benchmark sections a user does not need.
QString userGuideMarkdown();
void showUserGuide(QWidget* parent);
// Lists "Menu > Action — shortcut" for every action with a shortcut in the menu bar.
QString shortcutsText(const QMenuBar* bar);
void showShortcuts(QWidget* parent, const QMenuBar* bar);

}  // namespace mlui
