// File › Import Keras Model…: a Keras 3 Sequential model (.keras) becomes a project and its
// weights beside it, imported off the UI thread, then opened; a refused file is shown with why.
#pragma once
#include <functional>

#include <QString>

class QWidget;
class QObject;

namespace mlui {

// Asks for the .keras file and where the project goes (its weights: the same name, .mlw), then
// imports; open(projectPath) on success, showError(title, message) when the file is refused.
void importKerasModel(QWidget* parent, const std::function<void(const QString&)>& open,
                      const std::function<void(const QString&, const QString&)>& showError);

// The import alone (no dialogs), for the action and its test: done(projectPath, error) on the
// context's thread, exactly one of them empty.
void startKerasImport(QObject* context, const QString& model, const QString& project,
                      const std::function<void(const QString&, const QString&)>& done);

}  // namespace mlui
