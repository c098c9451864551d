// Help menu contents that work offline: the user guide (the README, docs/ and bench/RESULTS.md,
// built into the program, their links followed inside it) and the keyboard shortcuts of every menu action.
#pragma once
#include <QString>

class QWidget;
class QMenuBar;

namespace mlui {

// The README as shipped in the resources, without its pictures (they live in the source tree).
QString userGuideMarkdown();
void showUserGuide(QWidget* parent);
// Lists "Menu > Action — shortcut" for every action with a shortcut in the menu bar.
QString shortcutsText(const QMenuBar* bar);
void showShortcuts(QWidget* parent, const QMenuBar* bar);

}  // namespace mlui
