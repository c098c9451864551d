// File > Open Example: the shipped example projects (ml::findSharedData), listed by name; a damaged
// one is listed by its file name and, when chosen, says what is wrong with it and where.
#pragma once
#include <functional>

#include <QString>

class QMenu;

namespace mlui {

// Refills menu each time it is about to show. open(path) opens a readable example;
// fail(title, message) reports a damaged one or an empty search.
void setUpExamplesMenu(QMenu* menu, std::function<void(const QString&)> open,
                       std::function<void(const QString&, const QString&)> fail);

}  // namespace mlui
