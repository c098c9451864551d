// Fills File > Open Example from the shipped examples.
#include "welcome/ExamplesMenu.h"

#include <QMenu>

#include "project/SharedData.h"

namespace mlui {

static QString q(const std::string& s) { return QString::fromStdString(s); }

void setUpExamplesMenu(QMenu* menu, std::function<void(const QString&)> open,
                       std::function<void(const QString&, const QString&)> fail) {
  QObject::connect(menu, &QMenu::aboutToShow, menu, [menu, open, fail] {
    menu->clear();
    const ml::SharedDataDir dir = ml::findSharedData();
    const auto examples = ml::listExampleProjects(dir.projectsDir);
    for (const auto& e : examples) {
      const QString path = q(e.path), error = q(e.error);
      QAction* a = menu->addAction(error.isEmpty() ? q(e.name) : QObject::tr("%1 (cannot be read)").arg(q(e.name)));
      a->setToolTip(error.isEmpty() ? path : error);
      QObject::connect(a, &QAction::triggered, menu, [open, fail, path, error] {
        if (error.isEmpty())
          open(path);
        else
          fail(QObject::tr("Cannot open the example"), error);
      });
    }
    if (examples.empty()) {
      QAction* none = menu->addAction(QObject::tr("No examples found"));
      const QString where = q(ml::describeSharedDataSearch());
      QObject::connect(none, &QAction::triggered, menu, [fail, where] {
        fail(QObject::tr("No example projects"), QObject::tr("No example projects were found. Searched:\n%1Reinstall Mirrorlab "
                                                             "(package mirrorlab-cli) to restore them.")
                                                     .arg(where));
      });
    }
  });
}

}  // namespace mlui
