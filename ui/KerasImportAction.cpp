// The studio's side of `mirrorlab-cli import`: the same core import (export/KerasImport.h).
#include "KerasImportAction.h"

#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QWidget>

#include "Async.h"
#include "export/KerasImport.h"

namespace mlui {

void startKerasImport(QObject* context, const QString& model, const QString& project,
                      const std::function<void(const QString&, const QString&)>& done) {
  const QFileInfo p(project);
  ml::ImportRequest r;
  r.model = model.toStdString();
  r.project = project.toStdString();
  r.weights = (p.absolutePath() + QLatin1Char('/') + p.completeBaseName() + QStringLiteral(".mlw")).toStdString();
  runAsync<std::string>(
      context, [r] { return ml::runImport(r).projectPath; },
      [done](const Outcome<std::string>& o) {
        if (o.value)
          done(QString::fromStdString(*o.value), QString());
        else
          done(QString(), o.error);
      });
}

void importKerasModel(QWidget* parent, const std::function<void(const QString&)>& open,
                      const std::function<void(const QString&, const QString&)>& showError) {
  const QString model = QFileDialog::getOpenFileName(parent, QObject::tr("Import a Keras model"), QDir::homePath(),
                                                     QObject::tr("Keras 3 models (*.keras);;All files (*)"));
  if (model.isEmpty()) return;
  const QFileInfo m(model);
  const QString project =
      QFileDialog::getSaveFileName(parent, QObject::tr("Save the imported project as (its weights go beside it, .mlw)"),
                                   m.absolutePath() + QLatin1Char('/') + m.completeBaseName() + QStringLiteral(".json"),
                                   QObject::tr("Mirrorlab projects (*.json)"));
  if (project.isEmpty()) return;
  startKerasImport(parent, model, project, [open, showError](const QString& path, const QString& error) {
    if (error.isEmpty())
      open(path);
    else
      showError(QObject::tr("Cannot import the Keras model"), error);
  });
}

}  // namespace mlui
